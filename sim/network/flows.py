"""The flow-level network inside a SimPy simulation (the ``network`` clock).

A flow waits its route latency, then shares bandwidth max-min fairly with the other flows
in their bandwidth phase (see :mod:`sim.network.maxmin`) until its bytes are through.
The network owns three kinds of SimPy events: one timeout per flow for the latency
phase, one pending wake-up for the next completion (stale wake-ups are recognised by a
version number instead of being cancelled), and each flow's ``done`` event.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Set
from typing import Any, cast

import numpy as np
import simpy

from sim.network.faults import FlowFailed, NetworkError
from sim.network.maxmin import FlowsOn, Share, reallocate
from sim.network.routes import LinkGraph, Route, Routes

#: A flow whose remaining bytes fall to this fraction of its size counts as complete.
REL_EPS = 1e-12

LATENCY, BANDWIDTH, DONE, FAILED = "latency", "bandwidth", "done", "failed"
SHARING = ("maxmin", "rtt_weighted")
_NOTHING: frozenset[int] = frozenset()


class Flow(Share):
    """A message of ``nbytes`` from ``src`` to ``dst`` (created by :meth:`FlowNetwork.send`).

    Attributes
    ----------
    id : int
        Sequence number in its network (0, 1, …), the tie-breaker everywhere.
    src, dst : int
        Peers.
    nbytes : float
        Size, bytes.
    tag : Any
        Whatever the sender attached.
    done : simpy.Event
        Succeeds with the completion time (seconds) or fails with :class:`FlowFailed`.
    start_s, latency_s : float
        Send time and route latency, seconds.
    end_s : float
        Completion or failure time, seconds (``nan`` while in flight).
    phase : str
        ``"latency"``, ``"bandwidth"``, ``"done"`` or ``"failed"``.
    bytes_sent : float
        Bytes through once the flow ended (``nbytes`` if done); see
        :attr:`FlowNetwork.bytes_out` for in-flight progress.
    """

    __slots__ = (
        "bytes_sent", "done", "dst", "end_s", "id", "latency_s", "nbytes", "phase",
        "remaining", "src", "start_s", "t_last", "tag", "version",
    )  # fmt: skip
    done: simpy.Event
    start_s: float

    def __init__(
        self, key: int, src: int, dst: int, nbytes: float, tag: Any, route: Route, w: float
    ) -> None:
        self.id, self.src, self.dst, self.nbytes, self.tag = key, src, dst, nbytes, tag
        self.latency_s, self.res = route
        self.phase, self.end_s, self.bytes_sent, self.version = LATENCY, math.nan, 0.0, 0
        self.remaining, self.t_last, self.w = nbytes, 0.0, w
        self.rate = self.lam = self.new_lam = 0.0
        self.bneck = self.new_bneck = -1
        self.mark = self.frozen = 0

    def __repr__(self) -> str:
        return f"Flow(id={self.id}, {self.src}->{self.dst}, {self.nbytes:g} B, {self.phase})"


class FlowNetwork:
    """Peers' NICs (and optional shared links) carrying flows, inside a SimPy environment.

    Parameters
    ----------
    env
        The simulation's environment.
    upload_bytes_per_s, download_bytes_per_s
        Shape ``(n,)`` float, bytes/s, ``> 0``; ``inf`` never limits.
    latency_s
        Shape ``(n,)`` one-way latency per peer (route ``lat[src] + lat[dst]``) or
        ``(n, n)`` route latencies; seconds.
    sharing
        ``"maxmin"`` (default) or ``"rtt_weighted"`` (weight 1 / route latency; every
        route latency must then be positive).
    links
        Optional shared links (:class:`~sim.network.routes.LinkGraph`).

    Notes
    -----
    Failed ``done`` events are *defused* before they fail: a process that yields one
    still gets :class:`FlowFailed` thrown in, but a failure nobody waits for does not
    crash the environment; it is counted in ``flows_failed``.

    Only SimPy's public API touches the events: ``done`` is settled with
    :meth:`simpy.Event.succeed` or :meth:`simpy.Event.fail`, so it is processed as a
    later event of the same instant, after the wake-up that completed its flow, in
    completion order, whether or not anyone waits for it yet.

    Rates change only when a flow enters or leaves its bandwidth phase; every flow's
    remaining bytes are advanced lazily, when its own rate changes. Completions at the
    same instant are handled together, in ``(finish time, id)`` order.
    """

    def __init__(
        self,
        env: simpy.Environment,
        upload_bytes_per_s: Any,
        download_bytes_per_s: Any,
        latency_s: Any,
        sharing: str = "maxmin",
        links: LinkGraph | None = None,
    ) -> None:
        if sharing not in SHARING:
            raise NetworkError("sharing", sharing, f"one of {SHARING}")
        self.env, self.sharing = env, sharing
        self.routes = Routes(upload_bytes_per_s, download_bytes_per_s, latency_s, links)
        self.n = self.routes.n
        self._capacity = self.routes.capacity_bytes_per_s
        self._flows_on: FlowsOn = [{} for _ in self._capacity]
        self._in_flight: list[dict[int, Flow]] = [{} for _ in range(self.n)]
        self._active: dict[int, Flow] = {}
        self._heap: list[tuple[float, int, int, Flow]] = []
        self._wake_at = math.inf
        self._wake_version = 0
        self._out = [0.0] * self.n
        self._in = [0.0] * self.n
        self.flows_started = self.flows_completed = self.flows_failed = 0
        self._latency_batches: dict[float, list[Flow]] = {}

    # -- public API ----------------------------------------------------------------------
    def send(
        self, src: int, dst: int, nbytes: float, tag: Any = None, latency: bool = True
    ) -> Flow:
        """Start a flow of ``nbytes`` (bytes, ``>= 0``) from ``src`` to ``dst`` now.

        ``latency=False`` skips the route latency (more data on an open stream, sent as
        soon as the previous piece went through).
        """
        n = self.n
        if type(src) is not int or not 0 <= src < n:
            src = self.routes.check_peer("send(src)", src)
        if type(dst) is not int or not 0 <= dst < n:
            dst = self.routes.check_peer("send(dst)", dst)
        nbytes = float(nbytes)
        if not 0.0 <= nbytes < math.inf:
            raise NetworkError("send(nbytes)", nbytes, "a finite number of bytes >= 0")
        route = self.routes.route(src, dst)
        latency_s, weight = route[0], 1.0
        if not latency:
            route = (0.0, route[1])
        if self.sharing == "rtt_weighted":
            if latency_s <= 0.0:
                raise NetworkError("send(src, dst)", (src, dst), "a positive route latency")
            weight = 1.0 / latency_s
        flow = Flow(self.flows_started, src, dst, nbytes, tag, route, weight)
        env = self.env
        flow.done, flow.start_s = simpy.Event(env), env.now
        self.flows_started += 1
        self._in_flight[src][flow.id] = flow
        self._in_flight[dst][flow.id] = flow
        if latency and latency_s > 0.0:
            self._after_latency(flow, latency_s)
        else:
            self._enter(flow)
        return flow

    def fail_peer(self, peer: int) -> list[Flow]:
        """Fail every in-flight flow from or to ``peer`` now; return them (by id)."""
        peer = self.routes.check_peer("fail_peer(peer)", peer)
        flows = list(self._in_flight[peer].values())
        changed: set[int] = set()
        now = self.env.now
        for flow in flows:
            if flow.phase is BANDWIDTH:
                self._leave(flow, now)
                changed.update(flow.res)
            self._end(flow, FAILED, now)
            self._account(flow, flow.nbytes - flow.remaining)
        if changed:
            self._reallocate((), changed, now)
        for flow in flows:
            flow.done.defused = True
            flow.done.fail(FlowFailed(flow, peer, now))
        self.flows_failed += len(flows)
        return flows

    def cancel(self, flow: Flow) -> None:
        """Fail ``flow`` now if it is still in flight (its receiver gave up on it).

        Its ``done`` event fails with :class:`FlowFailed` (``peer = -1``); the bytes it
        had moved stay counted. A flow that has already ended is left alone.
        """
        if flow.phase is DONE or flow.phase is FAILED:
            return
        now = self.env.now
        if flow.phase is BANDWIDTH:
            self._leave(flow, now)
            self._reallocate((), set(flow.res), now)
        self._end(flow, FAILED, now)
        self._account(flow, flow.nbytes - flow.remaining)
        flow.done.defused = True
        flow.done.fail(FlowFailed(flow, -1, now))
        self.flows_failed += 1

    @property
    def bytes_out(self) -> np.ndarray:
        """Bytes each peer has sent so far, partial flows included; shape ``(n,)``."""
        return self._progress(self._out, src=True)

    @property
    def bytes_in(self) -> np.ndarray:
        """Bytes each peer has received so far, partial flows included; shape ``(n,)``."""
        return self._progress(self._in, src=False)

    @property
    def bytes_sent_total(self) -> float:
        """Bytes transferred so far over all flows (done, failed and in flight)."""
        return float(self.bytes_out.sum())

    def rates(self) -> dict[int, float]:
        """Current rate (bytes/s) of every flow in its bandwidth phase, by flow id."""
        return {key: flow.rate for key, flow in self._active.items()}

    # -- events --------------------------------------------------------------------------
    def _after_latency(self, flow: Flow, latency_s: float) -> None:
        """Queue ``flow`` for its bandwidth phase; flows whose latency phases end at the
        same instant share one SimPy timeout and one reallocation (a round's messages)."""
        end_s = self.env.now + latency_s
        batch = self._latency_batches.get(end_s)
        if batch is None:
            batch = self._latency_batches[end_s] = []
            simpy.Timeout(self.env, latency_s, end_s).callbacks.append(self._on_latency)
        batch.append(flow)

    def _on_latency(self, event: simpy.Event) -> None:
        batch = self._latency_batches.pop(cast(float, event.value))
        entering = tuple(flow for flow in batch if flow.phase is LATENCY)
        if entering:
            self._enter(*entering)

    def _enter(self, *flows: Flow) -> None:
        now = self.env.now
        entered = []
        for flow in flows:
            if flow.nbytes == 0.0 or not flow.res:
                self._complete(flow, now)
                flow.done.succeed(now)  # maybe inside send(): callers attach callbacks later
                continue
            flow.phase, flow.t_last = BANDWIDTH, now
            self._active[flow.id] = flow
            flows_on = self._flows_on
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
            self._reallocate(tuple(entered), _NOTHING, now)
        else:
            self._schedule_wake(now)

    def _rate_alone(self, flow: Flow, now: float) -> None:
        """Rate of a flow alone on all its resources: what :func:`reallocate` would give
        (the smallest capacity share, ties to the lowest resource), without solving."""
        capacity, w = self._capacity, flow.w
        level, bneck = math.inf, -1
        for r in flow.res:
            share = capacity[r] / w
            if share < level or (share == level and r < bneck):
                level, bneck = share, r
        flow.lam = flow.new_lam = level
        flow.bneck = flow.new_bneck = bneck
        flow.rate = rate = level * w
        flow.version += 1
        heapq.heappush(self._heap, (now + flow.remaining / rate, flow.id, flow.version, flow))

    def _on_wake(self, event: simpy.Event) -> None:
        if event.value != self._wake_version:
            return  # superseded by an earlier wake-up
        self._wake_at = math.inf
        now, heap, due = self.env.now, self._heap, []
        while heap:
            finish, _, version, flow = heap[0]
            if flow.version != version:
                heapq.heappop(heap)
            elif finish <= now or (finish - now) * flow.rate <= REL_EPS * flow.nbytes:
                heapq.heappop(heap)
                due.append(flow)
            else:
                break
        changed: set[int] = set()
        for flow in due:
            self._leave(flow, now)
            changed.update(flow.res)
            self._complete(flow, now)
        self._reallocate((), changed, now)
        for flow in due:
            flow.done.succeed(now)

    # -- bookkeeping ---------------------------------------------------------------------
    def _reallocate(self, seeds: tuple[Flow, ...], changed: Set[int], now: float) -> None:
        """New rates after a change; a new heap entry for every flow whose rate changed."""
        heap, push = self._heap, heapq.heappush
        f: Any
        for f in reallocate(seeds, changed, self._flows_on, self._capacity):
            f.bneck = f.new_bneck
            rate = f.new_lam * f.w
            if rate != f.rate:
                f.remaining -= f.rate * (now - f.t_last)
                f.t_last, f.rate, f.lam = now, rate, f.new_lam
                f.version += 1
                if rate > 0.0:
                    push(heap, (now + f.remaining / rate, f.id, f.version, f))
        if len(heap) > 64 + 4 * len(self._active):
            self._heap = heap = [e for e in heap if e[3].version == e[2]]
            heapq.heapify(heap)
        self._schedule_wake(now)

    def _schedule_wake(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][3].version != heap[0][2]:
            heapq.heappop(heap)
        if not heap or heap[0][0] >= self._wake_at:
            return
        self._wake_at = finish = heap[0][0]
        self._wake_version += 1
        delay = max(finish - now, 0.0)
        simpy.Timeout(self.env, delay, self._wake_version).callbacks.append(self._on_wake)

    def _leave(self, flow: Flow, now: float) -> None:
        """Take a flow out of its bandwidth phase, its bytes advanced to ``now``."""
        flow.remaining = max(flow.remaining - flow.rate * (now - flow.t_last), 0.0)
        flow.t_last = now
        flow.version += 1  # its heap entries are stale now
        del self._active[flow.id]
        for r in flow.res:
            del self._flows_on[r][flow.id]

    def _complete(self, flow: Flow, now: float) -> None:
        self._end(flow, DONE, now)
        self._account(flow, flow.nbytes)
        self.flows_completed += 1

    def _end(self, flow: Flow, phase: str, now: float) -> None:
        flow.phase, flow.end_s = phase, now
        del self._in_flight[flow.src][flow.id]
        self._in_flight[flow.dst].pop(flow.id, None)

    def _account(self, flow: Flow, nbytes: float) -> None:
        flow.bytes_sent = nbytes
        self._out[flow.src] += nbytes
        self._in[flow.dst] += nbytes

    def _progress(self, settled: list[float], src: bool) -> np.ndarray:
        total = np.array(settled)
        now = self.env.now
        for flow in self._active.values():
            sent = flow.nbytes - flow.remaining + flow.rate * (now - flow.t_last)
            total[flow.src if src else flow.dst] += min(sent, flow.nbytes)
        return total

    def count_solo(self, src: list[int], dst: list[int], nbytes: float) -> None:
        """Count flows of ``nbytes`` each, ``src[k] → dst[k]``, that their sender timed in
        closed form instead of sending them: each was alone on its resources from its
        start to its completion, and completed before anything else could look at the
        network. They take the next ids and count as started and completed, their bytes
        as sent and received, as if sent with :meth:`send` in this order."""
        out, into = self._out, self._in
        for s, d in zip(src, dst, strict=True):
            out[s] += nbytes
            into[d] += nbytes
        self.flows_started += len(src)
        self.flows_completed += len(src)
