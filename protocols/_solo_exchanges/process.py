"""The edge-clock exchange process with the closed-form fast path
(:mod:`protocols._solo_exchanges`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from protocols._solo_exchanges import settings
from protocols._solo_exchanges.exchange import Batch, Exchange, Segment, segment_waves
from protocols._solo_exchanges.timing import EdgeTimes, RingStream, hops
from protocols._solo_exchanges.watched import WatchedSegments
from sim.kernels import solo_plan
from sim.network.flows import FlowNetwork


class SoloExchanges(WatchedSegments):
    """The edge-clock exchange process with the closed-form fast path (module docstring).

    Built by :meth:`build` from what :func:`protocols._async_net.exchange_process`
    prepared; :meth:`process` is the SimPy process body.
    """

    @classmethod
    def build(
        cls, protocol: Any, run: Any, rules: Any, batch: Batch | None, nbytes: float,
        window: float, one: Callable[..., None] | None = None,
    ) -> SoloExchanges | None:  # fmt: skip
        """The process, or None when the run needs the general path for every ring.

        ``rules`` is the (snapshot, apply) pair (``apply(i, j, sent, now)`` with an
        explicit time for adopted exchanges), ``batch`` the protocol's :data:`Batch`,
        ``nbytes`` the bytes of each flow, ``window`` the clocks' draw
        (:data:`~protocols._async_net.WINDOW`), ``one`` the ``apply`` of exchanges sent
        as flows (default ``apply``; with a watcher, one that shows it each change)."""
        if not settings.ENABLED or batch is None:
            return None
        watcher = protocol.watcher
        if watcher is not None and not (
            getattr(watcher, "batches", False) and type(run.state.x) is np.ndarray
        ):
            return None
        if int(protocol.params.max_concurrent) != 1:
            return None
        if type(run.net) is not FlowNetwork or run.net.sends_watched:
            return None  # someone watches every flow sent (a trace, a wrapped send)
        times = EdgeTimes.of(run.net, protocol.edges, nbytes)
        if times is None:
            return None
        return cls(protocol, run, rules, batch, nbytes, times, window, one)

    def __init__(
        self, protocol: Any, run: Any, rules: Any, batch: Batch, nbytes: float, times: EdgeTimes,
        window: float, one: Callable[..., None] | None = None,
    ) -> None:  # fmt: skip
        self.env, self.net, self.present = run.env, run.net, run.present
        self.state, self.protocol = run.state, protocol
        #: The watcher's rows decay between events: it is shown their trajectories
        #: (``estimate_rows``) after each exchange.
        self.decays = bool(getattr(protocol.watcher, "decay", False))
        self.estimate_rows = protocol.estimate_rows
        self.estimate_pairs_into = protocol.estimate_pairs_into
        self._restore: Callable[[], None] = lambda: None
        self._last_taken_s = -math.inf
        self._taken = 0
        self.counters = protocol.counters
        self.snapshot, self.apply = rules
        self.apply_one = self.apply if one is None else one
        #: The exact-target tracker shown every exchange (:meth:`settle`), or None.
        self.watcher = protocol.watcher
        #: Most rings of a segment with a watcher (:data:`settings.WATCHED_ELEMENTS`).
        self.watched_rings = max(64, settings.WATCHED_ELEMENTS // max(1, int(protocol.ctx.dim)))
        self.batch, self.nbytes, self.times = batch, nbytes, times
        self.ends_i_array = np.ascontiguousarray(protocol.edges[:, 0], dtype=np.intp)
        self.ends_j_array = np.ascontiguousarray(protocol.edges[:, 1], dtype=np.intp)
        self.ends_i, self.ends_j = self.ends_i_array.tolist(), self.ends_j_array.tolist()
        n_peers = self.n_peers = protocol.ctx.n_peers
        # compiled from COMPILED_PEERS peers on, or wherever the flow network runs
        # compiled (numba is loaded then, and the kernel loads from its cache in ~10 ms)
        kernel = solo_plan.compiled() if settings.runs_compiled(n_peers, self.net) else None
        self.compiled = kernel is not None
        self.kernel = solo_plan.plan_rings if kernel is None else kernel
        self.busy = [0] * n_peers  # general exchanges in flight, not adopted
        # end of the last exchange applied ahead; a plan's wave per peer (see :meth:`plan`)
        if self.compiled:
            self.free_at = np.full(n_peers, -math.inf)
            self.level = np.zeros(n_peers, dtype=np.int64)
        else:
            self.free_at, self.level = [-math.inf] * n_peers, [0] * n_peers
        self._room, self._buffers = 0, ([], [], [], [])
        self.live: dict[Exchange, None] = {}  # general exchanges in flight, in send order
        self.stream = RingStream(
            protocol.clocks, protocol.ctx.rng, float(self.env.now), window, arrays=self.compiled
        )
        self.expected_started = self.net.flows_started
        #: Flows of someone else may be in flight (see :meth:`notice`).
        self.foreign = False
        self.resume_at: float | None = None
        self.retry = 0
        #: Segments committed so far.
        self.segments = 0
        #: Rings to plan before the next look at the run's interrupt (:data:`settings.POLL_RINGS`).
        self.unpolled = settings.POLL_RINGS
        #: The last plan was refused because the watcher could take no exchange.
        self.starved = False

    # -- the process ---------------------------------------------------------------------
    def process(self) -> Generator[simpy.Event, Any, None]:
        """SimPy process body: ring forever, in segments where possible."""
        env, stream = self.env, self.stream
        while True:
            if self.resume_at is not None:
                at, self.resume_at = self.resume_at, None
                for delay in hops(float(env.now), at):
                    yield env.timeout(delay)
            else:
                yield env.timeout(max(stream.at() - env.now, 0.0))
            edge = stream.step()
            if edge is None:
                continue
            self.notice()
            if self.retry:
                self.retry -= 1
            elif self.ready():
                plan = self.plan(edge)
                if plan is not None and self.watcher is not None:
                    plan = self.settle(plan, edge)
                if plan is not None:
                    yield from self.commit(plan)
                    continue
                self.retry = 0 if self.starved else settings.RETRY_RINGS
                self.starved = False
            self.ring(edge, float(env.now))

    def ring(self, edge: int, now: float) -> None:
        """One ring handled as :func:`~protocols._async_net.exchange_process` does."""
        i, j = self.ends_i[edge], self.ends_j[edge]
        counters = self.counters
        counters["rings"] += 1
        if not (self.present[i] and self.present[j]):
            counters["skipped_absent"] += 1
            return
        busy, free_at = self.busy, self.free_at
        if busy[i] or busy[j] or free_at[i] >= now or free_at[j] >= now:
            counters["skipped_busy"] += 1
            return
        counters["exchanges"] += 1
        self.send(i, j, now, edge)

    def send(self, i: int, j: int, now: float, edge: int) -> None:
        """Start the exchange of ``edge`` (i, j) as two real flows now."""
        self.busy[i] += 1
        self.busy[j] += 1
        exchange = Exchange(i, j, self.snapshot(i, j), self.apply_one, self.busy, self.counters)
        exchange.start_s, exchange.edge, exchange.live = now, edge, self.live
        exchange.shared = self.foreign
        send, nbytes = self.net.send, self.nbytes
        first, second = send(i, j, nbytes), send(j, i, nbytes)
        first.done.callbacks.append(exchange.on_end)
        second.done.callbacks.append(exchange.on_end)
        exchange.flows = (first, second)
        self.live[exchange] = None
        self.expected_started += 2

    def commit(self, segment: Segment) -> Generator[simpy.Event, Any, None]:
        """Apply a planned segment: the adopted exchanges' and the fast exchanges'
        arithmetic and counts now, the straddlers' flows at their rings (real time)."""
        env, counters, free_at = self.env, self.counters, self.free_at
        self.segments += 1
        ends = np.array(segment.ends)
        fast = ends < segment.end
        n_planned = fast.size
        counters["rings"] += segment.rings
        counters["skipped_absent"] += segment.absent
        counters["skipped_busy"] += segment.skipped
        counters["exchanges"] += n_planned
        counters["completed"] += int(np.count_nonzero(fast)) + len(segment.adopted)
        log = settings.EXCHANGES
        for exchange, end in segment.adopted:
            exchange.adopted = True
            if not segment.applied:
                self.apply(exchange.i, exchange.j, exchange.sent, end)
            if log is not None:
                log.append((exchange.i, exchange.j, exchange.start_s, end))
        edges = np.array(segment.edges, dtype=np.intp)
        first, second = self.ends_i_array[edges], self.ends_j_array[edges]
        if fast.any():
            starts = np.array(segment.starts)
            if not segment.applied:
                self.batch(first, second, starts, ends, segment_waves(segment, fast))
            if log is not None:
                log.extend(
                    zip(
                        first[fast].tolist(), second[fast].tolist(),
                        starts[fast].tolist(), ends[fast].tolist(), strict=True,
                    )
                )  # fmt: skip
        # the straddlers go out at their rings, the fast flows counted in send order
        counted = 0
        for k in np.flatnonzero(~fast).tolist():
            i, j, at = int(first[k]), int(second[k]), float(segment.starts[k])
            free_at[i] = free_at[j] = -math.inf
            self._count(first[counted:k], second[counted:k], fast[counted:k])
            counted = k
            if at > env.now:
                for delay in hops(float(env.now), at):
                    yield env.timeout(delay)
            self.send(i, j, at, int(segment.edges[k]))
        self._count(first[counted:], second[counted:], fast[counted:])
        self.stream.prune()
        self.resume_at = segment.resume_at

    def _count(self, first: np.ndarray, second: np.ndarray, fast: np.ndarray) -> None:
        """Count the fast exchanges (``fast``) among planned ones with the network: both
        flows of each, in send order (i → j, then j → i)."""
        i, j = first[fast], second[fast]
        if i.size:
            src = np.stack((i, j), axis=1).reshape(-1)
            dst = np.stack((j, i), axis=1).reshape(-1)
            self.net.count_solo(src, dst, self.nbytes)
            self.expected_started += len(src)
