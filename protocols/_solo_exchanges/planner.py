"""Planning a segment: every ring up to the next interfering event, timed in closed
form, and the checks that the network would time its flows the same."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from protocols._solo_exchanges import settings
from protocols._solo_exchanges.exchange import Exchange, Segment
from protocols._solo_exchanges.timing import MOVING, EdgeTimes, RingStream, next_interfering
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
    free_at: list[float]
    level: list[int]
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
        scale = min(settings.SEGMENT_SCALE, max(1, self.n_peers // settings.SEGMENT_PEERS))
        most = cap = settings.SEGMENT_RINGS * scale  # rings, exchanges
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
        if present.size <= settings.LIST_PEERS:
            present = present.tolist()
        level = self.level  # 1 + the wave of each peer's last exchange (0 outside plans)
        ends_i, ends_j = self.ends_i, self.ends_j
        lat_ij, d_ij, lat_ji, d_ji = times.lat_ij, times.d_ij, times.lat_ji, times.d_ji
        starts, ends, edges, waves = segment.starts, segment.ends, segment.edges, segment.waves
        windows, window, first = stream.windows, stream.window, stream.first
        w, k = stream.w, stream.k
        ring_times, picked, base = windows[w - first]
        n_times = len(ring_times)
        rings = absent = skipped = 0
        now = later = start
        poll, interrupted = getattr(env, "_poll", None) if again is None else None, False
        unpolled = self.unpolled  # rings left before the next look at the interrupt
        while True:  # the ring of ``edge`` at ``now``
            i, j = ends_i[edge], ends_j[edge]
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
            if not (present[i] and present[j]):
                absent += 1
            elif free_at[i] >= now or free_at[j] >= now:
                skipped += 1
            else:
                f1 = now + lat_ij[edge] + d_ij[edge]
                f2 = now + lat_ji[edge] + d_ji[edge]
                end = f1 if f1 >= f2 else f2
                free_at[i] = free_at[j] = end
                wave = level[i] if level[i] > level[j] else level[j]
                level[i] = level[j] = wave + 1
                starts.append(now)
                ends.append(end)
                edges.append(edge)
                waves.append(wave)
            # on to ring_loop's next yield point (a ring, a window's end), at its time
            if k < n_times:
                step = ring_times[k] - now
                later = now + step if step > 0.0 else now
                if later >= horizon or rings >= most or len(starts) >= cap:
                    break
                edge = picked[k]
                k += 1
                now = later
                continue
            edge = -1
            while edge < 0:  # window ends until a window with rings
                step = base + window - now
                later = now + step if step > 0.0 else now
                if later >= horizon or rings >= most or len(starts) >= cap:
                    break
                now, w, k = later, w + 1, 0
                if w - first == len(windows):
                    stream.w = w  # ring_loop draws the next window at its start
                    stream.extend()
                ring_times, picked, base = windows[w - first]
                n_times = len(ring_times)
                if n_times:
                    step = ring_times[0] - now
                    later = now + step if step > 0.0 else now
                    if later >= horizon or rings >= most or len(starts) >= cap:
                        break
                    edge, k, now = picked[0], 1, later
            if edge < 0:
                break
        stream.w, stream.k = w, k
        for edge in edges:
            level[ends_i[edge]] = level[ends_j[edge]] = 0
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
            edges_array = np.array(edges, dtype=np.intp)
            for p in np.concatenate(
                (self.ends_i_array[edges_array], self.ends_j_array[edges_array])
            ).tolist():
                free_at[p] = -math.inf  # every value before the plan lies before its start
            stream.restore(cursor)
            return None
        segment.rings, segment.absent, segment.skipped = rings, absent, skipped
        segment.resume_at = later
        return segment

    def _safe(self, segment: Segment, moving: list[float]) -> bool:
        """Whether the planned flows all finish where the network would finish them: each
        finish F ≤ 2·t1 (t1: its rate was set), and no two finishes (other than equal)
        within :data:`settings.NEAR_FACTOR` × ``REL_EPS`` × the longest transfer (module
        docstring)."""
        times = self.times
        if not segment.starts:
            finishes = np.array(moving)
        else:
            starts = np.array(segment.starts)
            edges = np.array(segment.edges, dtype=np.intp)
            t1 = starts + np.array(times.lat_ij)[edges]
            u1 = starts + np.array(times.lat_ji)[edges]
            f1 = t1 + np.array(times.d_ij)[edges]
            f2 = u1 + np.array(times.d_ji)[edges]
            if np.any(f1 > t1 + t1) or np.any(f2 > u1 + u1):
                return False
            finishes = np.concatenate((f1, f2, moving))
        if finishes.size < 2:
            return True
        gaps = np.diff(np.sort(finishes))
        window = settings.NEAR_FACTOR * REL_EPS * times.longest
        return not bool(np.any((gaps > 0.0) & (gaps <= window)))
