"""Weighted max-min fair rates by progressive filling, recomputed locally after a change.

Every flow in its bandwidth phase holds a :class:`Share`: the finite resources it uses
(``res``), its weight ``w`` (1, or 1 / route latency for ``rtt_weighted``) and its
normalised rate ``lam = rate / w``. The unique weighted max-min fair allocation is the
feasible one in which every flow has a *bottleneck*: a saturated resource on which no
flow has a larger ``lam`` (Bertsekas & Gallager, *Data Networks*, on max-min fairness).

:func:`reallocate` uses that characterisation to recompute as little as possible. It
solves the *region* (the flows that may change) by progressive filling on the capacity
the other flows leave, then checks the bottleneck condition on every flow that touches
a resource whose load or flows changed; flows that fail it join the region and the
region is solved again. The region only grows and is at most the connected component
of the change, where the check always passes; the result equals a from-scratch solve.

Every collection whose order reaches the arithmetic is ordered: resources in the order
they were first met (dicts used as ordered sets), flows in region order. The compiled
path (:mod:`sim.network.compiled`) repeats these steps in the same order, so both give
bit-identical rates.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Collection, Sequence

import numpy as np

#: Relative tolerance of the bottleneck check (saturation and "no larger lam").
TOL = 1e-9

#: A flow whose remaining bytes fall to this fraction of its size counts as complete.
REL_EPS = 1e-12

_STAMPS = itertools.count(1)

FlowsOn = list[dict[int, "Share"]]
#: Resources in the order they were first met (a dict used as an ordered set).
Ordered = dict[int, None]


class Share:
    """One flow's claim on the resources (kernel state; :class:`Flow` extends it).

    Parameters
    ----------
    res
        Indices of the finite-capacity resources the flow uses.
    w
        Weight (dimensionless, > 0): rates are ``w * lam``.
    """

    __slots__ = ("bneck", "frozen", "lam", "mark", "new_bneck", "new_lam", "rate", "res", "w")

    def __init__(self, res: tuple[int, ...], w: float) -> None:
        self.res, self.w = res, w
        self.rate = self.lam = self.new_lam = 0.0
        self.bneck = self.new_bneck = -1
        self.mark = self.frozen = 0


def progressive_filling(
    region: Sequence[Share], flows_on: FlowsOn, capacity: Sequence[float], stamp: int
) -> tuple[dict[int, float], set[int]]:
    """Max-min fair ``new_lam`` for ``region`` on the capacity the other flows leave.

    Parameters
    ----------
    region
        The flows to solve, each with ``mark == stamp``; flows without the mark keep
        their ``rate`` (bytes/s) and only reduce the capacity left.
    flows_on
        For every resource, the flows using it (keyed by flow id).
    capacity
        Capacity of every resource, bytes/s.
    stamp
        Marker of this solve.

    Returns
    -------
    remaining, saturated
        Capacity left on every resource the region uses (bytes/s), and the resources
        that froze a flow (saturated).

    Notes
    -----
    Repeatedly take the resource with the smallest ``left / Σ w`` over its unfrozen
    flows (ties: lowest resource index), freeze those flows at ``lam`` = that share and
    subtract their rates elsewhere. Sets ``new_lam`` and ``new_bneck`` of every flow.
    """
    if len(region) == 1:
        return _fill_one(region[0], flows_on, capacity, stamp)
    left: dict[int, float] = {}
    wsum: dict[int, float] = {}
    count: dict[int, int] = {}
    members: dict[int, list[Share]] = {}
    for f in region:
        for r in f.res:
            group = members.get(r)
            if group is None:
                members[r] = [f]
                wsum[r], count[r] = f.w, 1
                used = 0.0
                for g in flows_on[r].values():
                    if g.mark != stamp:
                        used += g.rate
                left[r] = capacity[r] - used
            else:
                group.append(f)
                wsum[r] += f.w
                count[r] += 1
    heap = [(max(left[r], 0.0) / wsum[r], r) for r in members]
    heapq.heapify(heap)
    saturated: set[int] = set()
    while heap:
        share, r = heap[0]
        if count[r] == 0:
            heapq.heappop(heap)
            continue
        level = max(left[r], 0.0) / wsum[r]
        if level > share:  # stale: levels only rise as flows freeze elsewhere
            heapq.heapreplace(heap, (level, r))
            continue
        heapq.heappop(heap)
        saturated.add(r)
        for f in members[r]:
            if f.frozen == stamp:
                continue
            f.frozen, f.new_lam, f.new_bneck = stamp, level, r
            rate = level * f.w
            for s in f.res:
                count[s] -= 1
                if s != r:
                    left[s] -= rate
                    wsum[s] -= f.w
        left[r] = 0.0
    return left, saturated


def _fill_one(
    f: Share, flows_on: FlowsOn, capacity: Sequence[float], stamp: int
) -> tuple[dict[int, float], set[int]]:
    """:func:`progressive_filling` of a region of one flow (the common case), same result."""
    left = {}
    level, r = math.inf, -1
    for s in f.res:
        used = 0.0
        for g in flows_on[s].values():
            if g.mark != stamp:
                used += g.rate
        rest = left[s] = capacity[s] - used
        share = (rest if rest > 0.0 else 0.0) / f.w
        if share < level or (share == level and s < r):
            level, r = share, s
    f.frozen, f.new_lam, f.new_bneck = stamp, level, r
    rate = level * f.w
    for s in f.res:
        left[s] -= rate
    left[r] = 0.0
    return left, {r}


class _Check:
    """The bottleneck condition on the candidate allocation of one solve."""

    def __init__(self, flows_on: FlowsOn, capacity: Sequence[float], stamp: int) -> None:
        self.flows_on, self.capacity, self.stamp = flows_on, capacity, stamp
        self.peaks: dict[int, float] = {}

    def peak(self, r: int) -> float:
        """Largest ``lam`` on resource ``r`` (candidate for the region, current otherwise)."""
        value = self.peaks.get(r)
        if value is None:
            value, stamp = 0.0, self.stamp
            for g in self.flows_on[r].values():
                lam = g.new_lam if g.mark == stamp else g.lam
                if lam > value:
                    value = lam
            self.peaks[r] = value
        return value

    def is_bottleneck(self, r: int, lam: float, left: dict[int, float], sat: set[int]) -> bool:
        """Whether ``r`` is saturated and no flow on it has a larger ``lam``."""
        if r not in sat:
            rest = left.get(r)
            if rest is None:
                used = 0.0  # a plain loop: sum() of floats is compensated from Python 3.12
                for g in self.flows_on[r].values():
                    used += g.rate
                rest = left[r] = self.capacity[r] - used
            if rest > TOL * self.capacity[r]:
                return False
        return lam >= self.peak(r) * (1.0 - TOL)


def _violations(
    region: Sequence[Share],
    touched: Ordered,
    covered: Ordered,
    check: _Check,
    left: dict[int, float],
    sat: set[int],
) -> list[Share]:
    """Flows outside the region that must join it for the allocation to be max-min fair.

    Only flows bottlenecked on a resource the region touches can lose their bottleneck;
    those of ``covered`` resources are known to be in the region already.
    """
    stamp, flows_on = check.stamp, check.flows_on
    extra: dict[int, Share] = {}
    for f in region:
        lam = f.new_lam
        if check.is_bottleneck(f.new_bneck, lam, left, sat):
            continue
        valid = [s for s in f.res if check.is_bottleneck(s, lam, left, sat)]
        if valid:
            f.new_bneck = valid[0]
            continue
        for s in f.res:
            for g in flows_on[s].values():
                if g.mark != stamp and g.lam > lam * (1.0 + TOL):
                    extra[id(g)] = g
    for r in touched:
        if r in covered:
            continue
        for g in flows_on[r].values():
            if g.bneck != r or g.mark == stamp:
                continue
            for s in g.res:
                if s in touched and check.is_bottleneck(s, g.lam, left, sat):
                    g.bneck = s
                    break
            else:
                extra[id(g)] = g
    return list(extra.values())


def reallocate(
    seeds: Sequence[Share],
    changed: Collection[int],
    flows_on: FlowsOn,
    capacity: Sequence[float],
) -> list[Share]:
    """Solve the max-min fair rates again after flows entered or left.

    Parameters
    ----------
    seeds
        Flows that entered (already in ``flows_on``).
    changed
        Resources of the flows that left (already removed from ``flows_on``), in the
        order they were met, without repeats.
    flows_on, capacity
        As in :func:`progressive_filling`.

    Returns
    -------
    list of Share
        The region: the only flows whose rate may have changed; their new normalised
        rate is ``new_lam`` and their bottleneck ``new_bneck``. Flows outside it keep
        their rates (their ``bneck`` may be updated).
    """
    stamp, region, covered = _initial_region(seeds, changed, flows_on)
    if not region:
        return region  # no flow is bottlenecked where anything changed: nothing moves
    while True:
        touched = dict.fromkeys(changed)
        for f in region:
            f.mark = stamp
            for r in f.res:
                touched[r] = None
        left, sat = progressive_filling(region, flows_on, capacity, stamp)
        check = _Check(flows_on, capacity, stamp)
        extra = _violations(region, touched, covered, check, left, sat)
        if not extra:
            return region
        region.extend(extra)
        # the check may have moved outside flows' bottlenecks onto covered resources
        stamp, covered = next(_STAMPS), {}


def _initial_region(
    seeds: Sequence[Share], changed: Collection[int], flows_on: FlowsOn
) -> tuple[int, list[Share], Ordered]:
    """The new flows and those bottlenecked on a resource that gained or lost a flow.

    Returns the stamp they are marked with (the first solve uses it), the flows, and
    the resources whose bottlenecked flows they all are.
    """
    stamp = next(_STAMPS)
    region = list(seeds)
    covered = dict.fromkeys(changed)
    for f in region:
        f.mark = stamp
        for r in f.res:
            covered[r] = None
    for r in covered:
        for g in flows_on[r].values():
            if g.bneck == r and g.mark != stamp:
                g.mark = stamp
                region.append(g)
    return stamp, region, covered


def maxmin_rates(
    routes: Sequence[Sequence[int]],
    capacity_bytes_per_s: Sequence[float],
    weights: Sequence[float] | None = None,
) -> np.ndarray:
    """From-scratch weighted max-min fair rates (the reference for tests and tools).

    Parameters
    ----------
    routes
        For each flow, the indices of the resources it uses.
    capacity_bytes_per_s
        Capacity of each resource, bytes/s, ``> 0``; ``inf`` never limits.
    weights
        Weight of each flow (default 1).

    Returns
    -------
    numpy.ndarray
        Shape ``(len(routes),)`` float64, bytes/s; ``inf`` for a flow limited by nothing.
    """
    capacity = [float(c) for c in capacity_bytes_per_s]
    weights = [1.0] * len(routes) if weights is None else [float(w) for w in weights]
    shares = [
        Share(tuple(r for r in route if math.isfinite(capacity[r])), w)
        for route, w in zip(routes, weights, strict=True)
    ]
    flows_on: FlowsOn = [{} for _ in capacity]
    for key, share in enumerate(shares):
        for r in share.res:
            flows_on[r][key] = share
    region = [s for s in shares if s.res]
    stamp = next(_STAMPS)
    for share in region:
        share.mark = stamp
    progressive_filling(region, flows_on, capacity, stamp)
    return np.array([s.new_lam * s.w if s.res else math.inf for s in shares])
