"""A group's all-reduce on links no one else uses, run in a loop of its own.

Under ``schedule: async`` a peer is in one group at a time and only its group's flows
use its links (without shared links and rejoin downloads), so a group's flows meet no
other flow. Their times then follow from the group's plan, its start, its members'
links and their preemptions alone: :func:`run_alone` computes them in one call
(:mod:`sim.engine.netclock._alone_loop`, compiled by numba where it imports), piece by
piece as the network clock's model says (:class:`~protocols.contract.Flows`), with no
SimPy event, no :class:`~sim.network.Flow` and no Python per piece.

It is the model of :class:`~sim.engine.netclock.NetworkClock` with
:attr:`~sim.engine.netclock.NetworkClock.streams` off (a flow per piece), not its
arithmetic: rates come from a progressive filling over the group's flows rather than
the flow network's incremental one, so instants agree to round-off (the tests hold
them to 1e-9 relative), not bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from protocols.contract import Flows
from sim.core.optional import optional_module
from sim.engine.netclock import _alone_loop
from sim.engine.netclock.alone_routes import group_routes
from sim.engine.netclock.round_state import listing
from sim.network import FlowNetwork

#: outcomes of a flow (:attr:`AloneRun.outcome`)
PENDING, DELIVERED, FAILED, TIMED_OUT, REFUSED, BROKEN = (
    _alone_loop.PENDING, _alone_loop.DELIVERED, _alone_loop.FAILED, _alone_loop.TIMED_OUT,
    _alone_loop.REFUSED, _alone_loop.BROKEN,
)  # fmt: skip


@dataclass
class AloneRun:
    """What a group's flows did (:func:`run_alone`), per flow and in all."""

    #: (n,) when each flow was sent and when it ended (NaN: never)
    sent_at: np.ndarray
    end_at: np.ndarray
    #: (n,) int8: :data:`DELIVERED`, :data:`FAILED` (an end preempted), :data:`TIMED_OUT`,
    #: :data:`REFUSED` (an end absent when it was sent) or :data:`BROKEN` (never sent: a
    #: flow it followed failed)
    outcome: np.ndarray
    #: (n,) bytes each flow moved (its size once delivered)
    moved: np.ndarray
    #: (n,) the order the flows were sent in (-1: never sent)
    seq: np.ndarray
    #: when the last flow ended
    done_at: float
    #: messages sent (refused ones included), and refused
    messages: int
    refused: int

    @property
    def delivered(self) -> np.ndarray:
        """(n,) bool: the flows that completed."""
        return self.outcome == DELIVERED

    @property
    def timed_out(self) -> np.ndarray:
        """(n,) bool: the flows cancelled by their ``timeout_s``."""
        return self.outcome == TIMED_OUT


class AlonePlan:
    """A group's flows, prepared once to run alone from ``t0`` (:meth:`run`, as often as
    the presence of its members changes or its progress is asked for).

    The network gives the links (:attr:`~sim.network.FlowNetwork.routes`); its sharing
    must be ``maxmin``. ``delay_s`` (n_peers,): each sender's straggler delay, the roots'
    start where ``flows.start_s`` is None.
    """

    def __init__(
        self,
        parts: Sequence[tuple[Flows, float]],
        net: FlowNetwork,
        delay_s: np.ndarray | None = None,
    ) -> None:
        if net.sharing != "maxmin":
            raise ValueError(f"AlonePlan: sharing {net.sharing!r}: only 'maxmin' runs alone")
        flows = _joined([part for part, _ in parts])
        n = flows.src.size
        #: where each part's flows are in the joined arrays (start, stop)
        self.bounds: list[tuple[int, int]] = []
        start = 0
        for part, _ in parts:
            self.bounds.append((start, start + part.src.size))
            start += part.src.size
        src = np.asarray(flows.src, dtype=np.int64)
        dst = np.asarray(flows.dst, dtype=np.int64)
        #: the groups' peers (sorted), and each flow's ends among them
        mask = np.zeros(net.n, dtype=bool)
        mask[src] = True
        mask[dst] = True
        self.members = members = np.flatnonzero(mask)
        self.src, self.dst = src, dst
        self.local = local = np.full(net.n, -1, dtype=np.int64)
        local[members] = np.arange(members.size)
        self.t0 = float(min(t0 for _, t0 in parts))
        lat, res, cap = group_routes(net, src, dst, local, members)
        neg = np.full(n, -1, dtype=np.int64)
        opens = neg if flows.opens is None else np.asarray(flows.opens, dtype=np.int64)
        waits = neg if flows.waits is None else np.asarray(flows.waits, dtype=np.int64)
        after = neg if flows.after is None else np.asarray(flows.after, dtype=np.int64)
        previous = neg if flows.previous is None else np.asarray(flows.previous, dtype=np.int64)
        n_gates = int(max(opens.max(initial=-1), waits.max(initial=-1))) + 1
        gate_left = np.bincount(opens[opens >= 0], minlength=n_gates).astype(np.int64)
        need = (after >= 0).astype(np.int64) + (previous >= 0)
        gated = waits >= 0
        need[gated] += gate_left[waits[gated]] > 0
        behind_ptr, behind_idx = _lists(waits, n_gates)
        after_ptr, after_idx = _lists(after, n)
        next_piece = np.full(n, -1, dtype=np.int64)
        has_previous = previous >= 0
        next_piece[previous[has_previous]] = np.flatnonzero(has_previous)
        pred = neg
        if flows.streamed is not None:
            pred = np.where(flows.streamed, np.where(previous >= 0, previous, after), -1)
        releases = [
            _releases(part, src[a:b], waits[a:b], after[a:b] - a * (after[a:b] >= 0),
                      need[a:b], t0, delay_s)
            for (part, t0), (a, b) in zip(parts, self.bounds, strict=True)
        ]  # fmt: skip
        rel_flow = np.concatenate(
            [f + a for (f, _), (a, _) in zip(releases, self.bounds, strict=True)]
        )
        rel_at = np.concatenate([at for _, at in releases])
        order = np.argsort(rel_at, kind="stable")  # in time, each part's own order kept
        rel_flow, rel_at = rel_flow[order].astype(np.int64), rel_at[order]
        timeout = np.full(n, np.inf)
        if flows.timeout_s is not None:
            timeout = np.asarray(flows.timeout_s, dtype=np.float64)
        self.nbytes = np.asarray(flows.nbytes, dtype=np.float64)
        self._fixed = (
            lat, res, timeout, np.ascontiguousarray(pred, dtype=np.int64), waits, opens,
            after_ptr, after_idx, next_piece, behind_ptr, behind_idx,
        )  # fmt: skip
        self._counts = (gate_left, need)
        #: each flow's ends as indices into :attr:`members`
        self.src_local, self.dst_local = local[src], local[dst]
        self._rest = (rel_flow, rel_at, cap, self.src_local, self.dst_local)

    def start(self, present: np.ndarray) -> LoopState:
        """The loop at ``t0`` (nothing run yet); ``present`` (n_peers,) bool: who is
        present then."""
        gate_left, need = self._counts
        return LoopState(
            _alone_loop.fresh(self.nbytes.size, self.t0),
            gate_left.copy(),
            need.copy(),
            present[self.members].astype(np.bool_),
        )

    def advance(
        self,
        state: LoopState,
        changes: Sequence[tuple[float, int, bool]] = (),
        until: float = math.inf,
    ) -> AloneRun:
        """Run the loop on from ``state`` until every flow has ended, or until ``until``.

        ``changes``: (instant, peer, up) in time order, members going down (``up``
        False: their flows in flight fail) or coming back; those the state has taken
        already must come first, as they were, and none may come before the instant
        it has reached. Stopped at ``until``, the flows in flight have their progress
        then in :attr:`AloneRun.moved` and ``done_at`` is ``inf``; a later call goes on
        from there with the same floats as one uninterrupted run. The run's arrays are
        the state's (they change as it goes on). Raises ValueError for a plan whose
        flows never all end.
        """
        state.take(self._mine(changes))
        loop = state.loop
        done_at, messages, refused = _solver()(
            self.nbytes, *self._fixed, state.gate_left, state.need, *self._rest,
            state.present, state.fail_at, state.fail_peer, state.fail_up, float(until), *loop,
        )  # fmt: skip
        if done_at != done_at:
            raise ValueError("run_alone: some flows wait for flows that never end")
        sent_at, end_at, outcome, moved, seq = loop[5:]
        return AloneRun(
            sent_at, end_at, outcome, moved, seq, float(done_at), int(messages), int(refused)
        )

    def least_duration(self) -> float:
        """A lower bound of the time from ``t0`` to the last flow's end when no flow is
        refused, fails or times out (then every byte goes through): the most bytes any
        resource carries ÷ its capacity (rates sharing it never add up to more), or the
        shortest ``timeout_s``, whichever is less; 0 without bytes."""
        res, timeout, cap = self._fixed[1], self._fixed[2], self._rest[2]
        if self.nbytes.size == 0 or cap.size == 0:
            return 0.0
        carried = np.zeros(cap.size + 1)
        for w in range(res.shape[1]):  # -1 (no resource) into bin 0, left out
            carried += np.bincount(res[:, w] + 1, weights=self.nbytes, minlength=cap.size + 1)
        carried = carried[1:]
        with np.errstate(divide="ignore", invalid="ignore"):
            seconds = np.where(carried > 0, carried / cap, 0.0)
        return min(float(seconds.max()), float(timeout.min()))

    def goes_on(self, state: LoopState, changes: Sequence[tuple[float, int, bool]]) -> bool:
        """Whether :meth:`advance` can take ``changes`` from ``state``: those it has taken
        begin them unchanged, and none of the rest comes before the instant it reached."""
        return state.goes_on(self._mine(changes))

    def _mine(self, changes: Sequence[tuple[float, int, bool]]) -> list[tuple[float, int, bool]]:
        """``changes`` of the members, with local peers."""
        local = self.local
        return [(float(at), int(local[p]), bool(up)) for at, p, up in changes if local[p] >= 0]

    def run(
        self,
        present: np.ndarray,
        changes: Sequence[tuple[float, int, bool]] = (),
        until: float = math.inf,
    ) -> AloneRun:
        """Run the flows from ``t0`` until every one has ended, or until ``until``
        (:meth:`start`, then :meth:`advance`).

        ``present`` (n_peers,) bool: who is present at ``t0``; ``changes``: (instant,
        peer, up) in time order, members going down (``up`` False: their flows in flight
        fail) or coming back. Stopped at ``until``, the flows in flight have their
        progress then in :attr:`AloneRun.moved` and ``done_at`` is ``inf``. Raises
        ValueError for a plan whose flows never all end.
        """
        return self.advance(self.start(present), changes, until)


class LoopState:
    """Where a group's loop stands (:meth:`AlonePlan.start`, :meth:`AlonePlan.advance`):
    its arrays (:func:`~sim.engine.netclock._alone_loop.fresh`), the gates' and flows'
    counts of what they wait for, the members' presence, and the changes of presence
    it was given (local peers), of which it has taken ``ix[4]``."""

    def __init__(
        self, loop: tuple[Any, ...], gate_left: np.ndarray, need: np.ndarray, present: np.ndarray
    ) -> None:
        self.loop, self.gate_left, self.need, self.present = loop, gate_left, need, present
        self.changes: list[tuple[float, int, bool]] = []
        self.fail_at = np.zeros(0)
        self.fail_peer = np.zeros(0, dtype=np.int64)
        self.fail_up = np.zeros(0, dtype=np.bool_)

    @property
    def now(self) -> float:
        """The instant the loop has run to."""
        return float(self.loop[4][0])

    def goes_on(self, changes: list[tuple[float, int, bool]]) -> bool:
        """Whether the loop can go on with ``changes`` (local peers): those taken already
        begin it unchanged, and the rest do not come before now."""
        taken = int(self.loop[3][4])
        if changes[:taken] != self.changes[:taken]:
            return False
        return len(changes) == taken or changes[taken][0] >= self.now

    def take(self, changes: list[tuple[float, int, bool]]) -> None:
        """Use ``changes`` (local peers) from now on (:meth:`goes_on`, else ValueError)."""
        if not self.goes_on(changes):
            raise ValueError(
                "AlonePlan.advance: the changes differ from those the loop has taken, or "
                f"one comes before the {self.now!r} s it has reached"
            )
        if changes != self.changes:
            self.changes = list(changes)
            self.fail_at = np.array([c[0] for c in changes], dtype=np.float64)
            self.fail_peer = np.array([c[1] for c in changes], dtype=np.int64)
            self.fail_up = np.array([c[2] for c in changes], dtype=np.bool_)


def run_alone(
    flows: Flows,
    net: FlowNetwork,
    present: np.ndarray,
    t0: float,
    delay_s: np.ndarray | None = None,
    preemptions: Sequence[tuple[float, int]] = (),
) -> AloneRun:
    """Run ``flows`` (a group's, alone on their links) from ``t0`` until all have ended
    (:class:`AlonePlan`): ``present`` (n_peers,) bool at ``t0``; ``preemptions``:
    (instant, peer) in time order, the members that go down meanwhile."""
    changes = [(at, peer, False) for at, peer in preemptions]
    return AlonePlan([(flows, t0)], net, delay_s).run(present, changes)


def _joined(parts: Sequence[Flows]) -> Flows:
    """The flows of several plans as one: each part's gates and flow indices moved past
    the parts before it."""
    if len(parts) == 1:
        return parts[0]
    columns: dict[str, list[np.ndarray]] = {k: [] for k in (
        "src", "dst", "nbytes", "opens", "waits", "after", "start_s", "timeout_s", "streamed",
        "previous")}  # fmt: skip
    offset, gates = 0, 0
    for part in parts:
        n = part.src.size
        neg = np.full(n, -1, dtype=np.int64)
        opens = neg if part.opens is None else np.asarray(part.opens, dtype=np.int64)
        waits = neg if part.waits is None else np.asarray(part.waits, dtype=np.int64)
        columns["src"].append(np.asarray(part.src, dtype=np.int64))
        columns["dst"].append(np.asarray(part.dst, dtype=np.int64))
        columns["nbytes"].append(np.asarray(part.nbytes, dtype=np.float64))
        columns["opens"].append(np.where(opens >= 0, opens + gates, -1))
        columns["waits"].append(np.where(waits >= 0, waits + gates, -1))
        for key in ("after", "previous"):
            value = getattr(part, key)
            value = neg if value is None else np.asarray(value, dtype=np.int64)
            columns[key].append(np.where(value >= 0, value + offset, -1))
        start = part.start_s
        columns["start_s"].append(np.zeros(n) if start is None else np.asarray(start, float))
        timeout = part.timeout_s
        columns["timeout_s"].append(
            np.full(n, np.inf) if timeout is None else np.asarray(timeout, float)
        )
        streamed = part.streamed
        columns["streamed"].append(
            np.zeros(n, bool) if streamed is None else np.asarray(streamed, bool)
        )
        offset += n
        gates += int(max(opens.max(initial=-1), waits.max(initial=-1))) + 1
    return Flows(**{key: np.concatenate(value) for key, value in columns.items()})


def compiled() -> bool:
    """Whether the loop runs compiled (numba imports and its JIT is on)."""
    return _solver() is not _alone_loop.solve


def _solver() -> Any:
    """The compiled loop where numba imports, else the same source in Python."""
    module = optional_module("sim.engine.netclock._alone_jit")
    return _alone_loop.solve if module is None else module.solve


def _lists(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """The flows listing each key (CSR: ``idx[ptr[k]:ptr[k + 1]]``, in flow order), as
    the loop takes them (:func:`~sim.engine.netclock.round_state.listing`)."""
    order, ptr = listing(keys, n_keys)
    return ptr.astype(np.int64), order.astype(np.int64)


def _releases(
    flows: Flows,
    src: np.ndarray,
    waits: np.ndarray,
    after: np.ndarray,
    need: np.ndarray,
    t0: float,
    delay_s: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """The flows released by the clock rather than by an end, in its order, and when:
    the roots starting at once (by start), those behind a gate no flow opens, then the
    later roots by start, each at ``t0 + start`` (:meth:`NetworkClock.run`)."""
    roots = np.flatnonzero((waits < 0) & (after < 0))
    if flows.start_s is not None:
        start = np.asarray(flows.start_s, dtype=np.float64)[roots]
    else:
        assert delay_s is not None, "run_alone: roots without start_s need delay_s"
        start = np.asarray(delay_s, dtype=np.float64)[src[roots]]
    order = np.argsort(start, kind="stable")
    roots, start = roots[order], start[order]
    now = start <= 0
    ready = np.flatnonzero((need == 0) & (waits >= 0))
    rel_flow = np.concatenate((roots[now], ready, roots[~now])).astype(np.int64)
    at_once = rel_flow.size - int(np.count_nonzero(~now))
    rel_at = np.empty(rel_flow.size)
    rel_at[:at_once] = t0
    rel_at[at_once:] = t0 + start[~now]
    return rel_flow, rel_at
