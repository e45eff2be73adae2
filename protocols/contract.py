"""The types a protocol and the engine exchange: the contract both ``sim`` and ``protocols``
import.

A protocol (:mod:`protocols.base`) works on a :class:`State` with what it may know of
the run (:class:`Context`). On the rounds clock and in barrier rounds of the network
clock it reports each round as :class:`RoundStats`; a barrier round is planned once as a
:class:`RoundPlan` (its :class:`Flows`, then its arithmetic). Under ``schedule: async`` a
group protocol tells the matchmaker its rules (:class:`Matchmaking`) and plans each
assembled group once as a :class:`GroupPlan`. A continuous-time protocol
gets the run's environment and flow network as a :class:`RunEnv`. The exact-target
tracker listens to state changes through :class:`RowWatcher`, reading rows as
:class:`RowValues`. Nothing here imports the engine: the contract sits below both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple
from typing import Protocol as Interface

import numpy as np

if TYPE_CHECKING:
    import simpy

    from sim.network import FlowNetwork

#: Seconds an empty barrier round (nothing to send, e.g. every peer absent) lasts, so
#: that simulated time always advances.
IDLE_ROUND_S = 1.0


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
        The per-peer table (:func:`sim.model.peers.resolve_peers`: bandwidths, delays, client
        mode), or None outside a run; protocols that need it fall back to defaults.
    wire_bytes
        Bytes of one whole vector on the wire, uncompressed (``vector.wire_bytes``): a
        multiple of ``itemsize``, at least ``dim × itemsize``; None: ``dim × itemsize``.

    Notes
    -----
    Sizes on the wire come from :attr:`wire_coords`, never from ``dim``: a message of a
    whole vector is ``wire.message_bytes(ctx.wire_coords, ctx.itemsize)``, and a message
    of simulated coordinates ``a:b`` carries wire coordinates
    ``wire_offsets(a):wire_offsets(b)`` (:func:`wire_offsets`). Without ``wire_bytes``
    the two coincide and every size is what it was before the key existed.
    """

    n_peers: int
    dim: int
    itemsize: int
    rng: np.random.Generator
    peers: Any = None
    wire_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.wire_bytes is not None:
            check_wire(self.dim, self.itemsize, self.wire_bytes)

    @property
    def wire_coords(self) -> int:
        """Coordinates of one whole vector on the wire (``dim`` without ``wire_bytes``)."""
        return self.dim if self.wire_bytes is None else self.wire_bytes // self.itemsize

    @property
    def vector_bytes(self) -> int:
        """Bytes of one whole vector on the wire, uncompressed (``vector.wire_bytes``)."""
        return self.wire_coords * self.itemsize

    def wire_offsets(self, offsets: Any) -> np.ndarray:
        """:func:`wire_offsets` of simulated coordinate ``offsets`` in this run."""
        return wire_offsets(offsets, self.dim, self.wire_coords)


#: Largest ``dim × wire_coords``: the coordinate maps below multiply them in int64.
MAX_DIM_TIMES_WIRE_COORDS = 2**62


def check_wire(dim: int, itemsize: int, wire_bytes: int) -> None:
    """Refuse a wire size that is not a whole number of coordinates, has fewer than one
    per simulated coordinate, or overflows :func:`wire_offsets` (ValueError)."""
    if wire_bytes % itemsize or wire_bytes < dim * itemsize:
        raise ValueError(
            f"wire_bytes: expected a multiple of {itemsize} of at least dim × itemsize = "
            f"{dim * itemsize}, got {wire_bytes!r}"
        )
    if dim * (wire_bytes // itemsize) > MAX_DIM_TIMES_WIRE_COORDS:
        raise ValueError(f"wire_bytes: expected dim × coordinates ≤ 2**62, got {wire_bytes!r}")


def wire_offsets(offsets: Any, dim: int, wire_coords: int) -> np.ndarray:
    """Where simulated coordinates start on the wire: ⌊k · wire_coords / dim⌋ for every
    offset k in 0 … dim (int64, the shape of ``offsets``).

    Simulated coordinate k stands for wire coordinates ``wire_offsets(k):wire_offsets(k +
    1)`` — ⌊C/dim⌋ or ⌈C/dim⌉ of them (C = ``wire_coords`` ≥ dim) — so a range of
    simulated coordinates maps onto its proportional share of the wire, 0 onto 0 and dim
    onto C. With C = dim it is the identity.
    """
    k = np.asarray(offsets, dtype=np.int64)
    if wire_coords == dim:
        return k
    return k * np.int64(wire_coords) // np.int64(dim)


def simulated_offsets(offsets: Any, dim: int, wire_coords: int) -> np.ndarray:
    """The inverse map of :func:`wire_offsets`: for wire offsets R, the first simulated
    coordinate starting at or after R, ⌈R · dim / C⌉ (int64, the shape of ``offsets``).

    A message of wire coordinates ``R0:R1`` covers the simulated coordinates
    ``simulated_offsets(R0):simulated_offsets(R1)`` — those whose first wire coordinate
    it carries: consecutive messages cover consecutive, disjoint ranges, a message
    smaller than one simulated coordinate may cover none, and a range's share of the
    simulated coordinates is its share of the wire to within one coordinate. With C =
    dim it is the identity.
    """
    r = np.asarray(offsets, dtype=np.int64)
    if wire_coords == dim:
        return r
    c = np.int64(wire_coords)
    return (r * np.int64(dim) + c - 1) // c


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
    does not promise to preserve it (``uniform`` gossip, ``partial`` faults), else 0;
    ``wait_s`` is a pause before the next round (e.g. a restart delay).

    Which clock reads what: the rounds clock adds ``bytes_sent`` and ``messages`` to the
    run's traffic; barrier rounds on the network clock read only ``wait_s`` (traffic is
    the flow network's own count); ``mean_drift`` is for the ``drift_reported`` invariant
    (the recorder measures the drift itself). Protocols fill every field on both clocks
    all the same: one round's arithmetic, whichever clock runs it.
    """

    bytes_sent: float = 0.0
    messages: int = 0
    mean_drift: float = 0.0
    wait_s: float = 0.0


@dataclass
class Flows:
    """The messages of one barrier round on the network clock, as parallel arrays.

    ``src``, ``dst`` (peer rows) and ``nbytes`` give each flow; the optional arrays set
    dependencies between them:

    - *gates*: a flow with ``waits[i] == g`` starts once gate g opens, i.e. once every
      flow with ``opens == g`` has ended (completed or failed). A butterfly is two gates
      per group, a ring all-reduce a chain of single-flow gates.
    - *after*: a flow with ``after[i] == j`` starts once flow j has ended; if flow j
      failed, flow i fails at once without sending (a broken stream: pieces of a part,
      a reply to a request).
    - *previous*: a flow with ``previous[i] == j`` is the next piece on flow j's
      connection (a flow is the previous piece of one flow at most): it starts once
      flow j has ended too, and fails at once if j failed
      (a reply stream: the reducer's replies to one sender, each also ``after`` its own
      request and behind its piece's gate).
    - a flow with ``streamed[i]`` set continues the stream of its predecessor on the
      same connection (``previous[i]``, else ``after[i]``). When it starts at the
      instant its predecessor completed, it pays no route latency (pieces sent back to
      back, one fluid flow); when it still waited for its gate after that instant, the
      connection was idle and it pays the route latency, as any bytes sent on an idle
      connection do.
    - a flow with neither gate nor ``after`` (a *root*) starts ``start_s[i]`` seconds
      after the round starts (default: its sender's straggler delay).
    - a flow still in flight ``timeout_s[i]`` seconds after it started (default: never)
      is cancelled and fails: its receiver gave up on a slow sender.
    """

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    opens: np.ndarray | None = None
    waits: np.ndarray | None = None
    after: np.ndarray | None = None
    start_s: np.ndarray | None = None
    timeout_s: np.ndarray | None = None
    streamed: np.ndarray | None = None
    previous: np.ndarray | None = None

    @classmethod
    def none(cls) -> Flows:
        """No flow at all: the round idles :data:`IDLE_ROUND_S` seconds."""
        empty = np.zeros(0, dtype=np.intp)
        return cls(empty, empty, np.zeros(0))


#: ``finish(state, lost) -> RoundStats``: a round's arithmetic (see :class:`RoundPlan`).
Finish = Callable[[State, np.ndarray], RoundStats]


@dataclass
class RoundPlan:
    """One barrier round, planned once: its random draws and groups are fixed here.

    ``flows()`` builds the round's :class:`Flows`; only the network clock calls it (the
    rounds clock sends nothing), so a plan costs no flow arrays on the rounds clock. The
    network clock starts the flows when the round starts, waits until every flow has
    ended, fills ``delivered`` ((n_flows,) bool: which flows completed) and ``timed_out``
    (which were cancelled by their ``timeout_s``), then calls ``finish(state, lost)``,
    where ``lost`` ((n_peers,) bool) marks the peers preempted at any time during the
    round: they take no part, as an absent peer on the rounds clock. The rounds clock
    calls ``finish(state, lost)`` at once with nobody lost.

    ``finish`` does the arithmetic of *this* plan (its groups, its pairs), never a fresh
    draw: calling the protocol's ``round`` again would draw from its generator a second
    time and average other groups than the flows sent.
    """

    finish: Finish
    flows: Callable[[], Flows] = Flows.none
    delivered: np.ndarray | None = None  # filled by the network clock
    timed_out: np.ndarray | None = None  # filled by the network clock


@dataclass(frozen=True)
class Matchmaking:
    """What hivemind's matchmaking needs from a group protocol (``schedule: async``,
    :meth:`protocols.base.GroupProtocol.matchmaking`).

    Parameters
    ----------
    group_size
        M: a leader assembles at once when its group reaches M members.
    min_group_size
        The smallest group that runs; a leader with fewer members at its expiration
        disbands.
    time_s
        ``matchmaking_time``, seconds (> 0): a declaration expires this long after it is
        made.
    timeout_s
        ``averaging_timeout``, seconds, resolved: a step that has not averaged this long
        after it started gives up (a failed step).
    latency_s
        ``matchmaking_latency``, seconds: the delay of a DHT declare or lookup; None: each
        peer's own default (one route latency to a typical peer).
    overhead
        ``allreduce_overhead``: ``overhead(rng)`` seconds of processing between a group's
        assembly and its all-reduce's first flows, drawn once per group from the leader's
        own generator; None: none (nothing drawn).
    """

    group_size: int
    min_group_size: int
    time_s: float
    timeout_s: float
    latency_s: float | None = None
    overhead: Callable[[np.random.Generator], float] | None = None


#: ``settle(state, lost) -> averaged``: one async group's arithmetic once its flows have
#: ended; ``lost`` ((n_peers,) bool) marks the members preempted meanwhile; returns (g,)
#: bool, the members (in :attr:`GroupPlan.members` order) whose step succeeded.
Settle = Callable[[State, np.ndarray], np.ndarray]


@dataclass
class GroupPlan:
    """One assembled group's all-reduce under ``schedule: async``, planned once.

    ``flows()`` builds the group's :class:`Flows` (as a barrier round's; each root starts
    at its ``start_s``, seconds after the group assembled: when its sender learnt of the
    group). The network clock sends them, fills ``delivered`` and ``timed_out``, and the
    engine calls ``settle(state, lost)`` once every flow has ended, with the members
    lost meanwhile. Groups run side by side; each plan sees only its own flows.
    """

    members: np.ndarray  # (g,) peers, chunk order
    settle: Settle
    flows: Callable[[], Flows] = Flows.none
    delivered: np.ndarray | None = None  # filled by the network clock
    timed_out: np.ndarray | None = None  # filled by the network clock


@dataclass
class RunEnv:
    """What a continuous-time protocol's process gets from the run (network clock).

    Parameters
    ----------
    env
        The run's SimPy environment (simulated seconds).
    net
        The run's flow network (:class:`sim.network.FlowNetwork`): ``net.send(src, dst,
        nbytes)`` returns a flow whose ``done`` event succeeds on delivery and fails when
        either end is preempted.
    present
        (n_peers,) bool, shared with churn: True = present now (read it, never write).
    state
        The run's state; the process updates it in place as its exchanges complete.
    """

    env: simpy.Environment
    net: FlowNetwork
    present: np.ndarray
    state: State


class RowValues(NamedTuple):
    """Some peers' estimates as functions of time until their next change:
    ``a − exp(−decay_rate·(t − since))·d`` (rows of (k, dim) float64, ``since`` (k,)
    seconds); with ``d`` None, the constant ``a``."""

    a: np.ndarray
    d: np.ndarray | None = None
    since: np.ndarray | None = None


class RowWatcher(Interface):
    """What a protocol tells its ``watcher`` (when set) about state changes.

    Changes applied one at a time (continuous time on the network clock): call
    ``before(rows)`` right before changing peers ``rows`` and ``after(rows)`` right
    after, at the simulated time of the change; the watcher reads the rows through
    the protocol's ``estimate_rows``. Changes applied in batches (waves of disjoint
    events on the rounds clock): call ``wave(rows, before, after, at_s)`` with the rows'
    :class:`RowValues` before and after the wave and each row's event time (both ends of
    one event share it; ``before`` may be None when :attr:`needs_before` is false). Only
    rows changed by the protocol's own events are reported; absent peers' A²CiD² mixing
    changes no :class:`RowValues`.

    Two-row events applied ahead of time on the network clock (the closed-form exchanges,
    only when :attr:`batches` is true): ``m = take(rows, at_s, before, after)`` with the
    events in time order ((K, 2) peers, (K,) times, (K, 2, dim) numpy rows before and
    after each; ``before`` may be None as above). The watcher keeps the first m; the
    caller undoes every event at ``at_s[m]`` or later and shows those one at a time
    (``before``/``after``, at their times), so that whatever the watcher does at that
    event (end the run, read the state) sees the state of that instant. ``room()``: how
    many events ``take`` can take before one must come alone anyway (a batch should be
    no longer). Rows that decay between events (``decay_rate`` > 0, events that keep the
    sum) come as their :class:`RowValues` right after each event: ``after`` holds a and
    ``decay`` d (float64; ``since`` is the event's time); the watcher may then set a timer
    (a predicted crossing) that the caller must not apply events past.
    """

    needs_before: bool

    @property
    def batches(self) -> bool: ...

    def before(self, rows: np.ndarray) -> None: ...

    def after(self, rows: np.ndarray) -> None: ...

    def wave(
        self, rows: np.ndarray, before: RowValues | None, after: RowValues, at_s: np.ndarray
    ) -> None: ...

    def room(self) -> int: ...

    def take(
        self, rows: np.ndarray, at_s: np.ndarray, before: np.ndarray | None, after: np.ndarray,
        decay: np.ndarray | None = None,
    ) -> int: ...  # fmt: skip


__all__ = [
    "IDLE_ROUND_S",
    "MAX_DIM_TIMES_WIRE_COORDS",
    "Context",
    "Finish",
    "Flows",
    "GroupPlan",
    "Matchmaking",
    "RoundPlan",
    "RoundStats",
    "RowValues",
    "RowWatcher",
    "RunEnv",
    "Settle",
    "State",
    "check_wire",
    "simulated_offsets",
    "wire_offsets",
]
