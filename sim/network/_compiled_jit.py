"""numba kernels of the compiled bandwidth phase (:mod:`sim.network.compiled`); needs the
extra ``fast``.

A step-by-step port of the general path (:class:`~sim.network.general.GeneralCore` and
:func:`~sim.network.maxmin.reallocate`) onto arrays: the same regions, met in the same
order, and the same floating-point operations in the same order (``fastmath`` off), so
rates and completion times are bit-identical to the general path's. Python dicts and
sets become stamp fields (an entry is "in" a set when its field holds the set's stamp)
and lists become scratch rows.

Layout (``S`` flow slots, ``L`` resources per flow at most, ``R`` resources):

- ``HOT`` (S,) records: what a max-min solve reads of each flow (one 64-byte line);
  ``COLD`` (S,) records: the rest; ``RES`` (S, L) int64: its resources;
- ``POOL`` (P,) records: the flows on each resource, in arrival order (a dict's order),
  in a block of the pool (``BSTART``, ``BCAP``, ``NON`` of ``RI``); a full block moves
  to the pool's end with twice the room, a leaving flow is shifted out. Each entry
  holds a copy of the flow's fields that traversals read (a Moshpit completion
  re-checks every resource of its group), so that a traversal reads memory in order.
  ``EPOS`` (S, L) int64: where each flow's entries are;
- ``RF`` (R, 4) float64 and ``RI`` (R, 12) int64: per resource (columns below);
- ``CAL`` (S,) records and ``CPOS`` (S,) int64: the calendar, a 4-ary heap of (finish,
  flow id) with the flow's slot, one entry per flow with a rate (``CPOS``: where it is,
  -1 if nowhere): its order is that of the general path's live heap entries, whose
  stale ones it does without;
- ``META`` (6,) int64: calendar size, last stamp, flows in their bandwidth phase, pool
  top, elements in the pool's lists, entries into the bandwidth phase so far (the count
  that orders ``entered``);
- ``SR`` (5, R) int64, ``RHS`` (R,) float64, ``SS`` (3, S) int64, ``MEMB`` (S·L,) int64
  and ``SF`` (S,) float64: scratch (ordered resource sets, the resource heap, region,
  extra flows then calendar updates, due flows, members of each resource).

The state is the tuple of these arrays in the order ``HOT, COLD, RES, POOL, RF, RI,
CAL, CPOS, META, SR, RHS, SS, MEMB, EPOS, SF`` (see :func:`empty_state`). The entry
points take it as an address table (:mod:`sim.core.addresses`, in the order of
:data:`LAYOUT`: the state, then the core's per-slot arrays :func:`pop_chain` reads and
writes) and view the arrays through it: converting fifteen array arguments cost ~0.5 µs
a call, more than many calls compute.

Every call between compiled functions increments and decrements the reference count of
each array it passes (atomic operations, whether or not numba inlines the callee): per
rate change they would cost more than the arithmetic. So the loops run once per change
(``_reallocate``, ``_fill``, ``_violations``, ``_leave_all``) are written out in full
with array arguments only at their top, and calendar updates are applied in batches.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from sim.core._addresses_jit import view1, view2
from sim.network.maxmin import REL_EPS, TOL

_jit = numba.njit(cache=True, nogil=True)

HOT = np.dtype(
    [
        ("rate", "f8"), ("lam", "f8"), ("new_lam", "f8"), ("w", "f8"),
        ("mark", "i8"), ("frozen", "i8"), ("bneck", "i8"), ("new_bneck", "i8"),
    ],
    align=True,
)  # fmt: skip
#: An entry of a resource's list: the flow's slot, its index ``k`` in the flow's
#: resources, and copies of what traversals read (written with ``HOT`` wherever it
#: changes; ``new_lam`` is read in ``HOT``: only the region's flows have one).
ELEM = np.dtype(
    [
        ("slot", "i4"), ("k", "i4"), ("rate", "f8"), ("lam", "f8"), ("mark", "i8"),
        ("bneck", "i8"),
    ],
    align=True,
)  # fmt: skip
#: An entry of the calendar.
CAL = np.dtype([("finish", "f8"), ("id", "i8"), ("slot", "i8")], align=True)
COLD = np.dtype(
    [
        ("rem", "f8"), ("t_last", "f8"), ("nbytes", "f8"),
        ("id", "i8"), ("nres", "i8"), ("extra", "i8"),
    ],
    align=True,
)  # fmt: skip
# RF columns
CAP, LEFT, WSUM, PEAK = 0, 1, 2, 3
# RI columns: the resource's block of the pool, its flows, unfrozen count; set stamps;
# members (CSR in MEMB)
BSTART, BCAP, NON, COUNT, S_LEFT, S_SAT, S_PEAK, S_TOUCH, S_COVER, S_MEM, MSTART, MLEN = range(12)
# META entries
HSIZE, STAMP, NACTIVE, PTOP, NELEM, ENTRIES = 0, 1, 2, 3, 4, 5
# SR rows (resources) and SS rows (flows)
CHANGED, TOUCHED, COVERED, MRES, RHEAP = 0, 1, 2, 3, 4
REGION, XTRA, OUT = 0, 1, 2

State = tuple[Any, ...]

#: dtype and dimensions of each array of the address table the entry points take: the
#: state (:func:`empty_state`), then per slot ``keep``, ``latch_of``, the three
#: outputs of :func:`pop_chain` (``due``, ``when``, ``quiet``) and ``entered`` (when the
#: slot's flow entered its bandwidth phase or was last refilled: ``META[ENTRIES]`` then).
LAYOUT = (
    (HOT, 1), (COLD, 1), (np.int64, 2), (ELEM, 1), (np.float64, 2), (np.int64, 2),
    (CAL, 1), (np.int64, 1), (np.int64, 1), (np.int64, 2), (np.float64, 1), (np.int64, 2),
    (np.int64, 1), (np.int64, 2), (np.float64, 1),
    (np.bool_, 1), (np.int64, 1), (np.int64, 1), (np.float64, 1), (np.bool_, 1),
    (np.int64, 1),
)  # fmt: skip
KEEP, LATCH_OF, DUE, WHEN, QUIET, ENTERED = range(15, 21)


@_jit
def _state(tab: Any) -> State:
    """The state's arrays, viewed through the address table ``tab``."""
    return (
        view1(tab, 0, HOT), view1(tab, 1, COLD), view2(tab, 2, np.int64),
        view1(tab, 3, ELEM), view2(tab, 4, np.float64), view2(tab, 5, np.int64),
        view1(tab, 6, CAL), view1(tab, 7, np.int64), view1(tab, 8, np.int64),
        view2(tab, 9, np.int64), view1(tab, 10, np.float64), view2(tab, 11, np.int64),
        view1(tab, 12, np.int64), view2(tab, 13, np.int64), view1(tab, 14, np.float64),
    )  # fmt: skip


@_jit
def _stamp(meta: Any) -> int:
    meta[STAMP] += 1
    return meta[STAMP]


@_jit
def _bottleneck(saturated: bool, rest: float, cap: float, lam: float, peak: float) -> bool:
    """:meth:`~sim.network.maxmin._Check.is_bottleneck` on the resource's values."""
    if not saturated and rest > TOL * cap:
        return False
    return lam >= peak * (1.0 - TOL)


# -- the calendar: an indexed 4-ary heap of (finish, id), one entry per rated flow ------------
@_jit
def _cal_sift(cal: Any, pos: Any, n: int, i: int) -> None:
    """Restore the heap around position ``i`` (up, else down)."""
    finish, key, f = cal[i].finish, cal[i].id, cal[i].slot
    while i > 0:
        parent = (i - 1) // 4
        p = cal[parent]
        if not (finish < p.finish or (finish == p.finish and key < p.id)):
            break
        cal[i].finish, cal[i].id, cal[i].slot = p.finish, p.id, p.slot
        pos[p.slot] = i
        i = parent
    while True:
        best = 4 * i + 1
        if best >= n:
            break
        for child in range(best + 1, min(best + 4, n)):
            c, b = cal[child], cal[best]
            if c.finish < b.finish or (c.finish == b.finish and c.id < b.id):
                best = child
        b = cal[best]
        if not (b.finish < finish or (b.finish == finish and b.id < key)):
            break
        cal[i].finish, cal[i].id, cal[i].slot = b.finish, b.id, b.slot
        pos[b.slot] = i
        i = best
    cal[i].finish, cal[i].id, cal[i].slot = finish, key, f
    pos[f] = i


@_jit
def _cal_apply(n: int, st: State) -> None:
    """Apply the calendar updates in ``SS[XTRA][:n]`` (slots) and ``SF[:n]`` (their new
    completion times; NaN: the flow leaves the calendar), in that order."""
    cold, cal, pos, meta, ss, sf = st[1], st[6], st[7], st[8], st[11], st[14]
    for u in range(n):
        f, finish = ss[XTRA, u], sf[u]
        i = pos[f]
        if finish == finish:
            if i < 0:
                i = meta[HSIZE]
                meta[HSIZE] = i + 1
            cal[i].finish, cal[i].id, cal[i].slot = finish, cold[f].id, f
            _cal_sift(cal, pos, meta[HSIZE], i)
        elif i >= 0:
            pos[f] = -1
            last = meta[HSIZE] - 1
            meta[HSIZE] = last
            if i < last:
                e = cal[last]
                cal[i].finish, cal[i].id, cal[i].slot = e.finish, e.id, e.slot
                _cal_sift(cal, pos, last, i)


# -- the flows on a resource ------------------------------------------------------------------
@_jit
def _unlink(r: int, f: int, k: int, pool: Any, epos: Any, ri: Any, meta: Any) -> None:
    """Flow ``f`` (its resource ``k``) leaves ``r``'s list: the later entries shift down
    one place, keeping their order."""
    start, count = ri[r, BSTART], ri[r, NON]
    for q in range(epos[f, k], start + count - 1):
        a, b = pool[q], pool[q + 1]
        a.slot, a.k, a.rate, a.lam, a.mark, a.bneck = (
            b.slot, b.k, b.rate, b.lam, b.mark, b.bneck
        )  # fmt: skip
        epos[a.slot, a.k] = q
    ri[r, NON] = count - 1
    meta[NELEM] -= 1


@_jit
def _append(r: int, f: int, k: int, pool: Any, epos: Any, ri: Any, meta: Any) -> None:
    """Flow ``f`` (its resource ``k``), not rated yet, joins the end of ``r``'s list (the
    pool has room)."""
    n = ri[r, NON]
    if n == ri[r, BCAP]:
        cap = max(4, 2 * n)
        start, old = meta[PTOP], ri[r, BSTART]
        for j in range(n):
            a, b = pool[start + j], pool[old + j]
            a.slot, a.k, a.rate, a.lam, a.mark, a.bneck = (
                b.slot, b.k, b.rate, b.lam, b.mark, b.bneck
            )  # fmt: skip
            epos[a.slot, a.k] = start + j
        ri[r, BSTART], ri[r, BCAP] = start, cap
        meta[PTOP] = start + cap
    at = ri[r, BSTART] + n
    e = pool[at]
    e.slot, e.k, e.rate, e.lam, e.mark, e.bneck = f, k, 0.0, 0.0, 0, -1
    epos[f, k] = at
    ri[r, NON] = n + 1
    meta[NELEM] += 1


# -- progressive filling of a region ----------------------------------------------------------
@_jit
def _fill_one(f: int, stamp: int, lst: int, st: State) -> None:
    """:func:`~sim.network.maxmin._fill_one`."""
    hot, cold, res, pool, rf, ri = st[0], st[1], st[2], st[3], st[4], st[5]
    w = hot[f].w
    level, bneck = math.inf, -1
    for k in range(cold[f].nres):
        s = res[f, k]
        used = 0.0
        for j in range(ri[s, BSTART], ri[s, BSTART] + ri[s, NON]):
            if pool[j].mark != stamp:
                used += pool[j].rate
        rest = rf[s, CAP] - used
        rf[s, LEFT] = rest
        ri[s, S_LEFT] = lst
        share = (rest if rest > 0.0 else 0.0) / w
        if share < level or (share == level and s < bneck):
            level, bneck = share, s
    hot[f].frozen, hot[f].new_lam, hot[f].new_bneck = stamp, level, bneck
    rate = level * w
    for k in range(cold[f].nres):
        rf[res[f, k], LEFT] -= rate
    rf[bneck, LEFT] = 0.0
    ri[bneck, S_SAT] = lst


@_jit
def _fill(nreg: int, stamp: int, st: State) -> int:
    """:func:`~sim.network.maxmin.progressive_filling` of the region's first ``nreg``
    flows; returns the stamp of its ``left`` entries and saturated resources."""
    hot, cold, res, pool, rf, ri, meta, sr, rhs, ss, memb = (
        st[0], st[1], st[2], st[3], st[4], st[5], st[8], st[9], st[10], st[11], st[12]
    )  # fmt: skip
    lst = _stamp(meta)
    if nreg == 1:
        _fill_one(ss[REGION, 0], stamp, lst, st)
        return lst
    n_mem = 0
    for i in range(nreg):
        f = ss[REGION, i]
        for k in range(cold[f].nres):
            r = res[f, k]
            if ri[r, S_MEM] != lst:
                ri[r, S_MEM] = lst
                ri[r, S_LEFT] = lst
                sr[MRES, n_mem] = r
                n_mem += 1
                rf[r, WSUM] = hot[f].w
                ri[r, COUNT] = 1
                ri[r, MLEN] = 1
            else:
                rf[r, WSUM] += hot[f].w
                ri[r, COUNT] += 1
                ri[r, MLEN] += 1
    start = 0
    for m in range(n_mem):
        r = sr[MRES, m]
        used = 0.0  # every flow on r in the region: Σ of nothing, 0.0
        if ri[r, MLEN] != ri[r, NON]:
            for j in range(ri[r, BSTART], ri[r, BSTART] + ri[r, NON]):
                if pool[j].mark != stamp:
                    used += pool[j].rate
        rf[r, LEFT] = rf[r, CAP] - used
        ri[r, MSTART] = start
        start += ri[r, MLEN]
        ri[r, MLEN] = 0
    for i in range(nreg):
        f = ss[REGION, i]
        for k in range(cold[f].nres):
            r = res[f, k]
            memb[ri[r, MSTART] + ri[r, MLEN]] = f
            ri[r, MLEN] += 1
    # the resources' heap of (share, resource): sr[RHEAP] and rhs
    for m in range(n_mem):
        r = sr[MRES, m]
        left = rf[r, LEFT]
        rhs[m] = (0.0 if left < 0.0 else left) / rf[r, WSUM]
        sr[RHEAP, m] = r
    n = n_mem
    top = n // 2 - 1
    while True:
        if top >= 0:  # heapify, then the filling itself
            i = top
            top -= 1
        else:
            if n == 0:
                break
            share, r = rhs[0], sr[RHEAP, 0]
            if ri[r, COUNT] == 0:
                n -= 1
                rhs[0], sr[RHEAP, 0] = rhs[n], sr[RHEAP, n]
            else:
                left = rf[r, LEFT]
                level = (0.0 if left < 0.0 else left) / rf[r, WSUM]
                if level > share:  # stale: levels only rise as flows freeze elsewhere
                    rhs[0] = level
                else:
                    n -= 1
                    rhs[0], sr[RHEAP, 0] = rhs[n], sr[RHEAP, n]
                    ri[r, S_SAT] = lst
                    for j in range(ri[r, MSTART], ri[r, MSTART] + ri[r, MLEN]):
                        f = memb[j]
                        if hot[f].frozen == stamp:
                            continue
                        hot[f].frozen, hot[f].new_lam, hot[f].new_bneck = stamp, level, r
                        w = hot[f].w
                        rate = level * w
                        for k in range(cold[f].nres):
                            s = res[f, k]
                            ri[s, COUNT] -= 1
                            if s != r:
                                rf[s, LEFT] -= rate
                                rf[s, WSUM] -= w
                    rf[r, LEFT] = 0.0
            i = 0
        # sift element i down (ties: lowest resource)
        while True:
            small, child = i, 2 * i + 1
            if child < n and (
                rhs[child] < rhs[small]
                or (rhs[child] == rhs[small] and sr[RHEAP, child] < sr[RHEAP, small])
            ):
                small = child
            child += 1
            if child < n and (
                rhs[child] < rhs[small]
                or (rhs[child] == rhs[small] and sr[RHEAP, child] < sr[RHEAP, small])
            ):
                small = child
            if small == i:
                break
            rhs[i], rhs[small] = rhs[small], rhs[i]
            sr[RHEAP, i], sr[RHEAP, small] = sr[RHEAP, small], sr[RHEAP, i]
            i = small
    return lst


# -- the bottleneck check ---------------------------------------------------------------------
@_jit
def _violations(nreg: int, nt: int, stamp: int, tst: int, cov: int, lst: int, st: State) -> int:
    """:func:`~sim.network.maxmin._violations`: the number of extra flows (in ``SS[XTRA]``).

    Every resource the check asks about is touched, so the peak ``lam`` and the left
    capacity of each (the general path's ``_Check`` caches) are taken first, in one
    pass over the touched resources.
    """
    hot, cold, res, pool, rf, ri, meta, sr, ss, epos = (
        st[0], st[1], st[2], st[3], st[4], st[5], st[8], st[9], st[11], st[13]
    )  # fmt: skip
    for t in range(nt):
        r = sr[TOUCHED, t]
        value, used = 0.0, 0.0
        for j in range(ri[r, BSTART], ri[r, BSTART] + ri[r, NON]):
            e = pool[j]
            lam = hot[e.slot].new_lam if e.mark == stamp else e.lam
            if lam > value:
                value = lam
            used += e.rate
        rf[r, PEAK] = value
        if ri[r, S_LEFT] != lst:
            rf[r, LEFT] = rf[r, CAP] - used
            ri[r, S_LEFT] = lst
    ext = _stamp(meta)
    nx = 0
    for i in range(nreg):
        f = ss[REGION, i]
        lam = hot[f].new_lam
        r = hot[f].new_bneck
        if _bottleneck(ri[r, S_SAT] == lst, rf[r, LEFT], rf[r, CAP], lam, rf[r, PEAK]):
            continue
        valid = -1
        for k in range(cold[f].nres):
            r = res[f, k]
            if _bottleneck(ri[r, S_SAT] == lst, rf[r, LEFT], rf[r, CAP], lam, rf[r, PEAK]):
                valid = r
                break
        if valid >= 0:
            hot[f].new_bneck = valid
            continue
        for k in range(cold[f].nres):
            r = res[f, k]
            for j in range(ri[r, BSTART], ri[r, BSTART] + ri[r, NON]):
                e = pool[j]
                if e.mark != stamp and e.lam > lam * (1.0 + TOL):
                    g = e.slot
                    if cold[g].extra != ext:
                        cold[g].extra = ext
                        ss[XTRA, nx] = g
                        nx += 1
    for t in range(nt):
        r = sr[TOUCHED, t]
        if ri[r, S_COVER] == cov:
            continue
        for j in range(ri[r, BSTART], ri[r, BSTART] + ri[r, NON]):
            e = pool[j]
            if e.bneck != r or e.mark == stamp:
                continue
            g, lam = e.slot, e.lam
            moved = False
            for k in range(cold[g].nres):
                s = res[g, k]
                if ri[s, S_TOUCH] == tst and _bottleneck(
                    ri[s, S_SAT] == lst, rf[s, LEFT], rf[s, CAP], lam, rf[s, PEAK]
                ):
                    hot[g].bneck = s
                    for q in range(cold[g].nres):
                        pool[epos[g, q]].bneck = s
                    moved = True
                    break
            if not moved and cold[g].extra != ext:
                cold[g].extra = ext
                ss[XTRA, nx] = g
                nx += 1
    return nx


# -- reallocation -----------------------------------------------------------------------------
@_jit
def _reallocate(nseeds: int, nchanged: int, now: float, st: State) -> None:
    """:func:`~sim.network.maxmin.reallocate` with the seeds in ``SS[REGION]`` and the
    changed resources in ``SR[CHANGED]``, then the general core's update of the rates
    and the calendar."""
    hot, cold, res, pool, ri, meta, sr, ss, epos, sf = (
        st[0], st[1], st[2], st[3], st[5], st[8], st[9], st[11], st[13], st[14]
    )  # fmt: skip
    stamp = _stamp(meta)
    cov = _stamp(meta)
    ncov = 0
    for i in range(nchanged):
        r = sr[CHANGED, i]
        if ri[r, S_COVER] != cov:
            ri[r, S_COVER] = cov
            sr[COVERED, ncov] = r
            ncov += 1
    for i in range(nseeds):
        f = ss[REGION, i]
        hot[f].mark = stamp
        for k in range(cold[f].nres):
            pool[epos[f, k]].mark = stamp
            r = res[f, k]
            if ri[r, S_COVER] != cov:
                ri[r, S_COVER] = cov
                sr[COVERED, ncov] = r
                ncov += 1
    nreg = nseeds
    for i in range(ncov):
        r = sr[COVERED, i]
        for j in range(ri[r, BSTART], ri[r, BSTART] + ri[r, NON]):
            e = pool[j]
            if e.bneck == r and e.mark != stamp:
                g = e.slot
                hot[g].mark = stamp
                for k in range(cold[g].nres):
                    pool[epos[g, k]].mark = stamp
                ss[REGION, nreg] = g
                nreg += 1
    if nreg == 0:
        return
    while True:
        tst = _stamp(meta)
        nt = 0
        for i in range(nchanged):
            r = sr[CHANGED, i]
            if ri[r, S_TOUCH] != tst:
                ri[r, S_TOUCH] = tst
                sr[TOUCHED, nt] = r
                nt += 1
        for i in range(nreg):
            f = ss[REGION, i]
            if hot[f].mark != stamp:
                hot[f].mark = stamp
                for k in range(cold[f].nres):
                    pool[epos[f, k]].mark = stamp
            for k in range(cold[f].nres):
                r = res[f, k]
                if ri[r, S_TOUCH] != tst:
                    ri[r, S_TOUCH] = tst
                    sr[TOUCHED, nt] = r
                    nt += 1
        lst = _fill(nreg, stamp, st)
        nx = _violations(nreg, nt, stamp, tst, cov, lst, st)
        if nx == 0:
            break
        for j in range(nx):
            ss[REGION, nreg] = ss[XTRA, j]
            nreg += 1
        stamp = _stamp(meta)
        cov = _stamp(meta)  # covered is empty from now on
    nu = 0
    for i in range(nreg):
        f = ss[REGION, i]
        h, c = hot[f], cold[f]
        h.bneck = h.new_bneck
        rate = h.new_lam * h.w
        if rate != h.rate:
            c.rem -= h.rate * (now - c.t_last)
            c.t_last, h.rate, h.lam = now, rate, h.new_lam
            ss[XTRA, nu] = f
            # a parked stream (``nbytes`` 0, see ``pop_due``) has no completion to wait for
            sf[nu] = now + c.rem / rate if rate > 0.0 and c.nbytes > 0.0 else math.nan
            nu += 1
        for k in range(c.nres):
            e = pool[epos[f, k]]
            e.rate, e.lam, e.bneck = h.rate, h.lam, h.bneck
    _cal_apply(nu, st)


# -- entry points -----------------------------------------------------------------------------
@_jit
def enter(
    slots: Any,
    keys: Any,
    nbytes: Any,
    weights: Any,
    nres: Any,
    flat: Any,
    keeps: Any,
    latches: Any,
    now: float,
    tab: Any,
) -> float:
    """Flows start their bandwidth phase (the general core's ``enter``): flow ``j`` in
    slot ``slots[j]``, id ``keys[j]``, its ``nres[j]`` resources next in ``flat``, its
    slot's ``keep`` and ``latch_of`` set from ``keeps[j]`` and ``latches[j]``, its entry
    counted in ``entered`` in that order; a flow alone on all its resources is rated at
    once (``_rate_alone``). Returns the next completion time (:func:`next_finish`)."""
    st = _state(tab)
    keep, latch_of = view1(tab, KEEP, np.bool_), view1(tab, LATCH_OF, np.int64)
    entered = view1(tab, ENTERED, np.int64)
    hot, cold, res, pool, rf, ri, meta, ss, epos, sf = (
        st[0], st[1], st[2], st[3], st[4], st[5], st[8], st[11], st[13], st[14]
    )  # fmt: skip
    at, nent, nu = 0, 0, 0
    for j in range(slots.size):
        f, w = slots[j], weights[j]
        keep[f], latch_of[f] = keeps[j], latches[j]
        entered[f] = meta[ENTRIES]
        meta[ENTRIES] += 1
        h, c = hot[f], cold[f]
        h.rate, h.lam, h.new_lam, h.w = 0.0, 0.0, 0.0, w
        h.mark, h.frozen, h.bneck, h.new_bneck = 0, 0, -1, -1
        c.rem, c.t_last, c.nbytes = nbytes[j], now, nbytes[j]
        c.id, c.nres, c.extra = keys[j], nres[j], 0
        meta[NACTIVE] += 1
        alone = True
        for k in range(nres[j]):
            r = flat[at + k]
            res[f, k] = r
            _append(r, f, k, pool, epos, ri, meta)
            alone = alone and ri[r, NON] == 1
        at += nres[j]
        if not alone:
            ss[REGION, nent] = f
            nent += 1
            continue
        level, bneck = math.inf, -1
        for k in range(c.nres):
            r = res[f, k]
            share = rf[r, CAP] / w
            if share < level or (share == level and r < bneck):
                level, bneck = share, r
        h.lam, h.new_lam, h.bneck, h.new_bneck = level, level, bneck, bneck
        h.rate = level * w
        for k in range(c.nres):
            e = pool[epos[f, k]]
            e.rate, e.lam, e.bneck = h.rate, h.lam, h.bneck
        ss[XTRA, nu] = f
        sf[nu] = now + c.rem / h.rate
        nu += 1
    _cal_apply(nu, st)
    if nent > 0:
        _reallocate(nent, 0, now, st)
    return next_finish(st)


@_jit
def enter_one(
    f: int,
    key: int,
    nbytes: float,
    w: float,
    n: int,
    r0: int,
    r1: int,
    now: float,
    keep: bool,
    latch: int,
    tab: Any,
) -> float:
    """:func:`enter` of one flow with at most two resources (``r0``, ``r1``); NaN, and
    nothing done, where the pool has no room for its ``n`` entries
    (``CompiledCore._pool_room``'s test: make room, call again)."""
    meta, pool = view1(tab, 8, np.int64), view1(tab, 3, ELEM)
    if meta[PTOP] + 4 * meta[NELEM] + 12 * n + 8 > pool.size:
        return math.nan
    flat = np.empty(n, np.int64)
    flat[0] = r0
    if n > 1:
        flat[1] = r1
    return enter(
        np.full(1, f, np.int64), np.full(1, key, np.int64), np.full(1, nbytes),
        np.full(1, w), np.full(1, n, np.int64), flat, np.full(1, keep, np.bool_),
        np.full(1, latch, np.int64), now, tab,
    )  # fmt: skip


@_jit
def _leave_all(n: int, now: float, st: State) -> None:
    """The flows in ``SS[OUT][:n]`` leave (the general core's ``_leave``; out of the
    calendar already; their slot's id becomes -1); re-rate what they touched."""
    hot, cold, res, pool, ri, meta, sr, ss, epos = (
        st[0], st[1], st[2], st[3], st[5], st[8], st[9], st[11], st[13]
    )  # fmt: skip
    mark = _stamp(meta)
    nch = 0
    for i in range(n):
        f = ss[OUT, i]
        h, c = hot[f], cold[f]
        rem = c.rem - h.rate * (now - c.t_last)
        c.rem = 0.0 if rem < 0.0 else rem
        c.t_last = now
        c.id = -1
        meta[NACTIVE] -= 1
        for k in range(c.nres):
            r = res[f, k]
            _unlink(r, f, k, pool, epos, ri, meta)
            if ri[r, S_TOUCH] != mark:
                ri[r, S_TOUCH] = mark
                sr[CHANGED, nch] = r
                nch += 1
    _reallocate(0, nch, now, st)


@_jit
def remove(slots: Any, now: float, tab: Any) -> float:
    """Flows leave unfinished (the general core's ``remove``); the next completion time."""
    st = _state(tab)
    ss, sf = st[11], st[14]
    for i in range(slots.size):
        ss[XTRA, i] = slots[i]
        sf[i] = math.nan
    _cal_apply(slots.size, st)
    for i in range(slots.size):
        ss[OUT, i] = slots[i]
    _leave_all(slots.size, now, st)
    return next_finish(st)


@_jit
def pop_chain(now: float, horizon: float, latch_left: Any, tab: Any) -> tuple[int, float, float]:
    """The general core's ``pop_due`` at ``now`` (the flows due then leave, in ``(finish,
    id)`` order; a due flow with ``keep[slot]`` set, a stream's piece, stays in its
    bandwidth phase at its rate, *parked*: no bytes left, ``nbytes`` 0, no calendar entry
    until :func:`refill`), then the same at the instants of the next completions, one
    after the other, while every flow completing there is *quiet* and the instant is
    before ``horizon`` (the next other event of the simulation).

    A due flow is quiet when it is counted on a latch (``latch_of[slot] >= 0``), is not
    a stream's piece (``keep``), and other flows of its latch are still in flight once it
    left (``latch_left``, decremented here for every due flow on a latch). The flows of
    the first instant are popped whatever they are; an instant after it with a flow that
    is not quiet is left in the calendar as it was (entries and latch counts restored),
    to be popped by the next wake-up. Each later instant is the one the wake-up after the
    previous instant would have fired at: ``t + max(finish - t, 0)``.

    Returns n (the due slots are ``due[:n]``, their instants ``when[:n]``, quietness
    ``quiet[:n]``), the last instant popped and the next completion time. ``keep``,
    ``latch_of``, ``due``, ``when`` and ``quiet`` are in the address table ``tab``."""
    st = _state(tab)
    keep, latch_of = view1(tab, KEEP, np.bool_), view1(tab, LATCH_OF, np.int64)
    due, when = view1(tab, DUE, np.int64), view1(tab, WHEN, np.float64)
    quiet = view1(tab, QUIET, np.bool_)
    hot, cold, cal, pos, meta, ss, sf = st[0], st[1], st[6], st[7], st[8], st[11], st[14]
    n, t, first, done = 0, now, True, now
    while True:
        m, loud = n, False
        while meta[HSIZE] > 0:
            f = cal[0].slot
            finish = cal[0].finish
            if not (finish <= t or (finish - t) * hot[f].rate <= REL_EPS * cold[f].nbytes):
                break
            due[n], when[n] = f, finish
            q = not keep[f] and latch_of[f] >= 0
            if q:
                latch_left[latch_of[f]] -= 1
                q = latch_left[latch_of[f]] > 0
            quiet[n] = q
            loud = loud or not q
            n += 1
            pos[f] = -1
            last = meta[HSIZE] - 1
            meta[HSIZE] = last
            if last > 0:
                e = cal[last]
                cal[0].finish, cal[0].id, cal[0].slot = e.finish, e.id, e.slot
                _cal_sift(cal, pos, last, 0)
        if n == m:
            break
        if loud and not first:  # left for the wake-up at t
            for u in range(m, n):
                f = due[u]
                if not keep[f] and latch_of[f] >= 0:
                    latch_left[latch_of[f]] += 1
                ss[XTRA, u - m] = f
                sf[u - m] = when[u]
            _cal_apply(n - m, st)
            n = m
            break
        nout = 0
        for u in range(m, n):
            f = due[u]
            when[u] = t
            if keep[f]:
                c = cold[f]
                c.rem, c.t_last, c.nbytes = 0.0, t, 0.0
            else:
                ss[OUT, nout] = f
                nout += 1
        _leave_all(nout, t, st)
        done = t
        if loud or meta[HSIZE] == 0:
            break
        wait = cal[0].finish - t
        after = t + (wait if wait > 0.0 else 0.0)
        if not after < horizon:
            break
        t, first = after, False
    return n, done, next_finish(st)


@_jit
def refill(f: int, key: int, nbytes: float, now: float, keep: bool, tab: Any) -> float:
    """The parked flow in slot ``f`` carries its next piece, ``nbytes`` from now at the
    rate it has, as flow ``key`` (its slot's ``keep`` set, its entry counted), last on
    its resources as a new flow would be (it leaves each list first, so ``_append``
    never moves the list's block); the next completion time."""
    st = _state(tab)
    res, pool, ri, meta, ss, epos, sf = st[2], st[3], st[5], st[8], st[11], st[13], st[14]
    view1(tab, KEEP, np.bool_)[f] = keep
    view1(tab, ENTERED, np.int64)[f] = meta[ENTRIES]
    meta[ENTRIES] += 1
    c = st[1][f]
    for k in range(c.nres):
        r = res[f, k]
        e = pool[epos[f, k]]
        rate, lam, mark, bneck = e.rate, e.lam, e.mark, e.bneck
        _unlink(r, f, k, pool, epos, ri, meta)
        _append(r, f, k, pool, epos, ri, meta)
        e = pool[epos[f, k]]
        e.rate, e.lam, e.mark, e.bneck = rate, lam, mark, bneck
    c.rem, c.t_last, c.nbytes, c.id = nbytes, now, nbytes, key
    ss[XTRA, 0] = f
    sf[0] = now + nbytes / st[0][f].rate if nbytes > 0.0 else math.nan  # 0: stays parked
    _cal_apply(1, st)
    return next_finish(st)


@_jit
def shorten(f: int, cut: float, now: float, keep: bool, tab: Any) -> float:
    """The flow in slot ``f`` carries ``cut`` bytes less (the general core's ``shorten``:
    its bytes advanced to ``now`` and cut, same rate), its slot's ``keep`` set; the next
    completion time."""
    st = _state(tab)
    view1(tab, KEEP, np.bool_)[f] = keep
    h, c, ss, sf = st[0][f], st[1][f], st[11], st[14]
    rest = c.rem - h.rate * (now - c.t_last) - cut
    c.rem = 0.0 if rest < 0.0 else rest
    c.t_last = now
    c.nbytes -= cut
    ss[XTRA, 0] = f
    sf[0] = now + c.rem / h.rate
    _cal_apply(1, st)
    return next_finish(st)


@_jit
def next_finish(st: State) -> float:
    """Completion time of the next flow to complete (``inf``: none)."""
    return st[6][0].finish if st[8][HSIZE] > 0 else math.inf


def empty_state(capacity: Any, slots: int, width: int, pool: int) -> State:
    """Arrays of a network with resources of ``capacity`` (bytes/s), no flow."""
    n_res = len(capacity)
    rf = np.zeros((n_res, 4))
    rf[:, CAP] = capacity
    cold = np.zeros(slots, COLD)
    cold["id"] = -1
    return (
        np.zeros(slots, HOT),
        cold,
        np.zeros((slots, width), dtype=np.int64),
        np.zeros(pool, ELEM),
        rf,
        np.zeros((n_res, 12), dtype=np.int64),
        np.zeros(slots, CAL),
        np.full(slots, -1, dtype=np.int64),
        np.zeros(6, dtype=np.int64),
        np.zeros((5, max(n_res, 1)), dtype=np.int64),
        np.zeros(max(n_res, 1)),
        np.zeros((3, slots), dtype=np.int64),
        np.zeros(slots * width, dtype=np.int64),
        np.zeros((slots, width), dtype=np.int64),
        np.zeros(slots),
    )
