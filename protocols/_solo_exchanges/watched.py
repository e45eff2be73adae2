"""A segment shown to a watcher (exact targets): its exchanges in time order, undone and
planned again up to the first one the watcher does not take."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from protocols._solo_exchanges.exchange import Batch, Segment, segment_waves
from protocols._solo_exchanges.planner import SegmentPlanner
from protocols._solo_exchanges.timing import next_interfering
from sim.core.sets import unique_ints


class WatchedSegments(SegmentPlanner):
    """Segments under a watcher: :meth:`settle`."""

    # set by the process's ``__init__`` (see :class:`SegmentPlanner`)
    decays: bool
    estimate_rows: Callable[..., Any]
    estimate_pairs_into: Callable[..., bool]
    apply: Callable[..., None]
    batch: Batch
    _restore: Callable[[], None]
    _last_taken_s: float
    _taken: int

    def settle(self, segment: Segment, edge: int) -> Segment | None:
        """Apply a planned segment's arithmetic and show its exchanges to the watcher, in
        time order. When the watcher stops taking them at an exchange (a crossing, a
        NaN: :meth:`~protocols.contract.RowWatcher.take`), the segment is undone and
        planned again up to that exchange's time T: the exchanges from T on cross its end
        and go out as flows, and the watcher is shown them one at a time, as without
        segments. Returns the segment to commit (arithmetic applied unless it was planned
        again), or None when none is left (T is now: the ring is handled one at a
        time)."""
        cut = self._apply_watched(segment)
        if cut is None:
            # the watcher may have set a timer inside the segment (decaying rows: the
            # predicted crossing of the stop target): nothing may be planned past it
            armed = next_interfering(self.env, self._harmless) if self.decays else math.inf
            if not armed < segment.end:
                segment.applied = True
                return segment
            cut = max(armed, math.nextafter(self._last_taken_s, math.inf))
            self._restore()
        self._unplan(segment)
        shorter = self.plan(edge, until=cut, again=segment)
        if shorter is None and cut > float(self.env.now):  # the watcher took a part
            raise AssertionError(f"segment at {self.env.now} could not be planned to {cut}")
        if shorter is not None:  # it must hold exactly the exchanges the watcher took
            kept = len(shorter.adopted) + int(
                np.count_nonzero(np.array(shorter.ends) < shorter.end)
            )
            if kept != self._taken:
                raise AssertionError(f"segment at {self.env.now}: {kept} kept, {self._taken} taken")
        return shorter

    def _apply_watched(self, segment: Segment) -> float | None:
        """Apply the adopted and fast exchanges, wave by wave, keeping each one's rows
        after (and before, when the watcher reads them) in time order; show them to the
        watcher. Returns None when it took them all, else the time T of the first it did
        not take, with every row the segment touched back as it was before it (the
        exchanges before T are applied again, by :meth:`commit`, with the same bits:
        each one's arithmetic depends on its own rows only)."""
        state, watcher = self.state, self.watcher
        assert watcher is not None
        ends = np.array(segment.ends)
        fast = ends < segment.end
        index = np.flatnonzero(fast)
        edges = np.array(segment.edges, dtype=np.intp)
        first, second = self.ends_i_array[edges], self.ends_j_array[edges]
        n_adopted = len(segment.adopted)
        pairs = np.empty((n_adopted + index.size, 2), dtype=np.intp)
        for k, (exchange, _) in enumerate(segment.adopted):
            pairs[k] = exchange.i, exchange.j
        pairs[n_adopted:, 0], pairs[n_adopted:, 1] = first[index], second[index]
        if not pairs.size:
            return None
        at = np.concatenate(([end for _, end in segment.adopted], ends[index]))
        order = np.argsort(at, kind="stable")
        position = np.empty(order.size, dtype=np.intp)
        position[order] = np.arange(order.size)
        self._restore = self._save_rows(unique_ints(pairs))
        shape = (order.size, 2, state.x.shape[1])
        before = np.empty(shape, dtype=state.x.dtype) if watcher.needs_before else None
        # decaying rows (A²CiD²): each row's trajectory a − e^(−ρ(t − end))·d after it,
        # as ``estimate_rows`` gives it (float64)
        decay = np.empty(shape) if self.decays else None
        after = np.empty(shape, dtype=state.x.dtype if decay is None else np.float64)

        def keep(rows: np.ndarray, slot: Any) -> None:
            if decay is None:
                after[slot] = state.x[rows]
                return
            pairs_in, at_slots = rows.reshape(-1, 2), np.atleast_1d(slot)
            if self.estimate_pairs_into(state, pairs_in, at_slots, after, decay):
                return
            values = self.estimate_rows(state, rows.reshape(-1))
            after[slot] = values.a.reshape(-1, 2, shape[2])
            decay[slot] = values.d.reshape(-1, 2, shape[2])

        for k, (exchange, end) in enumerate(segment.adopted):
            rows, slot = pairs[k], position[k]
            if before is not None:
                before[slot] = state.x[rows]
            self.apply(exchange.i, exchange.j, exchange.sent, end)
            keep(rows, slot)
        if index.size:
            slots = np.empty(ends.size, dtype=np.intp)
            slots[index] = position[n_adopted:]
            starts = np.array(segment.starts)
            for wave in segment_waves(segment, fast):
                rows, slot = np.stack((first[wave], second[wave]), axis=1), slots[wave]
                if before is not None:
                    before[slot] = state.x[rows]
                self.batch(first, second, starts, ends, [wave])
                keep(rows, slot)
        times = at[order]
        if decay is None:
            taken = watcher.take(pairs[order], times, before, after)
        else:
            taken = watcher.take(pairs[order], times, before, after, decay)
        self._taken = taken
        self._last_taken_s = float(times[taken - 1]) if taken else -math.inf
        if taken == order.size:
            return None
        self._restore()
        return float(times[taken])

    def _save_rows(self, rows: np.ndarray) -> Callable[[], None]:
        """A function that puts peers ``rows`` back as they are now: their rows of the
        state (the protocol's ``save_rows`` when it keeps more, A²CiD²'s x̃ and times)."""
        save = getattr(self.protocol, "save_rows", None)
        if save is not None:
            return cast(Callable[[], None], save(self.state, rows))
        state, saved = self.state, self.state.x[rows]

        def restore() -> None:
            state.x[rows] = saved

        return restore

    def _unplan(self, segment: Segment) -> None:
        """Forget a planned segment (its arithmetic undone): the process as before
        :meth:`plan`, up to values of ``free_at`` that lie before now."""
        busy, free_at = self.busy, self.free_at
        for exchange, _ in segment.adopted:
            busy[exchange.i] += 1
            busy[exchange.j] += 1
        for exchange in self.live:
            free_at[exchange.i] = free_at[exchange.j] = -math.inf
        self._fill(free_at, self._peers(segment.edges), -math.inf)
        self.stream.restore(segment.cursor)
        self.unpolled = segment.unpolled
