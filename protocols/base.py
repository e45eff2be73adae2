"""What every protocol module provides: a parameter model and a protocol class.

A protocol decides who talks to whom, what is sent and what is done on arrival. On the
``rounds`` clock the engine calls :meth:`Protocol.round` once per round with the mask
of present peers; the protocol picks groups or neighbours on the host (numpy, with the
generator it was given) and hands the arithmetic to pure kernels in :mod:`sim.kernels`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple
from typing import Protocol as Interface

import numpy as np
from pydantic import BaseModel, ConfigDict

from protocols.footprint import Footprint
from sim.backend import to_numpy
from sim.kernels._xp import namespace, take_rows

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

#: Invariants on x that a lossy wire (``compression`` other than ``none``) breaks.
WIRE_SENSITIVE = frozenset({"sum", "hull", "momentum_sum"})


class ProtocolParams(BaseModel):
    """Parameters of a protocol; subclasses add ``name: Literal[...]`` and their fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class Context:
    """What a protocol may know about the run it is part of.

    Parameters
    ----------
    n_peers
        Number of peers N (rows of the state).
    dim
        Coordinates per peer.
    itemsize
        Bytes per coordinate on the wire (from ``vector.dtype``).
    rng
        The protocol's own generator, spawned from the run's ``SeedSequence``.
    peers
        The per-peer table (:func:`sim.peers.resolve_peers`: bandwidths, delays, client
        mode), or None outside a run; protocols that need it fall back to defaults.
    """

    n_peers: int
    dim: int
    itemsize: int
    rng: np.random.Generator
    peers: Any = None

    @property
    def vector_bytes(self) -> int:
        """Bytes of one full vector on the wire."""
        return self.dim * self.itemsize


@dataclass
class State:
    """All peers' vectors: ``x`` of shape (n_peers, dim) plus protocol arrays in ``extra``."""

    x: Any
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundStats:
    """What one round cost and reported.

    ``bytes_sent`` and ``messages`` are totals over all peers for the round;
    ``mean_drift`` is the change of the global mean's norm / sqrt(dim) when the protocol
    does not promise to preserve it (``uniform`` gossip, ``partial`` faults), else 0.
    """

    bytes_sent: float = 0.0
    messages: int = 0
    mean_drift: float = 0.0
    wait_s: float = 0.0  # network clock: pause before the next round (e.g. restart delay)


@dataclass
class NetRound:
    """One round on the network clock: the flows to send, then the arithmetic.

    Flows are parallel arrays with optional dependencies:

    - *gates*: a flow with ``waits[i] == g`` starts once gate g opens, i.e. once every
      flow with ``opens == g`` has ended (completed or failed). A butterfly is two gates
      per group, a ring all-reduce a chain of single-flow gates.
    - *after*: a flow with ``after[i] == j`` starts once flow j has ended; if flow j
      failed, flow i fails at once without sending (a broken stream: pieces of a part,
      a reply to a request).
    - a flow with ``streamed[i]`` set continues its ``after`` flow's stream on an open
      connection: it pays no route latency (pieces sent back to back).
    - a flow with neither gate nor ``after`` (a *root*) starts ``start_s[i]`` seconds
      after the round starts (default: its sender's straggler delay).
    - a flow still in flight ``timeout_s[i]`` seconds after it started (default: never)
      is cancelled and fails: its receiver gave up on a slow sender.

    The round ends when every flow has ended; the clock then fills ``delivered`` (which
    flows completed) and ``timed_out`` and calls ``finish(state, lost)``, where ``lost``
    marks the peers preempted at any time during the round (they take no part, as an
    absent peer on the rounds clock).
    """

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    finish: Callable[[State, np.ndarray], RoundStats]
    opens: np.ndarray | None = None
    waits: np.ndarray | None = None
    after: np.ndarray | None = None
    start_s: np.ndarray | None = None
    timeout_s: np.ndarray | None = None
    streamed: np.ndarray | None = None
    delivered: np.ndarray | None = None  # filled by the clock
    timed_out: np.ndarray | None = None  # filled by the clock


class Protocol:
    """Base class; subclasses set ``Params``, ``description`` and implement ``round``.

    On the network clock, barrier-round protocols also implement :meth:`round_messages`
    (one phase of messages, then :meth:`round` with the peers that were not lost) or
    override :meth:`network_round`. ``network_clock`` says whether a protocol runs there.
    ``invariants`` declares what the protocol keeps (names of :data:`INVARIANTS`); the
    stateful tests check every registered protocol against its declaration.
    """

    Params: ClassVar[type[ProtocolParams]]
    description: ClassVar[str] = ""
    network_clock: ClassVar[bool] = False
    #: Event counts the protocol keeps in ``counters``; each is a field of the run's
    #: summary (0 when the protocol never counted it, e.g. on the other clock).
    counter_names: ClassVar[tuple[str, ...]] = ()
    #: The invariants (names of :data:`INVARIANTS`) the protocol keeps with its default
    #: parameters; :meth:`invariants_in_force` narrows them for a given configuration.
    invariants: ClassVar[frozenset[str]] = frozenset()
    #: Memory model (:mod:`sim.resources`): (N, dim) arrays of the state's dtype alive at
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
        compressed = getattr(params, "compression", "none") != "none"
        return Footprint(cls.state_arrays + (cls.compressed_arrays if compressed else 0.0))

    def __init__(self, params: Any, ctx: Context) -> None:
        self.params = params
        self.ctx = ctx
        self.counters: dict[str, int] = dict.fromkeys(self.counter_names, 0)

    def invariants_in_force(self, clock: str = "rounds", rejoin: str = "keep") -> frozenset[str]:
        """The invariants this instance keeps on ``clock`` (``rounds`` or ``network``)
        with the scenario's ``churn.rejoin`` rule: :attr:`invariants`, less
        :data:`WIRE_SENSITIVE` when the wire compresses. Protocols whose parameters
        weaken another invariant override this."""
        if getattr(self.params, "compression", "none") != "none":
            return self.invariants - WIRE_SENSITIVE
        return self.invariants

    def init_state(self, state: State) -> None:
        """Add protocol arrays to ``state.extra`` (default: none)."""

    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """Run round ``t`` (0-based) over the peers where ``present`` is true."""
        raise NotImplementedError

    def round_messages(self, present: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of the messages of round ``t``, sent by the present peers."""
        raise NotImplementedError

    def message_bytes(self) -> float:
        """Bytes of one message of :meth:`round_messages` (default: one vector)."""
        return float(self.ctx.vector_bytes)

    def network_round(self, present: np.ndarray, t: int) -> NetRound:
        """Round ``t`` on the network clock: messages, then :meth:`round` without the lost."""
        src, dst = self.round_messages(present, t)
        nbytes = np.full(src.size, self.message_bytes())

        def finish(state: State, lost: np.ndarray) -> RoundStats:
            return self.round(state, present & ~lost, t)

        return NetRound(src, dst, nbytes, finish)

    def describe(self) -> dict[str, Any]:
        """Quantities the protocol derives from the scenario (for ``avsim info``)."""
        return {}

    def estimate(self, state: State) -> Any:
        """Each peer's current estimate of the average (default: ``state.x``). Row-wise:
        a peer's estimate depends only on its own rows of ``state.x`` and ``state.extra``."""
        return state.x

    #: Set by the engine: told about every change of state rows (:class:`RowWatcher`; the
    #: exact-target tracker, :mod:`sim.observe.tracker`). None: nobody listens.
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

    def sync_rows(self, state: State, rows: np.ndarray, now: float) -> None:
        """Bring peers ``rows`` to simulated time ``now`` before their rows are copied
        (a ``fetch`` rejoin on the network clock), for protocols that update peers lazily
        (A²CiD²). Default: nothing."""

    def conserved_mean(self, state: State, rows: np.ndarray | None = None) -> Any:
        """The average this protocol conserves over peers ``rows`` (None: all), whose
        distance to the initial mean is ``mean_drift`` (:mod:`sim.recorder`): a (dim,)
        float64 array, or None for the mean of :meth:`estimate` (the default, which the
        recorder computes with the variance). Push-sum: Σx / Σw."""
        return None


class RowValues(NamedTuple):
    """Some peers' estimates as functions of time until their next change:
    ``a − exp(−decay_rate·(t − since))·d`` (rows of (k, dim) float64, ``since`` (k,)
    seconds); with ``d`` None, the constant ``a``."""

    a: np.ndarray
    d: np.ndarray | None = None
    since: np.ndarray | None = None


class RowWatcher(Interface):
    """What a protocol tells :attr:`Protocol.watcher` (when set) about state changes.

    Changes applied one at a time (continuous time on the network clock): call
    ``before(rows)`` right before changing peers ``rows`` and ``after(rows)`` right
    after, at the simulated time of the change; the watcher reads the rows through
    :meth:`Protocol.estimate_rows`. Changes applied in batches (waves of disjoint events
    on the rounds clock): call ``wave(rows, before, after, at_s)`` with the rows'
    :class:`RowValues` before and after the wave and each row's event time (both ends of
    one event share it; ``before`` may be None when :attr:`needs_before` is false). Only
    rows changed by the protocol's own events are reported; absent peers' A²CiD² mixing
    changes no :class:`RowValues`.
    """

    needs_before: bool

    def before(self, rows: np.ndarray) -> None: ...

    def after(self, rows: np.ndarray) -> None: ...

    def wave(
        self, rows: np.ndarray, before: RowValues | None, after: RowValues, at_s: np.ndarray
    ) -> None: ...
