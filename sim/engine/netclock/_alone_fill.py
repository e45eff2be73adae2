"""The max-min fair rates of :mod:`sim.engine.netclock._alone_loop`: progressive filling
that redoes, at each instant, only the steps a change reaches. Plain Python over arrays
that numba compiles unchanged (:mod:`sim.engine.netclock._alone_jit`).

Progressive filling: while flows are left, the resource with the smallest fair share
(its capacity left ÷ its flows not yet frozen; ties to the lowest index) freezes its
flows at that share. :func:`rerate` keeps each fill's steps (the resource, the share,
each resource's state before each step, the step each flow froze at) and starts the next
fill from them. A step of the last fill is also a step of the new one while its
resource lost and gained no flow and no resource that did (a *marked* one: :func:`enter`
and :func:`leave` mark them) has a smaller share by then: the resources that did not
change are in the state they had then, and the marked ones are replayed from the steps
their flows froze at. The fill goes on from the first step that differs, from that
state. Every float is the one a fill from scratch computes, operation for operation
(each resource's capacity left falls by the same shares in the same order), so that
runs are bit for bit those of a fill from scratch; ``tests/property/test_alone_fill.py``
checks it. At an instant where a few flows end among hundreds, most steps are kept: the
M1 workload's fills keep ~95 % of their frozen flows (docs/design.md, stop 43).

State (:func:`fill_state`), made at each call of the loop (its first fill is from
scratch): ``fstep`` (the step each flow froze at, :data:`UNFROZEN` for one that has not
since it entered), ``fill`` (steps of the last fill, whether there is one, marked
resources), ``marks`` and ``marked`` (the marked resources), ``best_at`` and ``share_at``
(each step's resource and share), ``nfz`` (flows frozen at each step), ``snap_left`` and
``snap_count`` (R, R + 1) (each resource's capacity left and flows before each step, and
after the last), and the scratch ``bucket`` (a marked resource's flows per step) and
``s_marked`` (their fair shares). Above :data:`MAX_KEPT` resources they have no rows and
every fill is from scratch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: ``fstep`` of a flow that has not frozen since it entered its bandwidth phase.
UNFROZEN = np.iinfo(np.int64).max

#: Fills keep their steps up to this many resources R (3 × R × (R + 1) words of state).
MAX_KEPT = 256


def fill_state(n: int, n_res: int) -> tuple[Any, ...]:
    """The fill's state for ``n`` flows over ``n_res`` resources, with no fill yet."""
    kept = n_res if n_res <= MAX_KEPT else 0
    return (
        np.full(n, UNFROZEN, np.int64), np.zeros(3, np.int64), np.zeros(n_res, np.bool_),
        np.empty(n_res, np.int64), np.empty(n_res + 1, np.int64), np.empty(n_res + 1),
        np.zeros(n_res + 1, np.int64), np.empty((kept, n_res + 1)),
        np.empty((kept, n_res + 1), np.int64), np.empty((kept, n_res + 1), np.int64),
        np.empty(kept),
    )  # fmt: skip


def rerate(
    now: float, todo: int, epoch: int, res: Any, cap: Any, rem: Any, rate: Any, t_last: Any,
    finish: Any, left: Any, count: Any, nbw: Any, head: Any, nxt: Any, stamp: Any,
    fstep: Any, fill: Any, marks: Any, marked: Any, best_at: Any, share_at: Any, nfz: Any,
    snap_left: Any, snap_count: Any, bucket: Any, s_marked: Any,
) -> None:  # fmt: skip
    """Max-min fair rates of the ``todo`` flows in their bandwidth phase, and, for each
    flow whose rate changes, its bytes advanced to ``now`` and its finish recomputed
    (:class:`~sim.network.general.GeneralCore`'s arithmetic).

    Each resource lists its flows in their bandwidth phase (``nbw`` of them; a linked
    list from ``head`` through ``nxt``, kept by :func:`enter` and :func:`leave`), so a
    step touches only the flows it freezes. The order of a resource's list does not
    matter: the flows a step freezes all take its share, and each flow's own arithmetic
    is its own. The steps kept from the last fill (module docstring) cost
    O(marked resources × (their flows + steps)); the others O(R + flows they freeze)."""
    n_res, width = cap.size, res.shape[1]
    kept = snap_left.shape[0] > 0 and fill[1] != 0
    n_old, n_marked = fill[0], fill[2]
    k = 0
    if kept:
        # the marked resources from scratch, their flows by the step they froze at
        for m in range(n_marked):
            a = marked[m]
            left[a] = cap[a]
            count[a] = nbw[a]
            for s in range(n_old):
                bucket[m, s] = 0
            node = head[a]
            while node >= 0:
                s = fstep[node // width]
                if s < n_old:
                    bucket[m, s] += 1
                node = nxt[node]
        # the last fill's steps, while they are this fill's: the marked resources' fair
        # shares (``s_marked``, as the fill computes them) and the least of them
        # (``low``, at ``low_r``), recomputed where a step froze some of their flows
        for m in range(n_marked):
            a = marked[m]
            s_marked[m] = max(left[a], 0.0) / count[a] if count[a] > 0 else math.inf
        moved = True
        low, low_r = math.inf, n_res
        while k < n_old:
            if moved:
                low, low_r = math.inf, n_res
                for m in range(n_marked):
                    if s_marked[m] < low or (s_marked[m] == low and marked[m] < low_r):
                        low, low_r = s_marked[m], marked[m]
            b, share = best_at[k], share_at[k]
            if marks[b] or low < share or (low == share and low_r < b):
                break
            moved = False
            for m in range(n_marked):
                a = marked[m]
                snap_left[a, k] = left[a]
                snap_count[a, k] = count[a]
                c = bucket[m, k]
                if c > 0:
                    for _ in range(c):
                        left[a] -= share
                    count[a] -= c
                    s_marked[m] = max(left[a], 0.0) / count[a] if count[a] > 0 else math.inf
                    moved = True
            todo -= nfz[k]
            k += 1
        for r in range(n_res):
            if not marks[r]:
                left[r] = snap_left[r, k]
                count[r] = snap_count[r, k]
    else:
        for r in range(n_res):
            left[r] = cap[r]
            count[r] = nbw[r]
    first = k  # flows that froze at a step before it are frozen
    for m in range(n_marked):
        marks[marked[m]] = False
    fill[2] = 0
    for s in range(k, n_res + 1):
        nfz[s] = 0
    rows = snap_left.shape[0] > 0
    while todo > 0:
        if rows:
            for r in range(n_res):
                snap_left[r, k] = left[r]
                snap_count[r, k] = count[r]
        best, share = -1, math.inf
        for r in range(n_res):
            if count[r] > 0:
                s = max(left[r], 0.0) / count[r]
                if s < share:
                    best, share = r, s
        best_at[k], share_at[k] = best, share
        node = head[best]
        while node >= 0:
            i = node // width
            if stamp[i] != epoch and fstep[i] >= first:
                stamp[i] = epoch
                fstep[i] = k
                nfz[k] += 1
                todo -= 1
                for w in range(width):
                    r = res[i, w]
                    if r >= 0:
                        left[r] -= share
                        count[r] -= 1
                if share != rate[i]:
                    rem[i] -= rate[i] * (now - t_last[i])
                    t_last[i] = now
                    rate[i] = share
                    finish[i] = now + rem[i] / share if share > 0.0 else math.inf
            node = nxt[node]
        k += 1
    if rows:
        for r in range(n_res):
            snap_left[r, k] = left[r]
            snap_count[r, k] = count[r]
    fill[0], fill[1] = k, 1


def mark(i: int, res: Any, marks: Any, marked: Any, fill: Any) -> None:
    """Flow ``i``'s resources change: the next fill redoes their steps (:func:`rerate`)."""
    for w in range(res.shape[1]):
        r = res[i, w]
        if r >= 0 and not marks[r]:
            marks[r] = True
            marked[fill[2]] = r
            fill[2] += 1


def enter(
    i: int, res: Any, nbw: Any, head: Any, nxt: Any, prv: Any, fstep: Any, marks: Any,
    marked: Any, fill: Any,
) -> None:  # fmt: skip
    """Flow ``i`` starts its bandwidth phase: on its resources' lists (:func:`rerate`),
    not frozen, its resources marked."""
    width = res.shape[1]
    for w in range(width):
        r = res[i, w]
        if r >= 0:
            node = i * width + w
            first = head[r]
            nxt[node], prv[node] = first, -1
            if first >= 0:
                prv[first] = node
            head[r] = node
            nbw[r] += 1
    fstep[i] = UNFROZEN
    mark(i, res, marks, marked, fill)


def leave(
    i: int, res: Any, nbw: Any, head: Any, nxt: Any, prv: Any, marks: Any, marked: Any,
    fill: Any,
) -> None:  # fmt: skip
    """Flow ``i`` ends its bandwidth phase: off its resources' lists, its resources marked
    (the step it froze at is on one of them, so the next fill redoes it and its count)."""
    width = res.shape[1]
    for w in range(width):
        r = res[i, w]
        if r >= 0:
            node = i * width + w
            before, after = prv[node], nxt[node]
            if before >= 0:
                nxt[before] = after
            else:
                head[r] = after
            if after >= 0:
                prv[after] = before
            nbw[r] -= 1
    mark(i, res, marks, marked, fill)
