"""Planning a segment: every ring up to the next interfering event, timed in closed
form, and the checks that the network would time its flows the same.

The rings themselves are walked by :func:`sim.kernels.solo_plan.plan_rings`, compiled by
numba on arrays from :data:`settings.COMPILED_PEERS` peers on or where the flow network
runs compiled (when numba imports), else as Python on lists; both plan the same bits.
What stays here, between its calls: the look at the run's interrupt every
:data:`settings.POLL_RINGS` rings, and each window's end (the stream draws the next
window)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from protocols._solo_exchanges import settings
from protocols._solo_exchanges.exchange import Exchange, Segment
from protocols._solo_exchanges.timing import MOVING, EdgeTimes, RingStream, next_interfering
from sim.kernels import solo_plan
from sim.network.flows import DONE, REL_EPS


class SegmentPlanner:
    """What the exchange process does before a segment: notice other traffic, decide
    whether a segment may start, plan it (:meth:`plan`)."""

    # the state of the process (:class:`~protocols._solo_exchanges.process.SoloExchanges`
    # sets it in ``__init__``)
    env: Any
    net: Any
    present: Any
    state: Any
    protocol: Any
    watcher: Any
    stream: RingStream
    times: EdgeTimes
    n_peers: int
    watched_rings: int
    live: dict[Exchange, None]
    busy: list[int]
    #: The ring loop (:func:`sim.kernels.solo_plan.plan_rings`), compiled or not; the
    #: compiled one reads arrays (``free_at``, ``level``, the stream's windows), the
    #: Python one lists.
    kernel: Callable[..., solo_plan.Planned]
    compiled: bool
    free_at: Any  # (n_peers,) float64 array or list
    level: Any  # (n_peers,) int64 array or list
    _room: int
    _buffers: tuple[Any, Any, Any, Any]
    ends_i: list[int]
    ends_j: list[int]
    ends_i_array: np.ndarray
    ends_j_array: np.ndarray
    expected_started: int
    foreign: bool
    unpolled: int
    starved: bool

    def notice(self) -> None:
        """Notice flows sent by someone else since the last look: every general exchange
        in flight may share a resource with one of them (``shared``), and so may every
        exchange started while :attr:`foreign` says some may still be in flight."""
        net = self.net
        if net.flows_started != self.expected_started:
            self.expected_started = net.flows_started
            self.foreign = True
            for exchange in self.live:
                exchange.shared = True
        if self.foreign and net.flows_started - net.flows_completed - net.flows_failed == sum(
            flow.phase in MOVING for exchange in self.live for flow in exchange.flows
        ):
            self.foreign = False

    def ready(self) -> bool:
        """Whether a segment may start now: no other kind of flow in flight, every
        general exchange alone since it started and settled up to now."""
        if self.foreign:
            return False
        for exchange in self.live:
            if exchange.shared:
                return False
            ended = sum(flow.phase not in MOVING for flow in exchange.flows)
            if ended != 2 - exchange.left:  # a done callback is pending at this instant
                return False
        return True

    def _harmless(self, callback: Any) -> bool:
        owner = getattr(callback, "__self__", None)
        return owner is self.net or (isinstance(owner, Exchange) and owner.live is self.live)

    def _finishes(self, exchange: Any) -> list[float] | None:
        """Closed-form finish of each flow of a general exchange (its end time once
        ended), or None when one of them is not safe (module docstring)."""
        edge, times = exchange.edge, self.times
        out = []
        for flow, lat, d in (
            (exchange.flows[0], times.lat_ij[edge], times.d_ij[edge]),
            (exchange.flows[1], times.lat_ji[edge], times.d_ji[edge]),
        ):
            if flow.phase is DONE:
                out.append(float(flow.end_s))
                continue
            t1 = exchange.start_s + lat
            finish = t1 + d
            if finish > t1 + t1:
                return None
            out.append(finish)
        return out

    def plan(
        self, edge: int, until: float = math.inf, again: Segment | None = None
    ) -> Segment | None:
        """Plan the segment that starts with the ring of ``edge`` now and ends at the next
        interfering event or ``until``, whichever comes first; None when it cannot be
        planned (nothing changed; the ring is then handled one at a time). ``again``: a
        segment planned from here before and undone; this one is its part before
        ``until`` (same bounds, the interrupt not looked at)."""
        env, stream, times = self.env, self.stream, self.times
        most = cap = settings.segment_rings(self.n_peers)  # rings, exchanges
        if again is not None:
            cap = again.cap
        elif self.watcher is not None:  # exchanges it can take before one must come alone
            cap = self.watcher.room() - len(self.live)
            if cap <= 0:  # that one is the next exchange: try again at the next ring
                self.starved = True
                return None
        if self.watcher is not None:
            most = min(most, self.watched_rings)
        start = float(env.now)
        horizon = min(next_interfering(env, self._harmless), until)
        if not horizon > start:
            return None
        segment = Segment()
        segment.unpolled, segment.cap = self.unpolled, cap
        moving: list[float] = []  # finishes of the general flows still moving
        candidates: list[tuple[Exchange, float]] = []  # general exchanges ending in it
        free_at, busy = self.free_at, self.busy
        for exchange in self.live:
            ends = self._finishes(exchange)
            if ends is None or exchange.adopted:
                return None
            moving.extend(
                e for e, f in zip(ends, exchange.flows, strict=True) if f.phase is not DONE
            )
            if max(ends) < horizon:
                candidates.append((exchange, max(ends)))
        for exchange in self.live:  # busy all segment long, or free at their end
            free_at[exchange.i] = free_at[exchange.j] = math.inf
        for exchange, end in candidates:
            free_at[exchange.i] = free_at[exchange.j] = end
        cursor = segment.cursor = stream.cursor()
        present = self.present
        ends_i: Any
        ends_j: Any
        lat_ij: Any
        d_ij: Any
        lat_ji: Any
        d_ji: Any
        if self.compiled:  # the kernel reads arrays
            if not (isinstance(present, np.ndarray) and present.dtype == np.bool_):
                present = np.asarray(present, dtype=np.bool_)
            ends_i, ends_j = self.ends_i_array, self.ends_j_array
            lat_ij, d_ij, lat_ji, d_ji = times.arrays
        else:  # the Python loop reads lists faster
            if present.size <= settings.LIST_PEERS:
                present = present.tolist()
            ends_i, ends_j = self.ends_i, self.ends_j
            lat_ij, d_ij, lat_ji, d_ji = times.lat_ij, times.d_ij, times.lat_ji, times.d_ji
        # level: 1 + the wave of each peer's last exchange planned (0 outside plans)
        free_at, level = self.free_at, self.level
        starts, ends, edges, waves = self._outputs(max(1, min(most, cap)))
        kernel = self.kernel
        windows, window, first = stream.windows, stream.window, stream.first
        w, k = stream.w, stream.k
        ring_times, picked, base = windows[w - first]
        rings = absent = skipped = n = 0
        now = later = start
        poll, interrupted = getattr(env, "_poll", None) if again is None else None, False
        unpolled = self.unpolled  # rings left before the next look at the interrupt
        while True:  # the ring of ``edge`` at ``now``
            rings += 1
            if poll is not None and rings >= unpolled:
                unpolled = rings + settings.POLL_RINGS
                # an interrupt ends the run now (an event it schedules): nothing may be
                # applied ahead. Its queue's length tells, without a scan of the queue
                # (which holds every flow in flight: O(N) per look on large swarms)
                queue = getattr(env, "_queue", None)
                if isinstance(queue, list):
                    size = len(queue)
                    poll()
                    interrupted = len(queue) != size
                else:
                    poll()
                    interrupted = next_interfering(env, self._harmless) <= start
                if interrupted:
                    break
            # this ring and the window's next ones, up to the next look at the interrupt
            status, edge, now, later, k, rings, n, absent, skipped = kernel(
                edge, now, later, k, rings, unpolled - 1 if poll is not None else most,
                n, absent, skipped, ring_times, picked, horizon, most, cap, present, free_at,
                level, ends_i, ends_j, lat_ij, d_ij, lat_ji, d_ji, starts, ends, edges, waves,
            )  # fmt: skip
            if status == solo_plan.NEXT:
                continue
            if status == solo_plan.STOP:
                break
            edge = -1
            while edge < 0:  # window ends until a window with rings
                step = base + window - now
                later = now + step if step > 0.0 else now
                if later >= horizon or rings >= most or n >= cap:
                    break
                now, w, k = later, w + 1, 0
                if w - first == len(windows):
                    stream.w = w  # ring_loop draws the next window at its start
                    stream.extend()
                ring_times, picked, base = windows[w - first]
                if len(ring_times):
                    step = float(ring_times[0]) - now
                    later = now + step if step > 0.0 else now
                    if later >= horizon or rings >= most or n >= cap:
                        break
                    edge, k, now = int(picked[0]), 1, later
            if edge < 0:
                break
        stream.w, stream.k = w, k
        planned = self._planned(starts, ends, edges, waves, n)
        segment.starts, segment.ends, segment.edges, segment.waves = planned
        self._fill(level, self._peers(segment.edges), 0)
        segment.end = min(horizon, later)
        self.unpolled = unpolled - rings
        safe = not interrupted and self._safe(segment, moving)
        adopted = {id(exchange): end for exchange, end in candidates if safe and end < segment.end}
        for exchange in self.live:
            if id(exchange) in adopted:
                segment.adopted.append((exchange, adopted[id(exchange)]))
                busy[exchange.i] -= 1
                busy[exchange.j] -= 1
            else:  # still a general exchange, busy
                free_at[exchange.i] = free_at[exchange.j] = -math.inf
        if not safe:
            # every value before the plan lies before its start
            self._fill(free_at, self._peers(segment.edges), -math.inf)
            stream.restore(cursor)
            return None
        segment.rings, segment.absent, segment.skipped = rings, absent, skipped
        segment.resume_at = later
        return segment

    def _outputs(self, size: int) -> tuple[Any, Any, Any, Any]:
        """Room for ``size`` planned exchanges: (starts, ends, edges, waves), kept from
        one plan to the next (arrays for the compiled loop, lists for the Python one)."""
        if self._room < size:
            self._room = max(size, 2 * self._room)
            if self.compiled:
                self._buffers = (
                    np.empty(self._room), np.empty(self._room),
                    np.empty(self._room, dtype=np.intp), np.empty(self._room, dtype=np.int64),
                )  # fmt: skip
            else:
                self._buffers = ([0.0] * self._room, [0.0] * self._room, [0] * self._room,
                                 [0] * self._room)  # fmt: skip
        return self._buffers

    def _planned(
        self, starts: Any, ends: Any, edges: Any, waves: Any, n: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The first ``n`` planned exchanges as arrays of their own."""
        if self.compiled:
            return starts[:n].copy(), ends[:n].copy(), edges[:n].copy(), waves[:n].copy()
        return (
            np.array(starts[:n], dtype=np.float64), np.array(ends[:n], dtype=np.float64),
            np.array(edges[:n], dtype=np.intp), np.array(waves[:n], dtype=np.int64),
        )  # fmt: skip

    def _peers(self, edges: Any) -> np.ndarray:
        """Both ends of every edge of ``edges``."""
        edges = np.asarray(edges, dtype=np.intp)
        return np.concatenate((self.ends_i_array[edges], self.ends_j_array[edges]))

    @staticmethod
    def _fill(values: Any, peers: np.ndarray, value: float) -> None:
        """``values[p] = value`` for every peer p of ``peers`` (an array or a list)."""
        if isinstance(values, np.ndarray):
            values[peers] = value
        else:
            for p in peers.tolist():
                values[p] = value

    def _safe(self, segment: Segment, moving: list[float]) -> bool:
        """Whether the planned flows all finish where the network would finish them: each
        finish F ≤ 2·t1 (t1: its rate was set), and no two finishes (other than equal)
        within :data:`settings.NEAR_FACTOR` × ``REL_EPS`` × the longest transfer (module
        docstring)."""
        times = self.times
        if not len(segment.starts):
            finishes = np.array(moving)
        else:
            starts = np.asarray(segment.starts, dtype=np.float64)
            edges = np.asarray(segment.edges, dtype=np.intp)
            lat_ij, d_ij, lat_ji, d_ji = times.arrays
            t1 = starts + lat_ij[edges]
            u1 = starts + lat_ji[edges]
            f1 = t1 + d_ij[edges]
            f2 = u1 + d_ji[edges]
            if np.any(f1 > t1 + t1) or np.any(f2 > u1 + u1):
                return False
            finishes = np.concatenate((f1, f2, moving))
        if finishes.size < 2:
            return True
        gaps = np.diff(np.sort(finishes))
        window = settings.NEAR_FACTOR * REL_EPS * times.longest
        return not bool(np.any((gaps > 0.0) & (gaps <= window)))
