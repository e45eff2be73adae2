"""A round of independent flows timed in one shot, without a SimPy event per flow.

When every flow of a batch is known when it starts (sizes, start offsets, no dependency
between flows), the network is otherwise empty and nothing else happens until the last
flow ends, the flows' completion times follow from the fluid model alone: rates are
piecewise constant between *breakpoints* (a batch ending its latency phase, a completion)
and max-min fair in between. :func:`round_timeline` replays what
:class:`~sim.network.flows.FlowNetwork` does for such a batch — the same latency batches,
the same wake-ups (with their stale and early ones), the same ``(finish, id)`` completion
rule with :data:`~sim.network.maxmin.REL_EPS`, the same time arithmetic as SimPy's
``now + delay`` — but re-solves the max-min rates of all flows at once at each breakpoint
with vectorised progressive filling (:func:`fill_levels`) instead of keeping a ``Flow``,
a ``done`` event and a callback per flow.

It gives the general path's times to round-off: bit for bit when every level is a
capacity shared by equal weights (the general path's region solve and the full solve do
the same operations there), within a few ulps elsewhere (sums in another order). It
returns None, and the caller takes the general path, when a round is outside what it
replays (a zero route latency, where flows enter one at a time; a bad size) or costs more
than ``budget`` solver steps (many distinct levels or breakpoints: heterogeneous
bandwidths), where the general path's per-component solver is the cheaper one.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.network.maxmin import REL_EPS
from sim.network.routes import Routes

__all__ = ["RoundTimeline", "RouteTable", "fill_levels", "round_timeline"]

_ROOTS, _LATENCY, _WAKE = 0, 1, 2


@dataclass
class RoundTimeline:
    """When each flow of a one-shot round ended.

    Attributes
    ----------
    end_s : numpy.ndarray
        (F,) absolute end time of every flow, seconds (refused ones: when they failed).
    delivered : numpy.ndarray
        (F,) bool: completed (False: refused, an end absent when it should start).
    last_s : float
        The last end, when the round is over.
    chain : tuple of float
        Delays whose successive SimPy timeouts from the round's start land exactly on
        ``last_s`` (the scheduling history of the event that ended the last flow).
    steps : int
        Solver steps spent (events replayed and filling iterations).
    """

    end_s: np.ndarray
    delivered: np.ndarray
    last_s: float
    chain: tuple[float, ...]
    steps: int


class RouteTable:
    """The routes of a network as arrays, built once (:meth:`of` for a round's flows).

    Parameters
    ----------
    routes
        The network's :class:`~sim.network.routes.Routes`.
    """

    def __init__(self, routes: Routes) -> None:
        self.routes, self.n = routes, routes.n
        self.capacity = np.asarray(routes.capacity_bytes_per_s, dtype=float)
        self.finite = np.isfinite(self.capacity)
        lat = routes.latency_vector
        self.latency = None if lat is None else np.asarray(lat, dtype=float)
        self.matrix = routes.latency_matrix
        self.links = routes.has_links

    def of(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Route latency (F,) and finite resources (F, W) of flows ``src → dst`` (padded
        with -1): the values :meth:`Routes.route` gives each flow, vectorised without
        links."""
        if not self.links:
            if self.latency is not None:
                latency = self.latency[src] + self.latency[dst]
            else:
                assert self.matrix is not None
                latency = self.matrix[src, dst].astype(float)
            res = np.empty((src.size, 2), dtype=np.int64)
            res[:, 0] = np.where(self.finite[src], src, -1)
            down = self.n + dst
            res[:, 1] = np.where(self.finite[down], down, -1)
            return latency, res
        route = self.routes.route
        pairs = [route(s, d) for s, d in zip(src.tolist(), dst.tolist(), strict=True)]
        width = max((len(r) for _, r in pairs), default=0)
        res = np.full((len(pairs), max(width, 1)), -1, dtype=np.int64)
        for k, (_, used) in enumerate(pairs):
            res[k, : len(used)] = used
        return np.array([lat for lat, _ in pairs], dtype=float), res


def fill_levels(
    e_flow: np.ndarray,
    e_res: np.ndarray,
    e_w: np.ndarray,
    capacity: np.ndarray,
    n_flows: int,
) -> tuple[np.ndarray, int]:
    """Weighted max-min levels (``rate / w``) of ``n_flows`` flows alone on the resources.

    Parameters
    ----------
    e_flow, e_res, e_w
        One entry per (flow, resource) pair: the flow (0 … n_flows−1), the resource
        (0 … R−1) and the flow's weight.
    capacity
        (R,) capacity of each resource, bytes/s (finite).

    Returns
    -------
    levels, iterations
        (n_flows,) levels; the number of filling iterations (distinct levels).

    Notes
    -----
    Progressive filling: take the smallest ``max(left, 0) / Σw`` over the resources with
    unfrozen flows, freeze every unfrozen flow on every resource at that share (ties
    together: in exact arithmetic the general path's one-at-a-time order gives them the
    same level), subtract their rates, zero the saturated resources' capacity left.
    Every flow must use at least one resource.
    """
    n_res = capacity.size
    wsum = np.bincount(e_res, e_w, n_res)
    count = np.bincount(e_res, minlength=n_res)
    left = capacity.astype(float)
    levels = np.empty(n_flows)
    open_e = np.ones(e_flow.size, dtype=bool)
    share = np.empty(n_res)
    iterations = 0
    while True:
        live = count > 0
        if not live.any():
            return levels, iterations
        iterations += 1
        share.fill(math.inf)
        np.divide(np.maximum(left, 0.0), wsum, out=share, where=live)
        level = share.min()
        tied = share == level
        frozen = np.zeros(n_flows, dtype=bool)
        frozen[e_flow[open_e & tied[e_res]]] = True
        levels[frozen] = level
        ending = open_e & frozen[e_flow]
        r, w = e_res[ending], e_w[ending]
        left -= np.bincount(r, level * w, n_res)
        wsum -= np.bincount(r, w, n_res)
        count -= np.bincount(r, minlength=n_res)
        left[tied] = 0.0
        open_e &= ~ending


class _Replay:
    """The state of one replayed round (see :func:`round_timeline`)."""

    def __init__(
        self, res: np.ndarray, w: np.ndarray, nbytes: np.ndarray, capacity: np.ndarray
    ) -> None:
        n = nbytes.size
        valid = res >= 0
        self.e_flow_all = np.broadcast_to(np.arange(n)[:, None], res.shape)[valid]
        self.e_res_all = res[valid]
        self.capacity = capacity
        self.has_res: np.ndarray = np.asarray(valid.any(axis=1))
        self.w, self.nbytes = w, nbytes
        self.rate = np.zeros(n)
        self.rem = nbytes.astype(float)
        self.t_last = np.zeros(n)
        self.finish = np.full(n, math.inf)
        self.active = np.zeros(n, dtype=bool)
        self.flow_id = np.full(n, -1, dtype=np.int64)
        self.end_s = np.full(n, math.nan)
        #: How each flow's end was scheduled: ``chains[end_event[i]]``, then one more
        #: delay ``end_extra[i]`` unless it is nan (a refused flow's own timeout).
        self.chains: list[tuple[float, ...]] = []
        self.end_event = np.full(n, -1, dtype=np.int64)
        self.end_extra = np.full(n, math.nan)
        self.steps = 0

    def end(self, flows: np.ndarray, at_s: float, chain: tuple[float, ...]) -> None:
        """``flows`` end at ``at_s``, reached through the timeouts of ``chain``."""
        self.end_s[flows] = at_s
        self.end_event[flows] = len(self.chains)
        self.chains.append(chain)

    def chain_of(self, flow: int) -> tuple[float, ...]:
        """The delays of the timeouts that lead from the round's start to ``flow``'s end."""
        chain, extra = self.chains[int(self.end_event[flow])], float(self.end_extra[flow])
        return chain if math.isnan(extra) else (*chain, extra)

    def solve(self, now: float) -> None:
        """Max-min rates of every active flow; a flow whose rate changed has its bytes
        advanced to ``now`` and a new finish time (as the general core does)."""
        flows = np.flatnonzero(self.active)
        if flows.size == 0:
            return
        local = np.full(self.active.size, -1, dtype=np.int64)
        local[flows] = np.arange(flows.size)
        take = self.active[self.e_flow_all]
        e_flow = local[self.e_flow_all[take]]
        e_w = self.w[self.e_flow_all[take]]
        levels, iterations = fill_levels(
            e_flow, self.e_res_all[take], e_w, self.capacity, flows.size
        )
        self.steps += iterations
        new = levels * self.w[flows]
        old = self.rate[flows]
        moved = new != old
        f = flows[moved]
        if f.size == 0:
            return
        rem = self.rem[f] - old[moved] * (now - self.t_last[f])
        self.rem[f], self.t_last[f], self.rate[f] = rem, now, new[moved]
        self.finish[f] = np.where(new[moved] > 0.0, now + rem / new[moved], math.inf)

    def next_finish(self) -> float:
        flows = self.active & (self.rate > 0.0)
        return float(self.finish[flows].min()) if flows.any() else math.inf

    def pop_due(self, now: float) -> np.ndarray:
        """The flows that complete at ``now``: the prefix of the active flows in
        ``(finish, id)`` order that are due (finish reached, or within REL_EPS of their
        size), as :meth:`GeneralCore.pop_due`."""
        flows = np.flatnonzero(self.active & (self.rate > 0.0))
        order = flows[np.lexsort((self.flow_id[flows], self.finish[flows]))]
        finish, rate = self.finish[order], self.rate[order]
        due = (finish <= now) | ((finish - now) * rate <= REL_EPS * self.nbytes[order])
        stop = np.flatnonzero(~due)
        return order[: stop[0] if stop.size else order.size]


def round_timeline(
    table: RouteTable,
    sharing: str,
    src: np.ndarray,
    dst: np.ndarray,
    nbytes: np.ndarray,
    start_s: np.ndarray,
    present: np.ndarray,
    now: float,
    budget: int,
) -> RoundTimeline | None:
    """Replay a round of independent flows sent into an otherwise empty network.

    Parameters
    ----------
    table, sharing
        The network's routes (:class:`RouteTable`) and ``sharing``
        (:class:`~sim.network.FlowNetwork`).
    src, dst, nbytes
        (F,) the flows, in send order within each start offset.
    start_s
        (F,) seconds after ``now`` each flow is sent (≤ 0: at once); flows sent at the
        same offset go in index order, offsets in increasing order (as
        :meth:`sim.engine.netclock.NetworkClock.run` sends roots).
    present
        (n,) bool: who is present (for the whole round: the caller checks that nothing
        else happens before the last end). A flow with an absent end is refused: it
        fails after its route latency and moves nothing.
    now
        The round's start (simulated seconds).
    budget
        Most solver steps (events and filling iterations) before giving up.

    Returns
    -------
    RoundTimeline or None
        None when the round is outside the replay (a zero route latency, a size that is
        not finite and ≥ 0) or over ``budget``.
    """
    n_flows = src.size
    if n_flows == 0 or not bool(np.all((nbytes >= 0.0) & (nbytes < math.inf))):
        return None
    latency, res = table.of(src, dst)
    refused = ~(present[src] & present[dst])
    if bool(np.any(~refused & (latency <= 0.0))):
        return None  # entered one at a time (and rtt_weighted refuses it)
    w = np.ones(n_flows)
    if sharing == "rtt_weighted":
        w = np.where(refused, 1.0, 1.0 / np.where(refused, 1.0, latency))
    rp = _Replay(res, w, nbytes, table.capacity)
    heap: list[tuple[float, int, int, Any, tuple[float, ...]]] = []
    seq = 0
    batches: dict[float, list[np.ndarray]] = {}
    next_id = 0
    wake_at, wake_version = math.inf, 0

    def send(idx: np.ndarray, at_s: float, chain: tuple[float, ...]) -> None:
        nonlocal seq, next_id
        no = idx[refused[idx]]
        if no.size:
            rp.end(no, at_s, chain)
            rp.end_s[no] = at_s + latency[no]
            rp.end_extra[no] = latency[no]
        go = idx[~refused[idx]]
        if go.size == 0:
            return
        rp.flow_id[go] = np.arange(next_id, next_id + go.size)
        next_id += go.size
        keys = at_s + latency[go]
        unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        by_key = go[np.argsort(inverse, kind="stable")]
        bounds = np.concatenate(([0], np.cumsum(np.bincount(inverse, minlength=unique.size))))
        for k in np.argsort(first, kind="stable").tolist():
            key = float(unique[k])
            members = by_key[bounds[k] : bounds[k + 1]]
            if key in batches:
                batches[key].append(members)
                continue
            batches[key] = [members]
            delay = float(latency[members[0]])
            heapq.heappush(heap, (key, seq, _LATENCY, key, (*chain, delay)))
            seq += 1

    def schedule_wake(at_s: float, chain: tuple[float, ...]) -> None:
        nonlocal seq, wake_at, wake_version
        finish = rp.next_finish()
        if finish >= wake_at:
            return
        wake_at = finish
        wake_version += 1
        delay = max(finish - at_s, 0.0)
        heapq.heappush(heap, (at_s + delay, seq, _WAKE, wake_version, (*chain, delay)))
        seq += 1

    offsets = np.unique(start_s)
    for at in offsets.tolist():
        batch = np.flatnonzero(start_s == at)
        if at <= 0:
            send(batch, now, ())
        else:
            heapq.heappush(heap, (now + at, seq, _ROOTS, batch, (at,)))
            seq += 1
    while heap:
        at_s, _, kind, payload, chain = heapq.heappop(heap)
        rp.steps += 1
        if rp.steps > budget:
            return None
        if kind == _ROOTS:
            send(payload, at_s, chain)
            continue
        if kind == _LATENCY:
            members = np.concatenate(batches.pop(payload))
            instant = members[(rp.nbytes[members] == 0.0) | ~rp.has_res[members]]
            if instant.size:
                rp.end(instant, at_s, chain)
            entering = np.setdiff1d(members, instant, assume_unique=True)
            if entering.size:
                rp.active[entering] = True
                rp.t_last[entering] = at_s
                rp.solve(at_s)
            schedule_wake(at_s, chain)
        else:
            if payload != wake_version:
                continue
            wake_at = math.inf
            due = rp.pop_due(at_s)
            if due.size:
                rp.active[due] = False
                rp.end(due, at_s, chain)
                rp.solve(at_s)
            schedule_wake(at_s, chain)
        if rp.steps > budget:
            return None
    last = int(np.argmax(rp.end_s))
    return RoundTimeline(rp.end_s, ~refused, float(rp.end_s[last]), rp.chain_of(last), rp.steps)
