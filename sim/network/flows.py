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
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any, cast

import numpy as np
import simpy

from sim.network import compiled
from sim.network.faults import FlowFailed, NetworkError
from sim.network.flow import BANDWIDTH, DONE, FAILED, LATENCY, Flow
from sim.network.general import GeneralCore
from sim.network.maxmin import REL_EPS
from sim.network.routes import LinkGraph, Routes
from sim.network.streams import Streams

__all__ = [
    "BANDWIDTH", "COMPILED_MIN_PEERS", "DONE", "FAILED", "LATENCY", "REL_EPS", "SHARING",
    "SOLVERS", "Flow", "FlowNetwork", "timeout_at",
]  # fmt: skip

SHARING = ("maxmin", "rtt_weighted")
#: ``solver`` values: ``general`` (Python), ``compiled`` (numba, the extra ``fast``),
#: ``auto`` (compiled when numba imports and the network has at least
#: :data:`COMPILED_MIN_PEERS` peers: below that, importing numba costs more than it saves).
SOLVERS = ("auto", "general", "compiled")
COMPILED_MIN_PEERS = 256


class FlowNetwork(Streams):
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
    completion order, whether or not anyone waits for it yet. A flow whose end is
    watched with :meth:`notify` and whose ``done`` nobody made is told at that same
    point without an event where nothing else happens at its instant.

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
        if solver == "auto":
            big = self.n >= COMPILED_MIN_PEERS
            solver = "compiled" if big and compiled.available() else "general"
        elif solver == "compiled" and not compiled.available():
            why = "numba is not installed, or NUMBA_DISABLE_JIT is set"
            raise NetworkError("solver", solver, f"'general' or 'auto' ({why})")
        #: ``"general"`` or ``"compiled"``: the core this network runs on.
        self.solver = solver
        core = compiled.CompiledCore if solver == "compiled" else GeneralCore
        self._core: GeneralCore | compiled.CompiledCore = core(self._capacity)
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
        #: Flows timed outside this network, on links none of its flows use (a group run
        #: alone, :mod:`sim.engine.netclock.alone_groups`): each source, asked with an
        #: instant, gives what its flows not yet counted (:meth:`count_elsewhere`) have
        #: moved by then, as (src, dst, bytes) arrays, for :attr:`bytes_out` and
        #: :attr:`bytes_in`.
        self.elsewhere: list[Callable[[float], tuple[np.ndarray, np.ndarray, np.ndarray]]] = []

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

    def fail_peer(self, peer: int) -> list[Flow]:
        """Fail every in-flight flow from or to ``peer`` now; return them (by id)."""
        return self.fail_peers([peer])

    def fail_peers(self, peers: Iterable[int]) -> list[Flow]:
        """:meth:`fail_peer` of each of ``peers`` in turn (a flow between two of them
        fails with the first); the failed flows, peer by peer, each peer's by id.

        The flows in flight are found when a peer fails, not kept up to date per peer:
        a completion, in the random order that unequal rates give, then costs no
        per-peer bookkeeping (two dict deletions, each a likely cache miss), and one
        pass over the flows in flight serves a whole preemption wave."""
        peers = [self.routes.check_peer("fail_peer(peer)", peer) for peer in peers]
        if not peers:
            return []
        hit = [False] * self.n
        for peer in peers:
            hit[peer] = True
        of: dict[int, list[Flow]] = {peer: [] for peer in peers}
        latent = (f for batch in self._latency_batches.values() for f in batch)
        for flow in (*latent, *self._core.flows()):
            if flow.phase is LATENCY or flow.phase is BANDWIDTH:  # a parked stream is done
                if hit[flow.src]:
                    of[flow.src].append(flow)
                if hit[flow.dst] and flow.dst != flow.src:
                    of[flow.dst].append(flow)
        failed: list[Flow] = []
        for peer in peers:
            # each peer's in id order, the order they were sent or resumed in
            flows = sorted((f for f in of[peer] if f.phase is not FAILED), key=attrgetter("id"))
            self._fail(peer, flows)
            failed += flows
        return failed

    def _fail(self, peer: int, flows: list[Flow]) -> None:
        """``flows``, in flight from or to ``peer``, fail now."""
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
        return self.flows_started == ended and len(self._core) == 0

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
        return {flow.id: rate(flow) for flow in self._core.flows() if not flow.parked}

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
        entering = [flow for flow in batch if flow.phase is LATENCY]
        if entering:
            self._enter(*entering)

    def _enter(self, *flows: Flow) -> None:
        now = self.env.now
        moving = []
        for flow in flows:
            if flow.nbytes == 0.0 or not flow.res:
                self._complete(flow, now)
                flow.settled().succeed(now)  # maybe inside send(): callers attach callbacks later
                continue
            flow.phase = BANDWIDTH
            moving.append(flow)
        if moving:
            self._core.enter(moving, now)
        self._schedule_wake(now)

    def _on_wake(self, event: simpy.Event) -> None:
        """The flows due now complete; on the compiled core, so do those of the next
        instants whose completions are all quiet (:meth:`join_latch`) while nothing
        else happens before them (their instants are before the simulation's next
        event): one wake-up instead of one per instant, with the same results. With
        nothing else at this instant, the loud ends (:meth:`notify`) are told directly
        once all have completed, until one needs its ``done`` event: SimPy would have
        processed their events next, in this order."""
        if event.value != self._wake_version:
            return  # superseded by an earlier wake-up
        self._wake_at = math.inf
        now = self.env.now
        horizon = self.env.peek()
        inline = horizon > now  # nothing else happens at this instant
        latches = self._latch_left
        due, when, quiet, last = self._core.pop_chain(now, horizon if inline else now, latches)
        out, into = self._out, self._in
        for flow, end_s in zip(due, when, strict=True):  # _complete, inlined
            flow.phase, flow.end_s, flow.parked = DONE, end_s, flow.keep
            flow.latch = -1  # counted off by the kernel
            flow.bytes_sent = nbytes = flow.nbytes
            out[flow.src] += nbytes
            into[flow.dst] += nbytes
        self.flows_completed += len(due)
        self._schedule_wake(last)  # as the last instant's own wake-up would have
        told: list[tuple[Flow, Any]] = []  # loud ends told directly (notify), in order
        tell = inline
        for flow, q in zip(due, quiet, strict=True):
            if q and inline:
                quiet_end = flow.quiet
                flow.quiet = flow.loud = None  # they hold the caller's round (see settled)
                quiet_end(flow)  # type: ignore[misc]
            elif tell and flow._done is None and flow.loud is not None:
                told.append((flow, flow.loud))  # as settled() would attach it
                flow.quiet = flow.loud = None
            else:  # an event: the loud ends after it go through SimPy too, in order
                tell = False
                flow.settled().succeed(now)
        for flow, loud in told:  # where SimPy would process their events: after this one
            loud(flow, True)

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

    def _account(self, flow: Flow, nbytes: float) -> None:
        flow.bytes_sent = nbytes
        self._out[flow.src] += nbytes
        self._in[flow.dst] += nbytes

    def _progress(self, settled: list[float], src: bool) -> np.ndarray:
        total = np.array(settled)
        now, moved = self.env.now, self._core.moved
        for flow in self._core.flows():
            if not flow.parked:  # a parked stream's piece is counted already
                total[flow.src if src else flow.dst] += min(moved(flow, now), flow.nbytes)
        for source in self.elsewhere:
            senders, receivers, nbytes = source(float(now))
            np.add.at(total, senders if src else receivers, nbytes)
        return total

    # -- flows timed elsewhere (a group alone: sim.engine.netclock.alone_groups) -----------
    def count_elsewhere(
        self,
        started: int,
        members: np.ndarray,
        src: np.ndarray,
        dst: np.ndarray,
        moved: np.ndarray,
        completed: int,
        failed: int,
    ) -> None:
        """Count flows timed outside this network, on links none of its flows use:
        ``started`` more flows sent (they take ids, as :meth:`send` would), and flows that
        ended, each having moved ``moved[k]`` bytes ``members[src[k]] → members[dst[k]]``
        (``members``: distinct peers; added in this order), ``completed`` of them
        delivered and ``failed`` failed."""
        self.flows_started += started
        moved = np.asarray(moved, dtype=np.float64)
        peers = members.tolist()
        for totals, local in ((self._out, src), (self._in, dst)):
            # each peer's additions in order (ufunc.at is unbuffered and goes in index
            # order): the floats of a loop over the flows, at a Python step per member
            acc = np.array([totals[p] for p in peers], dtype=np.float64)
            np.add.at(acc, local, moved)
            for p, total in zip(peers, acc.tolist(), strict=True):
                totals[p] = total
        self.flows_completed += completed
        self.flows_failed += failed

    # -- flows timed by their sender (protocols._solo_exchanges) -------------------------
    def count_solo(self, src: Any, dst: Any, nbytes: float) -> None:
        """Count flows of ``nbytes`` each, ``src[k] → dst[k]`` (integer sequences or
        arrays), that their sender timed in closed form instead of sending them: each
        was alone on its resources from its start to its completion, and completed
        before anything else could look at the network. They take the next ids and count
        as started and completed, their bytes as sent and received, as if sent with
        :meth:`send` in this order (see :func:`add_repeated`)."""
        src = np.asarray(src, dtype=np.intp)
        dst = np.asarray(dst, dtype=np.intp)
        if src.shape != dst.shape or src.ndim != 1:
            raise ValueError(f"count_solo: {src.size} sources, {dst.size} destinations")
        add_repeated(self._out, src, nbytes)
        add_repeated(self._in, dst, nbytes)
        self.flows_started += src.size
        self.flows_completed += src.size


#: Integers up to this bound are exact float64s, and so is every sum of them below it.
EXACT_INTEGERS = float(2**53)


def add_repeated(totals: list[float], peers: np.ndarray, amount: float) -> None:
    """``totals[p] += amount`` for each ``p`` in ``peers``, in order: the same floats.

    Only each peer's own additions meet, so a peer added ``c`` times gets ``c``
    additions of ``amount`` in a row. Where ``amount`` and the peer's total are whole
    numbers and the total stays within :data:`EXACT_INTEGERS`, every partial sum is
    exact, so that equals ``total + c·amount`` (one multiplication, also exact), which
    is computed for all such peers at once; other peers add one by one. A gossip swarm
    of 10^5 peers counts ~10^5 flows per window here (the loop over them was ~35 % of
    its wall time, stop 36).
    """
    if peers.size == 0:
        return
    dense = peers.size * 16 >= len(totals)  # most peers: one pass over all the totals
    if dense:
        values = np.array(totals)
        counts = np.bincount(peers, minlength=len(totals))
        touched = np.flatnonzero(counts)
        counts, before = counts[touched], values[touched]
    else:
        touched, counts = np.unique(peers, return_counts=True)
        before = np.fromiter(map(totals.__getitem__, touched.tolist()), np.float64, touched.size)
    after = before + counts * amount
    if float(amount).is_integer() and amount >= 0:
        exact = _exact(before, after)
    else:
        exact = np.zeros(touched.size, dtype=bool)
    if dense:
        values[touched[exact]] = after[exact]
        totals[:] = values.tolist()
    else:
        for peer, total in zip(touched[exact].tolist(), after[exact].tolist(), strict=True):
            totals[peer] = total
    for peer, count in zip(touched[~exact].tolist(), counts[~exact].tolist(), strict=True):
        total = totals[peer]
        for _ in range(count):
            total += amount
        totals[peer] = total


def _exact(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Where every partial sum from ``before`` to ``after`` (whole, non-negative
    additions) is a whole number within :data:`EXACT_INTEGERS`: exact float64s."""
    return (before >= 0) & (before == np.floor(before)) & (after <= EXACT_INTEGERS)


def timeout_at(env: simpy.Environment, instant: float) -> simpy.Timeout:
    """A SimPy timeout that fires at exactly ``instant`` (not before now), which no
    float delay may give (:class:`_Instant`)."""
    now = env.now
    if instant < now:
        raise ValueError(f"timeout_at: {instant} is before now ({now})")
    delay = instant - now
    return simpy.Timeout(env, delay if now + delay == instant else _Instant(instant))


class _Instant(float):
    """The delay of a SimPy timeout that must fire at an exact instant, its value.

    SimPy schedules a timeout at ``now + delay``, and no float ``delay`` may give ``at``
    exactly (``now`` = 3.0380555555555557 never reaches 7.054722222222222: every sum
    rounds to an even last bit). A subclass of float is asked first for the reflected
    ``now + self``, which here is the instant itself."""

    def __radd__(self, now: float) -> float:
        return float(self)
