"""Barrier rounds of independent flows timed in one shot (issue 13, figure G1).

A gossip or SGP round (any :class:`~protocols.contract.RoundPlan` whose
:class:`~protocols.contract.Flows` have no gate, no ``after``, no timeout and no stream)
declares all its flows when it starts. When the network carries nothing else and no
other event of the run falls inside the round, the round's completion times follow from
the fluid model alone (:func:`sim.network.oneshot.round_timeline`): the round then costs
a few SimPy timeouts that land exactly where its last flow ends, instead of a ``Flow``,
a ``done`` event and a callback per message. Its counters (messages, refused messages,
each peer's bytes, the network's flow counts) are those the general path leaves.

Anything that could interrupt the round — churn, a rejoin's download, ``max_time``, any
other process's event at or before the round's end (SimPy's ``peek``) — sends the round
down the general path (:meth:`sim.engine.netclock.NetworkClock.transmit`) whole, as do a
tracer (or anyone wrapping ``net.send`` to watch every flow), a zero route latency, and
rounds whose fluid model has more breakpoints or levels than :data:`BUDGET`
(heterogeneous bandwidths: the general path's per-component solver is cheaper there;
after :data:`GIVE_UP_AFTER` such rounds in a row a run stops trying).
Results are the general path's: vectors and counters identical, times to round-off
(``tests/property/test_round_solver.py`` runs both side by side).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from protocols.contract import Flows, RoundPlan
from sim.engine.netclock import NetworkClock
from sim.network import FlowNetwork
from sim.network.oneshot import RouteTable, round_timeline

#: The switch: False sends every barrier round down the general path.
ENABLED = True
#: Most solver steps (events replayed, filling iterations) a one-shot round may take.
BUDGET = 64
#: Rounds over :data:`BUDGET` in a row after which a run stops trying the one-shot path.
GIVE_UP_AFTER = 3

Transmit = Callable[[RoundPlan], Generator[simpy.Event, Any, None]]


def round_sender(clock: NetworkClock) -> Transmit:
    """What a barrier engine calls to send a round: the one-shot path with the general
    one behind it, or the general path alone: switched off, or someone watching every
    ``Flow`` (a traced clock, or a network whose ``send`` is wrapped on the instance, as
    the stateful tests record flows)."""
    net = clock.net
    plain = type(clock) is NetworkClock and type(net) is FlowNetwork and not net.sends_watched
    if not (ENABLED and plain):
        return clock.transmit
    return OneShotRounds(clock).transmit


def independent(flows: Flows) -> bool:
    """Whether the flows wait for nothing but their start offset and never time out."""
    if any(x is not None for x in (flows.opens, flows.waits, flows.after, flows.previous)):
        return False
    if flows.streamed is not None and bool(flows.streamed.any()):
        return False
    return flows.timeout_s is None or bool(np.all(flows.timeout_s == np.inf))


def exact_counts(nbytes: np.ndarray) -> bool:
    """Whether every peer's byte counts come out the same in any completion order: one
    size for all flows, or whole numbers of bytes (exact sums below 2**53)."""
    if nbytes.size == 0 or bool(np.all(nbytes == nbytes[0])):
        return True
    return bool(np.all(nbytes == np.floor(nbytes))) and float(nbytes.sum()) < 2.0**52


class OneShotRounds:
    """Sends barrier rounds, one-shot where it can (see the module docstring)."""

    def __init__(self, clock: NetworkClock) -> None:
        self.clock = clock
        self.routes = RouteTable(clock.net.routes)
        self.over_budget = 0  # rounds over the budget in a row
        self.one_shot = self.general = 0  # rounds sent each way

    def transmit(self, plan: RoundPlan) -> Generator[simpy.Event, Any, None]:
        """:meth:`NetworkClock.transmit`, with the same results."""
        clock = self.clock
        net, env = clock.net, clock.env
        flows = plan.flows()
        timeline = None
        tries = net.idle and self.over_budget < GIVE_UP_AFTER and flows.src.size > 0
        if tries and independent(flows) and exact_counts(flows.nbytes):
            start = clock.delay_s[flows.src] if flows.start_s is None else flows.start_s
            timeline = round_timeline(
                self.routes, net.sharing, flows.src, flows.dst, flows.nbytes,
                np.asarray(start, dtype=float), clock.present, float(env.now), BUDGET,
            )  # fmt: skip
            self.over_budget = self.over_budget + 1 if timeline is None else 0
        if timeline is None or env.peek() <= timeline.last_s:
            self.general += 1
            sent = RoundPlan(plan.finish, lambda: flows)
            yield from clock.transmit(sent)
            plan.delivered, plan.timed_out = sent.delivered, sent.timed_out
            return
        self.one_shot += 1
        clock.lost[:] = False
        plan.delivered = timeline.delivered
        plan.timed_out = np.zeros(flows.src.size, dtype=bool)
        for delay in timeline.chain:
            yield env.timeout(delay)
        delivered = timeline.delivered
        clock.messages += flows.src.size
        clock.failed_messages += int(flows.src.size - np.count_nonzero(delivered))
        src, dst, nbytes = flows.src[delivered], flows.dst[delivered], flows.nbytes[delivered]
        for size in np.unique(nbytes).tolist():
            same = nbytes == size
            net.count_solo(src[same], dst[same], size)
