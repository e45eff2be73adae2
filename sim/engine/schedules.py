"""The engines: one per schedule a run can follow, picked by clock and protocol class.

- :class:`RoundsEngine`: ``clock: rounds``, every protocol, synchronous rounds;
- :class:`BarrierEngine`: ``clock: network``, a :class:`~protocols.base.BarrierProtocol`,
  barrier rounds of flows;
- :class:`ContinuousEngine`: ``clock: network``, a
  :class:`~protocols.base.ContinuousProtocol`, the protocol's own process in time (both
  schedules);
- :class:`AsyncEngine`: ``clock: network``, ``schedule: async``, a
  :class:`~protocols.base.GroupProtocol`: every peer's own loop, hivemind's matchmaking;
- :class:`MailboxEngine`: ``clock: network``, ``schedule: async``, a mailbox protocol
  (gossip, sgp: asynchronous SGP);
- :class:`CollectiveEngine`: ``clock: network``, ``schedule: async``, a collective
  barrier protocol: barrier rounds after every present peer's local work.

A new schedule is a subclass of :class:`~sim.engine.base.Engine` (see its docstring
for the hooks) added to :data:`ENGINES`.
"""

from __future__ import annotations

import threading

import protocols
from sim.core.errors import ScenarioError
from sim.engine.asynchronous import AsyncEngine
from sim.engine.barrier import BarrierEngine
from sim.engine.base import Engine, Progress
from sim.engine.collective import CollectiveEngine
from sim.engine.continuous import ContinuousEngine
from sim.engine.mailbox import MailboxEngine
from sim.engine.network import NetworkEngine
from sim.engine.rounds import RoundsEngine
from sim.model.scenario.models import Scenario, check_async

#: Every engine, in the order :func:`engine_class` tries them.
ENGINES: tuple[type[Engine], ...] = (
    RoundsEngine, AsyncEngine, MailboxEngine, CollectiveEngine, BarrierEngine, ContinuousEngine,
)  # fmt: skip


def engine_class(scenario: Scenario) -> type[Engine]:
    """The engine that runs ``scenario``: the first of :data:`ENGINES` that serves its
    clock and protocol class and runs its ``schedule``.

    Raises
    ------
    sim.core.errors.ScenarioError
        On ``protocol.name`` when no engine runs the protocol on the scenario's clock;
        the message lists the protocols that run there. On ``schedule`` when the
        protocol has no asynchronous form (the scenario model refuses it first).
    """
    protocol_type = protocols.get(scenario.protocol.name)
    serving = [e for e in ENGINES if e.serves(scenario.clock, protocol_type)]
    for engine in serving:
        if scenario.schedule in engine.schedules:
            return engine
    if serving:
        check_async(scenario.clock, scenario.protocol)
    names = [
        name
        for name, cls in protocols.REGISTRY.items()
        if any(e.serves(scenario.clock, cls) for e in ENGINES)
    ]
    expected = f"a protocol that runs on clock: {scenario.clock} ({', '.join(names)})"
    raise ScenarioError("protocol.name", scenario.protocol.name, expected)


def engine_for(scenario: Scenario, seed: int, interrupt: threading.Event | None = None) -> Engine:
    """The engine of one run of ``scenario`` with ``seed``, built (nothing run yet)."""
    return engine_class(scenario)(scenario, seed, interrupt)


__all__ = [
    "ENGINES",
    "AsyncEngine",
    "BarrierEngine",
    "CollectiveEngine",
    "ContinuousEngine",
    "Engine",
    "MailboxEngine",
    "NetworkEngine",
    "Progress",
    "RoundsEngine",
    "engine_class",
    "engine_for",
]
