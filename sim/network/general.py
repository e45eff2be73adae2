"""The general path of the bandwidth phase: flows as Python objects, the region solver.

:class:`GeneralCore` keeps, for every resource, the flows on it (dicts in arrival
order), and a heap of completion times; every change re-rates the region
:func:`~sim.network.maxmin.reallocate` finds (at most the connected component of the
change). It is the reference the compiled path (:mod:`sim.network.compiled`) repeats
step by step, and the path taken when numba is not installed.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from sim.network.maxmin import REL_EPS, FlowsOn, Ordered, reallocate

if TYPE_CHECKING:
    import numpy as np

    from sim.network.flow import Flow

_NOTHING: tuple[Flow, ...] = ()


class GeneralCore:
    """Rates and completion times of the flows in their bandwidth phase.

    Parameters
    ----------
    capacity
        Capacity of every resource, bytes/s (finite).

    Notes
    -----
    Each flow's remaining bytes are advanced lazily, when its own rate changes
    (``remaining``, ``t_last``); the heap holds ``(finish, id, version, flow)`` and an
    entry is stale once the flow's ``version`` moved on.
    """

    def __init__(self, capacity: Sequence[float]) -> None:
        self.capacity = capacity
        #: the flows in their bandwidth phase (parked streams included) by id, in the
        #: order they entered it (a resumed stream moves to the end, under its new id)
        self.active: dict[int, Flow] = {}
        self.flows_on: FlowsOn = [{} for _ in capacity]
        self.heap: list[tuple[float, int, int, Flow]] = []

    def enter(self, flows: Sequence[Flow], now: float) -> None:
        """``flows`` (with bytes and resources) start their bandwidth phase now."""
        entered = []
        flows_on, active = self.flows_on, self.active
        for flow in flows:
            active[flow.id] = flow
            flow.t_last = now
            alone = True
            for r in flow.res:
                on = flows_on[r]
                on[flow.id] = flow
                alone = alone and len(on) == 1
            if alone:
                self._rate_alone(flow, now)
            else:
                entered.append(flow)
        if entered:
            self.reallocate(tuple(entered), (), now)

    def remove(self, flows: Sequence[Flow], now: float) -> None:
        """``flows`` leave their bandwidth phase unfinished (failed, cancelled); their
        ``remaining`` is advanced to ``now``."""
        changed: Ordered = {}
        for flow in flows:
            self._leave(flow, now)
            for r in flow.res:
                changed[r] = None
        self.reallocate(_NOTHING, changed, now)

    def pop_chain(
        self, now: float, horizon: float, latch_left: np.ndarray | None
    ) -> tuple[list[Flow], list[float], list[bool], float]:
        """The compiled core's ``pop_chain`` without chains: the flows that complete now
        (:meth:`pop_due`), each at ``now`` and none quiet (this core keeps no latches:
        ``horizon`` and ``latch_left`` are not used), and ``now``."""
        due = self.pop_due(now)
        return due, [now] * len(due), [False] * len(due), now

    def pop_due(self, now: float) -> list[Flow]:
        """The flows that complete now, in ``(finish, id)`` order, out of the network."""
        heap, due = self.heap, []
        while heap:
            finish, _, version, flow = heap[0]
            if flow.version != version:
                heapq.heappop(heap)
            elif finish <= now or (finish - now) * flow.rate <= REL_EPS * flow.nbytes:
                heapq.heappop(heap)
                due.append(flow)
            else:
                break
        changed: Ordered = {}
        for flow in due:
            if flow.keep:  # a stream's piece: the flow stays, parked, at its rate
                flow.remaining, flow.t_last, flow.parked = 0.0, now, True
                flow.version += 1
                continue
            self._leave(flow, now)
            for r in flow.res:
                changed[r] = None
        self.reallocate(_NOTHING, changed, now)
        return due

    def refill(self, flow: Flow, key: int, now: float) -> None:
        """The parked ``flow`` carries its next piece (``remaining`` bytes) from now, at
        the rate it has, as flow ``key``: last on its resources, as a new flow would be."""
        flows_on, old, active = self.flows_on, flow.id, self.active
        del active[old]
        active[key] = flow
        for r in flow.res:
            on = flows_on[r]
            del on[old]
            on[key] = flow
        flow.id, flow.t_last = key, now
        flow.version += 1
        if flow.remaining > 0.0:  # else it stays parked
            heapq.heappush(self.heap, (now + flow.remaining / flow.rate, key, flow.version, flow))

    def shorten(self, flow: Flow, cut: float, now: float) -> None:
        """The in-flight ``flow`` carries ``cut`` bytes less (its ``nbytes`` is already
        cut): its remaining bytes are advanced to ``now`` and cut; same rate and place."""
        rest = flow.remaining - flow.rate * (now - flow.t_last) - cut
        flow.remaining = 0.0 if rest < 0.0 else rest
        flow.t_last = now
        flow.version += 1
        heapq.heappush(self.heap, (now + flow.remaining / flow.rate, flow.id, flow.version, flow))

    def flows(self) -> list[Flow]:
        """The flows in their bandwidth phase, parked streams included, in the order they
        entered it (a resumed stream as of its resumption)."""
        return list(self.active.values())

    def __len__(self) -> int:
        """How many flows are in their bandwidth phase, parked streams included."""
        return len(self.active)

    def next_finish(self) -> float:
        """Completion time of the next flow to complete (``inf``: none in flight)."""
        heap = self.heap
        while heap and heap[0][3].version != heap[0][2]:
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def moved(self, flow: Flow, at_s: float) -> float:
        """Bytes of the in-flight ``flow`` through at ``at_s`` (not capped at its size)."""
        return flow.nbytes - flow.remaining + flow.rate * (at_s - flow.t_last)

    def rate(self, flow: Flow) -> float:
        """Current rate of the in-flight ``flow``, bytes/s."""
        return flow.rate

    # -- internals -----------------------------------------------------------------------
    def reallocate(self, seeds: Sequence[Flow], changed: Collection[int], now: float) -> None:
        """New rates after a change; a new heap entry for every flow whose rate changed."""
        heap, push = self.heap, heapq.heappush
        f: Any
        for f in reallocate(seeds, changed, self.flows_on, self.capacity):
            f.bneck = f.new_bneck
            rate = f.new_lam * f.w
            if rate != f.rate:
                f.remaining -= f.rate * (now - f.t_last)
                f.t_last, f.rate, f.lam = now, rate, f.new_lam
                f.version += 1
                if rate > 0.0 and not f.parked:
                    push(heap, (now + f.remaining / rate, f.id, f.version, f))
        if len(heap) > 64 + 4 * len(self.active):
            self.heap = heap = [e for e in heap if e[3].version == e[2]]
            heapq.heapify(heap)

    def _rate_alone(self, flow: Flow, now: float) -> None:
        """Rate of a flow alone on all its resources: what :func:`reallocate` would give
        (the smallest capacity share, ties to the lowest resource), without solving."""
        capacity, w = self.capacity, flow.w
        level, bneck = math.inf, -1
        for r in flow.res:
            share = capacity[r] / w
            if share < level or (share == level and r < bneck):
                level, bneck = share, r
        flow.lam = flow.new_lam = level
        flow.bneck = flow.new_bneck = bneck
        flow.rate = rate = level * w
        flow.version += 1
        heapq.heappush(self.heap, (now + flow.remaining / rate, flow.id, flow.version, flow))

    def _leave(self, flow: Flow, now: float) -> None:
        """Take a flow out of its bandwidth phase, its bytes advanced to ``now``."""
        flow.remaining = max(flow.remaining - flow.rate * (now - flow.t_last), 0.0)
        flow.t_last = now
        flow.version += 1  # its heap entries are stale now
        del self.active[flow.id]
        for r in flow.res:
            del self.flows_on[r][flow.id]
