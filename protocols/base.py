"""The protocol classes: what every protocol module subclasses, with every hook declared.

A protocol decides who talks to whom, what is sent and what is done on arrival. Three
base classes, one per way of running (the engine picks its schedule by type):

- :class:`Protocol`: synchronous rounds on the ``rounds`` clock only (``all_reduce``);
- :class:`BarrierProtocol`: rounds planned once (:meth:`BarrierProtocol.plan`) and run
  on both clocks, as barrier rounds of flows on the ``network`` clock;
- :class:`ContinuousProtocol`: continuous time; on the ``network`` clock its own SimPy
  process (:meth:`ContinuousProtocol.network_process`) sends flows whenever it likes.

Under ``schedule: async`` (network clock; :func:`schedules_of` says who runs there) a
:class:`GroupProtocol` forms its groups one at a time by hivemind's matchmaking, a
:class:`MailboxProtocol` sends and mixes what has arrived at each peer's own step, a
collective :class:`BarrierProtocol` (``collective``) waits for every present peer's local
work before each attempt, and a :class:`ContinuousProtocol` runs unchanged.

Each class's docstring lists exactly what a subclass sets, must implement and may
override. The types exchanged with the engine live in :mod:`protocols.contract`;
defining a concrete class registers it (:mod:`protocols._registry`). A protocol picks
groups or neighbours on the host (numpy, with the generator it was given) and hands the
arithmetic to pure kernels in :mod:`sim.kernels`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from protocols import _registry
from protocols._async_groups import async_rules
from protocols._common import wire_of
from protocols.contract import (
    Context,
    GroupPlan,
    Matchmaking,
    RoundPlan,
    RoundStats,
    RowValues,
    RowWatcher,
    RunEnv,
    State,
)
from protocols.footprint import Footprint
from sim.core.backend import to_numpy
from sim.core.section import StrictSection
from sim.kernels._xp import namespace, take_rows
from sim.kernels.compression import Wire

if TYPE_CHECKING:
    import simpy

#: The invariants a protocol may declare in :attr:`Protocol.invariants`, by name. The
#: stateful tests (``tests/property/test_stateful_*.py``) build small runs of every
#: registered protocol, preempt and restore peers at arbitrary moments and check each
#: invariant in force after every step; ``docs/guarantees.md`` lists them per protocol.
#: Values changed by a rejoin (``reset``, ``fetch``) are accounted for, not counted as
#: a violation.
INVARIANTS: dict[str, str] = {
    "sum": "the global sum Σ_i x_i is kept to round-off (relative 1e-12 in float64) "
    "at every measurement (after ``sync`` for lazily updated protocols)",
    "weight_sum": "push-sum: Σ_i w_i is kept to round-off, shares in flight included",
    "positive_weights": "push-sum: every w_i stays > 0",
    "momentum_sum": "A²CiD²: Σ_i (x_i + x̃_i) is kept to round-off at every instant",
    "hull": "every estimate stays inside the per-coordinate [min, max] of the inputs "
    "(the initial vectors and any drawn by a rejoin), to round-off",
    "drift_reported": "barrier rounds: RoundStats.mean_drift equals the change of the "
    "global mean's norm / sqrt(dim) over the round (0 where the sum is kept)",
    "absent_unchanged": "a peer absent for a round (rounds clock), absent at its start or "
    "lost during it (network barrier rounds), or absent between two instants "
    "(continuous time) keeps its x and protocol arrays bit for bit",
    "atomic_exchanges": "network clock, continuous time: an exchange or push is applied at "
    "both ends or neither, exactly when all its flows were delivered; only the ends of "
    "applied exchanges change",
}

#: Invariants on x that a lossy wire (one that is not ``exact``) breaks.
WIRE_SENSITIVE = frozenset({"sum", "hull", "momentum_sum"})


class ProtocolParams(StrictSection):
    """Parameters of a protocol; subclasses add ``name: Literal[...]`` and their fields
    (strict, frozen, no boolean for a number: :class:`~sim.core.section.StrictSection`)."""


class Protocol(ABC):
    """Base of every protocol; a direct subclass runs on the ``rounds`` clock only.

    A concrete protocol lives in ``protocols/<name>.py``, whose docstring gives the
    algorithm, its messages and its invariants table. Defining the class registers it
    under ``Params.name`` (:meth:`__init_subclass__`, rules in :mod:`protocols._registry`).
    To run on the ``network`` clock too, subclass :class:`BarrierProtocol` (rounds planned
    once) or :class:`ContinuousProtocol` (a process in continuous time) instead.

    A subclass **sets** (class attributes):

    - ``Params``: a :class:`ProtocolParams` with ``name: Literal["<name>"] = "<name>"``
      and the protocol's fields (required: a class without one is only an intermediate
      base, never registered, and must leave a hook abstract);
    - ``description``: one line for ``avsim list`` (required);
    - ``invariants``: names of :data:`INVARIANTS` kept with the default parameters;
    - ``counter_names``: the event counts kept in ``counters`` (summary fields);
    - ``state_arrays``, ``compressed_arrays``: the memory model (:meth:`footprint`).

    A subclass **implements** :meth:`round` (a :class:`BarrierProtocol` gets it from
    :meth:`~BarrierProtocol.plan`).

    A subclass **may override** (default in brackets):

    - ``__init__(params, ctx)``: build tables, draw from ``ctx.rng`` [store both, zero
      ``counters``]; call ``super().__init__`` first;
    - :meth:`footprint`: memory and flows of a run [``state_arrays`` only];
    - :meth:`invariants_in_force`: narrow ``invariants`` for the parameters in use
      [less :data:`WIRE_SENSITIVE` on a lossy wire; under ``schedule: async`` less
      ``drift_reported`` for group and mailbox protocols];
    - :meth:`init_state`: add arrays to ``state.extra`` [none];
    - :meth:`describe`: derived constants for ``avsim info`` [none];
    - :meth:`estimate`: each peer's estimate of the mean [``state.x``];
    - :meth:`estimate_rows`, ``decay_rate``, :attr:`events_keep_sum`: the estimates of a
      few rows for the exact-target tracker [rows of :meth:`estimate`, constant];
    - :meth:`conserved_mean`: the average the protocol conserves [the estimates' mean];
    - :meth:`sync_rows`: bring rows up to a time before a ``fetch`` copies them [nothing].

    A subclass **reads** ``self.params``, ``self.ctx`` (:class:`Context`: sizes, the
    protocol's generator, the peer table), ``self.wire`` (the
    :class:`~sim.kernels.compression.Wire` its vectors travel on, built once from
    ``params.compression``; hand it to the kernels) and ``self.watcher`` (set by the
    engine: tell it about every state change when it is not None), and counts in
    ``self.counters``.
    """

    Params: ClassVar[type[ProtocolParams]]
    description: ClassVar[str] = ""
    #: Event counts the protocol keeps in ``counters``; each is a field of the run's
    #: summary (0 when the protocol never counted it, e.g. on the other clock).
    counter_names: ClassVar[tuple[str, ...]] = ()
    #: The invariants (names of :data:`INVARIANTS`) the protocol keeps with its default
    #: parameters; :meth:`invariants_in_force` narrows them for a given configuration.
    invariants: ClassVar[frozenset[str]] = frozenset()
    #: Memory model (:mod:`sim.engine.resources`): (N, dim) arrays of the state's dtype alive at
    #: the peak of a round — x, the protocol's own arrays, the round's temporaries — and
    #: the extra ones when the wire compresses. :meth:`footprint` adds what else the
    #: protocol keeps (graphs, flows); each protocol's figures are checked against
    #: measured peaks in ``tests/integration/test_resources.py``.
    state_arrays: ClassVar[float] = 1.0
    compressed_arrays: ClassVar[float] = 0.0

    @classmethod
    def footprint(cls, params: Any, n_peers: int, dim: int, itemsize: int, clock: str) -> Footprint:
        """What a run of this protocol costs (:class:`~protocols.footprint.Footprint`),
        from its parameters and the run's sizes alone (nothing is built). Default:
        :attr:`state_arrays` (plus :attr:`compressed_arrays` when the wire compresses),
        no tables, no flows."""
        compressed = not wire_of(params).exact
        return Footprint(cls.state_arrays + (cls.compressed_arrays if compressed else 0.0))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Register a concrete protocol class (one that sets ``Params`` itself) under
        ``Params.name``; refuse a class that breaks a rule of :mod:`protocols._registry`,
        or that is neither abstract nor given ``Params`` (it could never be run)."""
        super().__init_subclass__(**kwargs)
        if "Params" in vars(cls):
            _registry.register(cls)
        elif not hasattr(cls, "Params") and not _registry.abstract_methods(cls):
            raise TypeError(
                f"protocol class {cls.__module__}.{cls.__qualname__} implements every hook "
                "but sets no Params: give it a ProtocolParams with its name"
            )

    def __init__(self, params: Any, ctx: Context) -> None:
        self.params = params
        self.ctx = ctx
        #: How the protocol's vectors travel (built once from ``params.compression``).
        self.wire: Wire = wire_of(params)
        self.counters: dict[str, int] = dict.fromkeys(self.counter_names, 0)

    def invariants_in_force(
        self, clock: str = "rounds", rejoin: str = "keep", schedule: str = "barrier"
    ) -> frozenset[str]:
        """The invariants this instance keeps on ``clock`` (``rounds`` or ``network``)
        with the scenario's ``churn.rejoin`` rule and ``schedule`` (``barrier`` or
        ``async``; the rounds clock is always ``barrier``): :attr:`invariants`, less
        :data:`WIRE_SENSITIVE` when the wire compresses, and under ``async`` less
        ``drift_reported`` for a :class:`GroupProtocol` or a :class:`MailboxProtocol`:
        they run in per-peer steps, not rounds, so no ``RoundStats`` reports a drift
        (``mean_drift`` is measured from the state). A collective still runs barrier
        rounds under ``async``, and a continuous-time protocol runs unchanged. Protocols
        whose parameters weaken another invariant override this."""
        kept = self.invariants if self.wire.exact else self.invariants - WIRE_SENSITIVE
        if schedule == "async" and isinstance(self, GroupProtocol | MailboxProtocol):
            return kept - {"drift_reported"}
        return kept

    # B027: optional hooks with a do-nothing default, not abstract (Ciw's strategy objects)
    def init_state(self, state: State) -> None:  # noqa: B027
        """Add protocol arrays to ``state.extra`` (default: none)."""

    @abstractmethod
    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """Run round ``t`` (0-based) of the rounds clock over the peers where ``present``
        ((n_peers,) bool) is true, in place on ``state``; absent peers take no part."""

    def describe(self) -> dict[str, Any]:
        """Quantities the protocol derives from the scenario (for ``avsim info``)."""
        return {}

    def estimate(self, state: State) -> Any:
        """Each peer's current estimate of the average (default: ``state.x``). Row-wise:
        a peer's estimate depends only on its own rows of ``state.x`` and ``state.extra``."""
        return state.x

    #: Set by the engine: told about every change of state rows (:class:`RowWatcher`; the
    #: exact-target tracker, :mod:`sim.engine.observe.tracker`). None: nobody listens.
    watcher: RowWatcher | None = None
    #: ρ (per unit of time) of :meth:`estimate_rows`: 0 when rows are constant between
    #: the protocol's events; A²CiD² 2η.
    decay_rate: float = 0.0

    @property
    def events_keep_sum(self) -> bool:
        """True when each event reported to :attr:`watcher` keeps the sums Σa and Σd of
        its rows' :meth:`estimate_rows` (to round-off; both ends at one instant), so the
        watcher need not read the rows before it. Default False."""
        return False

    def estimate_rows(self, state: State, rows: np.ndarray) -> RowValues:
        """The estimates of peers ``rows`` ((k,) distinct) as float64 host arrays, as
        functions of time until their next change (see :class:`RowValues`). Default:
        the rows of :meth:`estimate`, constant (``d`` None)."""
        x = state.x
        if type(x) is np.ndarray and type(self).estimate is Protocol.estimate:
            return RowValues(x.take(rows, axis=0).astype(np.float64, copy=False))
        sub = State(
            take_rows(namespace(state.x), state.x, rows),
            {k: take_rows(namespace(v), v, rows) for k, v in state.extra.items()},
        )
        return RowValues(np.asarray(to_numpy(self.estimate(sub)), dtype=np.float64))

    def estimate_pairs_into(
        self, state: State, pairs: np.ndarray, slots: np.ndarray, a: np.ndarray, d: np.ndarray
    ) -> bool:
        """:meth:`estimate_rows` of the rows of ``pairs`` ((P, 2) peers), written into the
        (S, 2, dim) float64 arrays ``a`` and ``d`` at ``slots`` ((P,)) with the same values,
        where a protocol has a faster way (A²CiD²'s compiled loop); returns False, having
        written nothing, where it has not (the default): the caller then uses
        :meth:`estimate_rows`. Called by the closed-form exchanges' watched segments
        (:mod:`protocols._solo_exchanges`) after each wave."""
        return False

    def sync_rows(self, state: State, rows: np.ndarray, now: float) -> None:  # noqa: B027
        """Bring peers ``rows`` to simulated time ``now`` before their rows are copied
        (a ``fetch`` rejoin on the network clock), for protocols that update peers lazily
        (A²CiD²). Default: nothing."""

    def conserved_mean(self, state: State, rows: np.ndarray | None = None) -> Any:
        """The average this protocol conserves over peers ``rows`` (None: all), whose
        distance to the initial mean is ``mean_drift`` (:mod:`sim.engine.recorder`): a (dim,)
        float64 array, or None for the mean of :meth:`estimate` (the default, which the
        recorder computes with the variance). Push-sum: Σx / Σw."""
        return None


class BarrierProtocol(Protocol):
    """A protocol of rounds, each planned once and run by either clock.

    :meth:`plan` fixes a round: its random draws, its groups or pairs, the flows they
    send and the arithmetic to do once they have ended (:class:`RoundPlan`). The network
    clock sends the flows as a barrier round, then calls ``finish`` with the peers lost
    meanwhile; the rounds clock calls ``finish`` at once with nobody lost (the default
    :meth:`round`). So the two clocks draw the same numbers in the same order and, with
    nobody lost, do the same arithmetic bit for bit.

    A subclass **implements** :meth:`plan`, whose ``finish`` uses only what the plan
    fixed (it never calls :meth:`round`: that would draw a second time); build the flow
    arrays in ``RoundPlan.flows``, which only the network clock calls.

    A subclass **may override** :meth:`round` only where its rounds clock is an
    idealisation of its network plan (Moshpit: groups by key at once, where the network
    clock matchmakes in simulated time). The override must draw from ``ctx.rng`` what
    :meth:`plan` draws, in the same order, and the clocks' equivalence tests must pass.

    A subclass **may set** ``collective`` [False]: True for a collective (ring
    all-reduce) that also runs under ``schedule: async``, where each attempt starts once
    every present peer has done its local work (``peers.compute`` + ``delay``). Without
    it (and unless it is a :class:`GroupProtocol`), ``schedule: async`` is refused.
    Everything else as :class:`Protocol`.
    """

    #: A collective: under ``schedule: async`` an attempt waits for every present
    #: peer's local work (:class:`sim.engine.collective.CollectiveEngine`).
    collective: ClassVar[bool] = False

    @abstractmethod
    def plan(self, present: np.ndarray, t: int) -> RoundPlan:
        """Plan round ``t`` (0-based) among the peers where ``present`` ((n_peers,)
        bool, the peers present when the round starts) is true."""

    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """The rounds clock: :meth:`plan`, then its ``finish`` with nobody lost."""
        return self.plan(present, t).finish(state, self.nobody_lost)

    @cached_property
    def nobody_lost(self) -> np.ndarray:
        """(n_peers,) bool, all false and read-only: ``lost`` on the rounds clock."""
        lost = np.zeros(self.ctx.n_peers, dtype=bool)
        lost.flags.writeable = False
        return lost


class ContinuousProtocol(Protocol):
    """A protocol in continuous time: events at their own instants, no rounds.

    On the rounds clock :meth:`round` runs one unit of time (the events that fall in
    it, applied at once in their order). On the network clock the engine starts
    :meth:`network_process` as a SimPy process that sends flows whenever the protocol
    likes and updates the state as they end, and calls :meth:`sync` before every
    measurement.

    A subclass **implements** :meth:`round`, :meth:`network_process` and :meth:`sync`;
    a protocol that updates peers lazily (A²CiD²'s mixing between events) also
    overrides :meth:`sync_rows`, ``decay_rate`` and :meth:`estimate_rows`. Everything
    else as :class:`Protocol`.
    """

    @abstractmethod
    def network_process(self, run: RunEnv) -> Generator[simpy.Event, Any, None]:
        """The SimPy process body of the network clock (it runs until the run ends);
        ``run`` gives the environment, the flow network, who is present and the state."""

    @abstractmethod
    def sync(self, state: State, now: float) -> None:
        """Bring every peer's rows to simulated time ``now`` (the engine measures right
        after); nothing for a protocol whose state is current at every instant."""


class GroupProtocol(BarrierProtocol):
    """A barrier protocol whose groups also form one at a time under ``schedule: async``
    (moshpit, random_groups): every present peer loops over its local work and a group
    step, and groups form by hivemind's matchmaking (:mod:`sim.engine.matchmaking`)
    instead of in rounds. Barrier rounds (:meth:`plan`) are unchanged.

    A subclass **implements**, besides what :class:`BarrierProtocol` asks:

    - :meth:`group_key`: the key a peer declares itself under at a step;
    - :meth:`matchmaking`: the rules (:class:`~protocols.contract.Matchmaking`);
    - :meth:`group_plan`: one assembled group's flows and arithmetic
      (:class:`~protocols.contract.GroupPlan`), which draws nothing from ``ctx.rng``
      (the leader's draws come with the group).

    A subclass **may override** :meth:`count_too_small` [count nothing]. Everything
    else as :class:`BarrierProtocol`.
    """

    @abstractmethod
    def group_key(self, peer: int, step: int) -> int:
        """The key ``peer`` declares itself under at its ``step``-th averaging step
        (0-based, the steps it averaged so far)."""

    def matchmaking(self) -> Matchmaking:
        """The matchmaking rules of this protocol's parameters. Default: ``group_size``,
        ``min_group_size``, ``matchmaking_time``, ``averaging_timeout`` (null: 4 ×
        ``matchmaking_time``) and ``matchmaking_latency`` read from ``self.params``
        (:func:`protocols._async_groups.async_rules`)."""
        return async_rules(self.params)

    @abstractmethod
    def group_plan(
        self, members: np.ndarray, notify_s: np.ndarray, chunks: np.ndarray
    ) -> GroupPlan:
        """The all-reduce of one assembled group.

        Parameters
        ----------
        members
            (g,) peers in chunk order (the leader's shuffle): member k reduces part k.
        notify_s
            (g,) seconds after the assembly at which member k learns of the group and
            starts sending (0 for the leader).
        chunks
            (g,) int, member k's new key index (hivemind's generalized index), for
            protocols that re-key.
        """

    def count_too_small(self) -> None:
        """A leader's gathering closed under ``min_group_size`` and disbanded (default:
        nothing to count)."""


class MailboxProtocol(BarrierProtocol):
    """A barrier protocol that also runs as asynchronous SGP under ``schedule: async``
    (gossip, sgp): every present peer loops over its local work and one step; at its
    step it sends to its out-neighbours (one flow each) and mixes what has arrived since
    its last step (:mod:`sim.engine.mailbox`). Barrier rounds (:meth:`plan`) are unchanged.

    A subclass **implements**, besides what :class:`BarrierProtocol` asks:

    - :meth:`out_neighbours`: where a peer sends at its step (one slot each);
    - :meth:`mailbox_bytes`: the bytes of one message;
    - :meth:`post`: the payload a peer sends (and what it takes off its own rows);
    - :meth:`arrive`: what a delivered payload does to the receiver's rows (False: it
      goes to the receiver's mailbox, newest per sender);
    - :meth:`returned`: a failed message's payload back at its sender;
    - :meth:`mix`: a peer's step over its mailbox.

    Everything else as :class:`BarrierProtocol`.
    """

    @abstractmethod
    def out_neighbours(self, peer: int, step: int) -> np.ndarray:
        """(k,) int, the peers ``peer`` sends to at its ``step``-th step (0-based), one
        slot each; a slot naming ``peer`` itself sends nothing (its share stays home)."""

    @abstractmethod
    def mailbox_bytes(self) -> float:
        """Bytes of one message."""

    @abstractmethod
    def post(self, state: State, peer: int, sent: int) -> Any:
        """The payload ``peer`` sends to each of ``sent`` out-neighbours now; a
        mass-conserving protocol takes the ``sent`` shares off ``peer``'s rows."""

    @abstractmethod
    def arrive(self, state: State, peer: int, payload: Any) -> bool:
        """A message reached ``peer``: True when ``payload`` was applied to its rows,
        False when it waits in ``peer``'s mailbox for its next step."""

    @abstractmethod
    def returned(self, state: State, peer: int, payload: Any) -> None:
        """A message ``peer`` sent failed (an end preempted): give back what
        :meth:`post` took off (nothing for a protocol that took nothing)."""

    @abstractmethod
    def mix(self, state: State, peer: int, mailbox: dict[int, Any]) -> None:
        """``peer``'s step: mix its rows with ``mailbox`` (sender → newest payload; not
        empty)."""


def schedules_of(cls: type[Protocol]) -> tuple[str, ...]:
    """The network clock's schedules a protocol class runs: ``("barrier", "async")`` for
    group and mailbox protocols, collectives and continuous-time protocols, ``("barrier",)`` for
    other barrier protocols, ``()`` for a rounds-only :class:`Protocol`."""
    if issubclass(cls, GroupProtocol | MailboxProtocol | ContinuousProtocol):
        return ("barrier", "async")
    if issubclass(cls, BarrierProtocol):
        return ("barrier", "async") if cls.collective else ("barrier",)
    return ()


def clocks_of(cls: type[Protocol]) -> tuple[str, ...]:
    """The clocks a protocol class runs on: ``("rounds", "network")``, or ``("rounds",)``
    for a plain :class:`Protocol`."""
    if issubclass(cls, (BarrierProtocol, ContinuousProtocol)):
        return ("rounds", "network")
    return ("rounds",)
