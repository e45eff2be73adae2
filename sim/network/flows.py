"""The flow-level network inside a SimPy simulation (the ``network`` clock).

A flow waits its route latency, then shares bandwidth max-min fairly with the other flows
in their bandwidth phase (see :mod:`sim.network.maxmin`) until its bytes are through.
The network owns three kinds of SimPy events: one timeout per batch of flows ending
their latency phase at the same instant, one pending wake-up for the next completion
(stale wake-ups are recognised by a version number instead of being cancelled), and
each flow's ``done`` event.

The bandwidth phase (rates, remaining bytes, completion times) lives in a *core*: the
general path (:class:`~sim.network.general.GeneralCore`, Python objects) or the
compiled path (:class:`~sim.network.compiled.CompiledCore`, the same steps on arrays in
numba), which give bit-identical results; see :data:`SOLVERS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import numpy as np
import simpy

from sim.network import compiled
from sim.network.faults import FlowFailed, NetworkError
from sim.network.general import GeneralCore
from sim.network.maxmin import REL_EPS, Share
from sim.network.routes import LinkGraph, Route, Routes

__all__ = [
    "BANDWIDTH", "COMPILED_MIN_PEERS", "DONE", "FAILED", "LATENCY", "REL_EPS", "SHARING",
    "SOLVERS", "Flow", "FlowNetwork",
]  # fmt: skip

LATENCY, BANDWIDTH, DONE, FAILED = "latency", "bandwidth", "done", "failed"
SHARING = ("maxmin", "rtt_weighted")
#: ``solver`` values: ``general`` (Python), ``compiled`` (numba, the extra ``fast``),
#: ``auto`` (compiled when numba imports and the network has at least
#: :data:`COMPILED_MIN_PEERS` peers: below that, importing numba costs more than it saves).
SOLVERS = ("auto", "general", "compiled")
COMPILED_MIN_PEERS = 256


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
        Succeeds with the completion time (seconds) or fails with :class:`FlowFailed`
        (made on first use; a quiet completion, :meth:`FlowNetwork.join_latch`, never
        makes it).
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
        "_done", "bytes_sent", "dst", "end_s", "env", "id", "keep", "latch", "latency_s",
        "loud", "nbytes", "parked", "phase", "quiet", "remaining", "slot", "src", "start_s",
        "t_last", "tag", "version",
    )  # fmt: skip
    env: simpy.Environment
    start_s: float

    def __init__(
        self, key: int, src: int, dst: int, nbytes: float, tag: Any, route: Route, w: float
    ) -> None:
        self.id, self.src, self.dst, self.nbytes, self.tag = key, src, dst, nbytes, tag
        self.latency_s, self.res = route
        self.phase, self.end_s, self.bytes_sent, self.version = LATENCY, math.nan, 0.0, 0
        self.remaining, self.t_last, self.w = nbytes, 0.0, w
        self.rate = self.lam = self.new_lam = 0.0
        self.bneck = self.new_bneck = self.slot = -1
        self.mark = self.frozen = 0
        #: keep: the stream continues after this piece (:meth:`FlowNetwork.resume`);
        #: parked: its piece is done and it keeps its place (and rate) in the bandwidth
        #: phase until the next piece is resumed or the stream closed.
        self.keep = self.parked = False
        #: latch: the latch the flow is counted on (-1: none) and quiet: what its quiet
        #: completion calls instead of settling ``done``
        #: (:meth:`FlowNetwork.join_latch`)
        self.latch = -1
        self.quiet: Callable[[Flow], None] | None = None
        self.loud: Callable[[Flow, simpy.Event], None] | None = None
        self._done: simpy.Event | None = None

    @property
    def done(self) -> simpy.Event:
        """The flow's event (made on first use: a quiet completion never needs one)."""
        event = self._done
        if event is None:
            event = self._done = simpy.Event(self.env)
        return event

    def settled(self) -> simpy.Event:
        """:attr:`done`, about to be settled: with the latch's ``loud`` callback
        (:meth:`FlowNetwork.join_latch`) attached first if the flow has one."""
        event = self.done
        loud = self.loud
        # a settled flow is never quiet: drop both callbacks, which hold the caller's
        # round (a failed flow's event holds the flow in a cycle, through FlowFailed)
        self.quiet = self.loud = None
        if loud is not None:
            event.callbacks.append(partial(loud, self))
        return event

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
    solver
        ``"auto"`` (default), ``"general"`` or ``"compiled"`` (:data:`SOLVERS`): which
        core computes the bandwidth phase. Both give bit-identical completion times.

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
        solver: str = "auto",
    ) -> None:
        if sharing not in SHARING:
            raise NetworkError("sharing", sharing, f"one of {SHARING}")
        if solver not in SOLVERS:
            raise NetworkError("solver", solver, f"one of {SOLVERS}")
        self.env, self.sharing = env, sharing
        self.routes = Routes(upload_bytes_per_s, download_bytes_per_s, latency_s, links)
        self.n = self.routes.n
        self._capacity = self.routes.capacity_bytes_per_s
        self._in_flight: list[dict[int, Flow]] = [{} for _ in range(self.n)]
        self._active: dict[int, Flow] = {}
        if solver == "auto":
            big = self.n >= COMPILED_MIN_PEERS
            solver = "compiled" if big and compiled.available() else "general"
        elif solver == "compiled" and not compiled.available():
            raise NetworkError("solver", solver, "'general' or 'auto' (numba is not installed)")
        #: ``"general"`` or ``"compiled"``: the core this network runs on.
        self.solver = solver
        core = compiled.CompiledCore if solver == "compiled" else GeneralCore
        self._core: GeneralCore | compiled.CompiledCore = core(self._capacity, self._active)
        self._wake_at = math.inf
        self._wake_version = 0
        self._out = [0.0] * self.n
        self._in = [0.0] * self.n
        self.flows_started = self.flows_completed = self.flows_failed = 0
        self._latency_batches: dict[float, list[Flow]] = {}
        #: flows in flight on each latch (:meth:`join_latch`); None: no quiet
        #: completions (the general core completes one instant per wake-up); freed
        #: latch blocks by size
        self._latch_left: np.ndarray | None = None
        if isinstance(self._core, compiled.CompiledCore):
            self._latch_left = np.zeros(64, dtype=np.int64)
        self._latch_top = 0
        self._latch_free: dict[int, list[int]] = {}

    # -- public API ----------------------------------------------------------------------
    def send(
        self,
        src: int,
        dst: int,
        nbytes: float,
        tag: Any = None,
        latency: bool = True,
        keep: bool = False,
    ) -> Flow:
        """Start a flow of ``nbytes`` (bytes, ``>= 0``) from ``src`` to ``dst`` now.

        ``latency=False`` skips the route latency (more data on an open stream, sent as
        soon as the previous piece went through). ``keep=True`` opens a stream: once its
        bytes are through the flow completes (``done``) but keeps its place and rate in
        the bandwidth phase, *parked*, for the next piece (:meth:`resume`, at the same
        instant) or until :meth:`close_stream` ends the stream.
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
        flow.keep = keep
        env = self.env
        now = env.now
        flow.env, flow.start_s = env, now
        self.flows_started += 1
        in_flight = self._in_flight
        in_flight[src][flow.id] = flow
        in_flight[dst][flow.id] = flow
        if latency and latency_s > 0.0:
            # the bandwidth phase waits: flows whose latency phases end at the same
            # instant share one SimPy timeout and one reallocation (a round's messages)
            end_s = now + latency_s
            batch = self._latency_batches.get(end_s)
            if batch is None:
                batch = self._latency_batches[end_s] = []
                simpy.Timeout(env, latency_s, end_s).callbacks.append(self._on_latency)
            batch.append(flow)
        else:
            self._enter(flow)
        return flow

    def resume(self, flow: Flow, nbytes: float, keep: bool = False) -> Flow:
        """Send the next piece of ``nbytes`` on the parked stream ``flow`` now (its
        previous piece completed at this instant): what :meth:`send` with
        ``latency=False`` would do for a new flow on the same route, without leaving and
        re-entering the bandwidth phase. The flow takes a new id and ``done`` event, as
        a new flow would; ``keep`` as in :meth:`send`. A stream is one fluid flow:
        pieces sent back to back have one piece in the bandwidth phase at a time, on the
        same resources with the same weight, so max-min gives the next piece the rate
        the previous one had (``tests/property/test_stream_equivalence.py``)."""
        if not flow.parked:
            raise NetworkError("resume(flow)", flow, "a parked stream (sent with keep=True)")
        nbytes = float(nbytes)
        if not 0.0 <= nbytes < math.inf:
            raise NetworkError("resume(nbytes)", nbytes, "a finite number of bytes >= 0")
        now = self.env.now
        key = self.flows_started
        self.flows_started += 1
        active = self._active
        del active[flow.id]
        active[key] = flow
        flow.nbytes, flow.remaining, flow.keep = nbytes, nbytes, keep
        flow.phase, flow.end_s, flow.bytes_sent = BANDWIDTH, math.nan, 0.0
        flow.latency_s = 0.0  # no route latency, as send(latency=False) gives a new piece
        flow._done, flow.start_s = None, now  # a new piece, a new event
        self._core.refill(flow, key, now)  # flow.id is key from here on
        self._in_flight[flow.src][key] = flow
        self._in_flight[flow.dst][key] = flow
        if nbytes > 0.0:
            flow.parked = False
        else:  # as send: done at once (no time in the bandwidth phase)
            self._complete(flow, now)
            flow.done.succeed(now)
            if not keep:
                flow.parked = False
                self._core.remove((flow,), now)
        self._schedule_wake(now)
        return flow

    # -- latches: completions nobody needs to see at once -------------------------------
    def latches(self, k: int) -> int:
        """Reserve ``k`` latches (counters of flows in flight, :meth:`join_latch`); the
        first one's number, the others follow it; -1 where the network has no quiet
        completions (the general core). Give them back with :meth:`free_latches`."""
        left = self._latch_left
        if left is None:
            return -1
        free = self._latch_free.get(k)
        if free:
            return free.pop()
        base = self._latch_top
        self._latch_top = top = base + k
        if top > left.size:
            grown = np.zeros(max(2 * left.size, top), dtype=np.int64)
            grown[: left.size] = left
            self._latch_left = grown
        return base

    def free_latches(self, base: int, k: int) -> None:
        """Give back the ``k`` latches from ``base`` (:meth:`latches`): no flow of theirs
        may be in flight."""
        left = self._latch_left
        if base < 0 or left is None:
            return
        if left[base : base + k].any():
            raise RuntimeError(f"free_latches: flows still in flight on latches {base}..")
        self._latch_free.setdefault(k, []).append(base)

    def join_latch(
        self,
        flow: Flow,
        latch: int,
        quiet: Callable[[Flow], None],
        loud: Callable[[Flow, simpy.Event], None],
    ) -> bool:
        """Count the in-flight ``flow`` on ``latch`` (from :meth:`latches`) until it ends;
        whether it does (not on the general core, nor a stream's piece, nor a flow that
        has ended already: the caller then watches ``done`` as usual).

        When it completes while other flows of its latch are still in flight, and
        nothing else of the simulation happens at that instant, its completion is
        *quiet*: the network calls ``quiet(flow)`` at once instead of settling ``done``
        (which is then never made), and may go on to the next completion instants
        without a wake-up each, as long as every flow completing there is quiet and no
        other event comes first. The caller promises that such a completion starts
        nothing and that nothing else waits for ``done``: its ``quiet`` only records
        it. The last flow of a latch to end and a failure settle ``done`` as usual,
        with ``loud(flow, event)`` as its first callback. Times, counts and order are
        those of the usual path."""
        left = self._latch_left
        if left is None or latch < 0 or flow.keep:
            return False
        if flow.phase is DONE or flow.phase is FAILED:
            return False
        flow.latch, flow.quiet, flow.loud = latch, quiet, loud
        left[latch] += 1
        if flow.slot >= 0:
            core = cast(compiled.CompiledCore, self._core)
            core.latch_of[flow.slot] = latch
        return True

    def keep_stream(self, flow: Flow) -> None:
        """From now on the in-flight ``flow`` opens a stream, as if sent with
        ``keep=True``: its next piece will :meth:`resume` it the instant it completes.
        A flow counted on a latch leaves it (its end will release that piece, so it is
        an event). A flow that has ended, or keeps already, is left alone."""
        if flow.keep or flow.phase is DONE or flow.phase is FAILED:
            return
        flow.keep = True
        if flow.latch >= 0:
            cast(np.ndarray, self._latch_left)[flow.latch] -= 1
            flow.latch = -1
        if flow.slot >= 0 and isinstance(self._core, compiled.CompiledCore):
            self._core.keep[flow.slot] = True
            self._core.latch_of[flow.slot] = -1

    def shorten(self, flow: Flow, nbytes: float, keep: bool) -> None:
        """``flow``, in its bandwidth phase, carries ``nbytes`` in all instead of its size (at
        least what it has moved; less moves nothing more and it completes now): it
        completes once ``nbytes`` are through, at the rate it has, keeping its place;
        ``keep`` as in :meth:`send`. The network clock runs several pieces of a stream as
        one flow and cuts it back to the piece whose end must be seen
        (:mod:`sim.engine.netclock.chains`)."""
        if flow.phase is not BANDWIDTH or flow.parked:
            raise NetworkError("shorten(flow)", flow, "a flow in its bandwidth phase")
        nbytes = float(nbytes)
        if not 0.0 <= nbytes <= flow.nbytes:
            raise NetworkError("shorten(nbytes)", nbytes, f"bytes in [0, {flow.nbytes}]")
        cut = flow.nbytes - nbytes
        flow.nbytes, flow.keep = nbytes, keep
        now = self.env.now
        self._core.shorten(flow, cut, now)
        self._schedule_wake(now)

    def count_continued(self, pieces: int) -> None:
        """Count ``pieces`` pieces of streams that completed inside one flow, each
        followed by the next piece of its stream in the same flow (a chunk,
        :meth:`shorten`): flows started and completed, as :meth:`resume` would count
        them; their bytes are the flow's."""
        self.flows_started += pieces
        self.flows_completed += pieces

    def close_stream(self, flow: Flow) -> None:
        """End the parked stream ``flow`` (its next piece is not sent): it leaves the
        bandwidth phase now. A flow that is not parked is left alone."""
        if not flow.parked:
            return
        flow.parked = False
        now = self.env.now
        self._core.remove((flow,), now)
        self._schedule_wake(now)

    def fail_peer(self, peer: int) -> list[Flow]:
        """Fail every in-flight flow from or to ``peer`` now; return them (by id)."""
        peer = self.routes.check_peer("fail_peer(peer)", peer)
        flows = list(self._in_flight[peer].values())
        now = self.env.now
        moving = [flow for flow in flows if flow.phase is BANDWIDTH]
        if moving:
            self._core.remove(moving, now)
        for flow in flows:
            self._end(flow, FAILED, now)
            self._account(flow, flow.nbytes - flow.remaining)
        if moving:
            self._schedule_wake(now)
        for flow in flows:
            done = flow.settled()
            done.defused = True
            done.fail(FlowFailed(flow, peer, now))
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
        moving = flow.phase is BANDWIDTH
        if moving:
            self._core.remove((flow,), now)
        self._end(flow, FAILED, now)
        self._account(flow, flow.nbytes - flow.remaining)
        if moving:
            self._schedule_wake(now)
        done = flow.settled()
        done.defused = True
        done.fail(FlowFailed(flow, -1, now))
        self.flows_failed += 1

    @property
    def sends_watched(self) -> bool:
        """Whether someone watches every flow sent: a subclass that overrides
        :meth:`send` (a trace) or a ``send`` wrapped on this instance (the stateful
        tests' recorder). Paths that time messages without sending each as a
        :class:`Flow` stand aside then."""
        return type(self).send is not FlowNetwork.send or "send" in vars(self)

    @property
    def idle(self) -> bool:
        """Whether the network carries nothing: every flow sent has ended and no stream is
        parked in the bandwidth phase (:meth:`send` with ``keep``)."""
        ended = self.flows_completed + self.flows_failed
        return self.flows_started == ended and not self._active

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
        rate = self._core.rate
        return {key: rate(flow) for key, flow in self._active.items() if not flow.parked}

    def moved(self, flow: Flow, at_s: float | None = None) -> float:
        """Bytes of ``flow`` through at ``at_s`` (default now; a time not before the last
        change of the network): its size once done, what it had moved once failed,
        its progress in the bandwidth phase, 0 in its latency phase."""
        if flow.phase is BANDWIDTH:
            at_s = self.env.now if at_s is None else at_s
            return min(self._core.moved(flow, at_s), flow.nbytes)
        return flow.bytes_sent

    def due(self, flow: Flow) -> bool:
        """Whether ``flow``'s bytes are through now, to the completion tolerance (its
        completion is due at this instant or within round-off of it)."""
        if flow.phase is not BANDWIDTH or flow.parked:
            return False
        return flow.nbytes - self._core.moved(flow, self.env.now) <= REL_EPS * flow.nbytes

    # -- events --------------------------------------------------------------------------
    def _on_latency(self, event: simpy.Event) -> None:
        batch = self._latency_batches.pop(cast(float, event.value))
        entering = tuple(flow for flow in batch if flow.phase is LATENCY)
        if entering:
            self._enter(*entering)

    def _enter(self, *flows: Flow) -> None:
        now = self.env.now
        moving = []
        active = self._active
        for flow in flows:
            if flow.nbytes == 0.0 or not flow.res:
                self._complete(flow, now)
                flow.settled().succeed(now)  # maybe inside send(): callers attach callbacks later
                continue
            flow.phase = BANDWIDTH
            active[flow.id] = flow
            moving.append(flow)
        if moving:
            self._core.enter(moving, now)
        self._schedule_wake(now)

    def _on_wake(self, event: simpy.Event) -> None:
        """The flows due now complete; on the compiled core, so do those of the next
        instants whose completions are all quiet (:meth:`join_latch`) while nothing
        else happens before them (their instants are before the simulation's next
        event): one wake-up instead of one per instant, with the same results."""
        if event.value != self._wake_version:
            return  # superseded by an earlier wake-up
        self._wake_at = math.inf
        now = self.env.now
        horizon = self.env.peek()
        inline = horizon > now  # nothing else happens at this instant
        latches = self._latch_left
        due, when, quiet, last = self._core.pop_chain(now, horizon if inline else now, latches)
        in_flight, out, into = self._in_flight, self._out, self._in
        for flow, end_s in zip(due, when, strict=True):  # _complete, inlined
            flow.phase, flow.end_s, flow.parked = DONE, end_s, flow.keep
            flow.latch = -1  # counted off by the kernel
            del in_flight[flow.src][flow.id]
            in_flight[flow.dst].pop(flow.id, None)
            flow.bytes_sent = nbytes = flow.nbytes
            out[flow.src] += nbytes
            into[flow.dst] += nbytes
        self.flows_completed += len(due)
        self._schedule_wake(last)  # as the last instant's own wake-up would have
        for flow, q in zip(due, quiet, strict=True):
            if q and inline:
                quiet_end = flow.quiet
                flow.quiet = flow.loud = None  # they hold the caller's round (see settled)
                quiet_end(flow)  # type: ignore[misc]
            else:
                flow.settled().succeed(now)

    # -- bookkeeping ---------------------------------------------------------------------
    def _schedule_wake(self, since: float) -> None:
        """A wake-up for the next completion, where one scheduled at instant ``since``
        fires: ``since + max(finish - since, 0)``. ``since`` is now, or the last instant a
        chained wake-up popped (:meth:`_on_wake`), then reached exactly (``_Instant``)."""
        finish = self._core.next_finish()
        if finish >= self._wake_at:
            return
        self._wake_at = finish
        self._wake_version += 1
        delay: float = max(finish - since, 0.0)
        if since != self.env.now:
            delay = _Instant(since + delay)
        simpy.Timeout(self.env, delay, self._wake_version).callbacks.append(self._on_wake)

    def _complete(self, flow: Flow, now: float) -> None:
        self._end(flow, DONE, now)
        self._account(flow, flow.nbytes)
        self.flows_completed += 1

    def _end(self, flow: Flow, phase: str, now: float) -> None:
        flow.phase, flow.end_s = phase, now
        if flow.latch >= 0:
            cast(np.ndarray, self._latch_left)[flow.latch] -= 1
            flow.latch = -1
        del self._in_flight[flow.src][flow.id]
        self._in_flight[flow.dst].pop(flow.id, None)

    def _account(self, flow: Flow, nbytes: float) -> None:
        flow.bytes_sent = nbytes
        self._out[flow.src] += nbytes
        self._in[flow.dst] += nbytes

    def _progress(self, settled: list[float], src: bool) -> np.ndarray:
        total = np.array(settled)
        now, moved = self.env.now, self._core.moved
        for flow in self._active.values():
            if not flow.parked:  # a parked stream's piece is counted already
                total[flow.src if src else flow.dst] += min(moved(flow, now), flow.nbytes)
        return total

    # -- flows timed by their sender (protocols._solo_exchanges) -------------------------
    def count_solo(self, src: list[int], dst: list[int], nbytes: float) -> None:
        """Count flows of ``nbytes`` each, ``src[k] → dst[k]``, that their sender timed in
        closed form instead of sending them: each was alone on its resources from its
        start to its completion, and completed before anything else could look at the
        network. They take the next ids and count as started and completed, their bytes
        as sent and received, as if sent with :meth:`send` in this order (each peer's
        additions in this order: one loop per direction, without pairing them up)."""
        if len(src) != len(dst):
            raise ValueError(f"count_solo: {len(src)} sources, {len(dst)} destinations")
        out, into = self._out, self._in
        for s in src:
            out[s] += nbytes
        for d in dst:
            into[d] += nbytes
        self.flows_started += len(src)
        self.flows_completed += len(src)


class _Instant(float):
    """The delay of a SimPy timeout that must fire at an exact instant, its value.

    SimPy schedules a timeout at ``now + delay``, and no float ``delay`` may give ``at``
    exactly (``now`` = 3.0380555555555557 never reaches 7.054722222222222: every sum
    rounds to an even last bit). A subclass of float is asked first for the reflected
    ``now + self``, which here is the instant itself."""

    def __radd__(self, now: float) -> float:
        return float(self)
