"""What every engine shares: the run's peers, state, protocol, environment and observer.

An engine is one schedule of a run: synchronous rounds, barrier rounds of flows on the
network clock, or a protocol's own process in continuous time. :class:`Engine` builds
what all of them use, in a fixed order (Ciw-style: resolve peers → draw the initial
vectors → build the protocol → the observer), each component from its own generator
(:func:`sim.core.seeding.component_rng`); a subclass adds what its schedule needs and
implements the hooks below. Nothing global: everything a run touches hangs off its
engine. What is measured and when the run stops is the observer's
(:mod:`sim.engine.observe`), the same for every engine.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterator
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import simpy

import protocols
from protocols.base import ContinuousProtocol, Protocol
from protocols.contract import Context, State
from sim.core.backend import array_module
from sim.core.seeding import component_rng
from sim.engine.observe.observer import Observer
from sim.engine.trace import Tracer
from sim.engine.training import start_for, trainer_for
from sim.model.churn import ChurnSchedule, build_schedule
from sim.model.churn.membership import MembershipSchedule
from sim.model.peers import resolve_peers
from sim.model.scenario.models import Scenario
from sim.model.vectors import initial_vectors

#: ``progress(fraction)``: told how far the run is towards its bounds (0 … 1).
Progress = Callable[[float], None]


class Engine(ABC):
    """One run on one schedule; subclasses are the schedules.

    A subclass **sets**:

    - ``scenario_clock``: the scenario ``clock`` it runs (``rounds``, ``network``);
    - ``protocol_type``: the protocol classes it runs (:mod:`protocols.base`);
    - ``schedules``: the scenario ``schedule`` values it runs [``barrier``].
      :func:`sim.engine.schedules.engine_for` picks the engine whose :meth:`serves` accepts the
      scenario's clock and protocol class, and whose ``schedules`` hold its schedule;
    - ``reports_events``: True when its state changes between samples are reported to the
      tracker one at a time [False; continuous-time protocols report their own].

    A subclass **implements**:

    - :meth:`process`: the SimPy process body; it measures with :meth:`observe` (the
      first time with ``first=True``) until the observer says the run ends, and reports
      progress with :meth:`report`.

    A subclass **may override** (default in brackets):

    - ``__init__``: build what its schedule uses (churn, network), after
      ``super().__init__``;
    - :meth:`serves`: which scenarios and protocols it runs [``scenario_clock`` and
      ``protocol_type``];
    - :meth:`simulate`: start :meth:`process` and run the environment [until it ends];
    - :meth:`now`: (round, time) of a change, for the exact-target tracker [the round
      under way];
    - :meth:`tables`: extra result tables [none];
    - :meth:`summary_fields`: extra summary fields [none].

    Shared attributes: ``scenario``, ``seed``, ``peers`` (the peer table), ``xp``,
    ``state``, ``mean0`` (the initial mean), ``protocol``, ``exists`` and ``present``
    ((n_peers,) bool masks), ``env``, ``observer`` (with ``recorder`` and ``tracker``),
    and the counters ``rounds``, ``bytes_sent``, ``messages``.
    """

    scenario_clock: ClassVar[str]
    protocol_type: ClassVar[type] = Protocol
    #: The ``schedule`` values it runs (:func:`sim.engine.schedules.engine_class`).
    schedules: ClassVar[frozenset[str]] = frozenset({"barrier"})
    #: The state changes between samples, reported to the tracker event by event
    #: (continuous-time protocols report their own; ``schedule: async`` its groups).
    reports_events: ClassVar[bool] = False

    @classmethod
    def serves(cls, clock: str, protocol_type: type[Protocol]) -> bool:
        """True when this engine runs ``protocol_type`` on ``clock``."""
        return clock == cls.scenario_clock and issubclass(protocol_type, cls.protocol_type)

    def __init__(
        self, scenario: Scenario, seed: int, interrupt: threading.Event | None = None
    ) -> None:
        self.scenario, self.seed = scenario, seed
        n_initial = scenario.peers.count
        n = n_initial + scenario.churn.joining  # every peer that will ever exist
        self.peers = resolve_peers(scenario.peers, component_rng(seed, "peers"), n)
        self.xp = array_module(scenario.backend)
        x0 = start_for(scenario, initial_vectors(scenario.vector, n, component_rng(seed, "init")))
        self.state = State(x=self.xp.asarray(x0))
        self.mean0 = self.xp.mean(self.xp.asarray(x0[:n_initial], dtype=self.xp.float64), axis=0)
        itemsize = np.dtype(scenario.vector.dtype).itemsize
        vector, rng = scenario.vector, component_rng(seed, "protocol")
        ctx = Context(n, vector.dim, itemsize, rng, self.peers, vector.wire_bytes)
        self.protocol = protocols.get(scenario.protocol.name)(scenario.protocol, ctx)
        self.protocol.init_state(self.state)
        #: The peers' local optimizer with a ``workload`` (:mod:`sim.engine.training`).
        self.trainer = trainer_for(scenario, seed, self.protocol, self.state, x0)
        self.exists = np.arange(n) < n_initial
        self.present = self.exists.copy()  # who is present now
        self.rounds, self.bytes_sent, self.messages = 0, 0.0, 0
        self.observer = Observer(
            scenario, seed, self.protocol, self.state, self.mean0, interrupt, self.trainer
        )
        self.env = self.observer.environment()  # it watches the interrupt between samples
        self.recorder = self.observer.recorder
        events = self.reports_events or isinstance(self.protocol, ContinuousProtocol)
        self.tracker = self.observer.track(self._masks, self.now, events)
        #: Set by :func:`sim.engine.run` before the run when tracing (``--trace``).
        self.tracer: Tracer | None = None

    def schedule(self) -> ChurnSchedule:
        """The churn schedule of the run, masked by joins and leaves when there are any."""
        churn, n = self.scenario.churn, self.exists.size
        classes = [c.name for c in self.scenario.peers.classes or []]
        schedule = build_schedule(
            churn, n, component_rng(self.seed, "churn"),
            peer_classes=self.peers["class"].to_numpy(), class_names=classes,
        )  # fmt: skip
        if churn.joins is None and churn.leaves is None:
            return schedule
        membership = component_rng(self.seed, "membership")
        n_initial = self.scenario.peers.count
        return MembershipSchedule(schedule, n_initial, churn.joins, churn.leaves, membership)

    @abstractmethod
    def process(self, progress: Progress | None) -> Generator[simpy.Event, Any, None]:
        """The run's SimPy process body (see the class docstring)."""

    def simulate(self, progress: Progress | None = None) -> None:
        """Run the simulation until a stop rule fires."""
        self.env.process(self.process(progress))
        with frozen_heap():
            self.env.run()

    def now(self) -> tuple[int, float]:
        """(round, time) of a change now: the round under way."""
        return self.rounds + 1, float(self.env.now)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Extra tables of the result (name → table); default none."""
        return {}

    def summary_fields(self) -> dict[str, Any]:
        """Summary fields of this schedule, after the protocol's counters; default none."""
        return {}

    def observe(self, present: np.ndarray, first: bool = False) -> bool:
        """Measure the state now, record a row when due or ``first``; True when the run
        ends."""
        traffic = (self.bytes_sent, self.messages)
        now = float(self.env.now)
        return self.observer.measure(present, self.exists, self.rounds, now, traffic, first)

    def report(self, progress: Progress | None) -> None:
        """Tell ``progress`` how far the run is (when it has bounds)."""
        fraction = self.observer.progress(self.rounds, float(self.env.now))
        if progress is not None and fraction is not None:
            progress(fraction)

    def _masks(self) -> tuple[np.ndarray, np.ndarray]:
        return self.exists, self.present


#: Allocations between two collections of the youngest generation inside a run
#: (:func:`frozen_heap`).
GC_YOUNG = 100_000


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Run a block with every object alive at its start (the run's set-up: imports,
    tables, state) in the garbage collector's permanent generation, so that its full
    collections do not rescan them each time a round's flows survive into the oldest
    generation (25–35 % of a network round otherwise); unfrozen after, so the next run
    of a sweep collects this run's cycles. Changes no result: nothing in a run depends on
    when the collector runs.

    The youngest generation is collected every :data:`GC_YOUNG` allocations instead of
    Python's 700: a network run allocates a ``Flow``, a ``done`` event and a callback
    per message, almost all freed by reference counting, and the default threshold ran
    a young collection every ~150 messages, scanning the flows still in flight (8–20 %
    of an async swarm's time, growing with the peers in flight). Restored after."""
    young, middle, old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(young, GC_YOUNG), middle, old)
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)
        gc.unfreeze()
