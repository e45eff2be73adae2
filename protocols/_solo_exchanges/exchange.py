"""What the exchange path moves around: an exchange in flight as two flows, a planned
segment, its waves, and the protocol's batch rule."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import simpy

from protocols._solo_exchanges import settings

#: ``batch(a, b, start, end, waves)``: apply the exchanges k of each wave of ``waves``
#: (index arrays into the host arrays a, b, start, end), wave after wave: (a_k, b_k)
#: snapshot at ``start[k]``, update at ``end[k]``, each alone on its rows in between;
#: the exchanges of a wave touch disjoint peers, and each comes after every earlier
#: exchange of its peers.
Batch = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]], None]


class Exchange:
    """One exchange in flight as two real flows: its ends, its snapshot, how many flows
    are left; with the fast path also its ring time, edge, flows, and whether a segment
    adopted it (applied its update) or another kind of flow may have shared its links."""

    __slots__ = (
        "adopted", "apply", "busy", "counters", "edge", "flows", "i", "j", "left", "live",
        "sent", "shared", "start_s",
    )  # fmt: skip

    def __init__(
        self, i: int, j: int, sent: Any, apply: Callable[..., None], busy: list[int], counters: dict
    ) -> None:
        self.i, self.j, self.sent, self.apply = i, j, sent, apply
        self.busy, self.counters, self.left = busy, counters, 2
        self.adopted = self.shared = False
        self.start_s, self.edge = math.nan, -1
        self.flows: tuple[Any, ...] = ()
        self.live: dict[Exchange, None] | None = None

    def on_end(self, event: simpy.Event) -> None:
        """Callback of each flow's ``done``: apply after both, cancel on a failure (an
        adopted exchange was applied by its segment: it is only counted off)."""
        if self.left <= 0:  # already cancelled (the other flow failed first)
            return
        if event.ok:
            self.left -= 1
            if self.left:
                return
            if self.adopted:
                self._forget()
                return
            self.apply(self.i, self.j, self.sent)
            self.counters["completed"] += 1
            if settings.EXCHANGES is not None:
                settings.EXCHANGES.append((self.i, self.j, self.start_s, cast(float, event.value)))
        else:
            if self.adopted:  # a segment ends before anything can fail a flow
                raise AssertionError(f"adopted exchange {self.i}-{self.j} failed")
            self.left = 0
            self.counters["cancelled"] += 1
        self.busy[self.i] -= 1
        self.busy[self.j] -= 1
        self._forget()

    def _forget(self) -> None:
        if self.live is not None:
            self.live.pop(self, None)


class Segment:
    """A planned segment (see :meth:`SegmentPlanner.plan`): the exchanges it starts in
    ring order (arrays: start and end times, edges, waves), the general exchanges it
    adopts, its counts, its end and where the process resumes."""

    def __init__(self) -> None:
        self.starts: np.ndarray = np.zeros(0)
        self.ends: np.ndarray = np.zeros(0)
        self.edges: np.ndarray = np.zeros(0, dtype=np.intp)
        self.waves: np.ndarray = np.zeros(0, dtype=np.int64)
        self.adopted: list[tuple[Any, float]] = []
        self.rings = self.absent = self.skipped = 0
        self.end = self.resume_at = math.inf
        #: The ring stream's cursor and the rings left before a poll, before the plan.
        self.cursor: tuple[int, int] = (0, 0)
        self.unpolled = 0
        #: Most exchanges it could plan (what the watcher could take).
        self.cap = 0
        #: Its arithmetic is already applied (a watcher was shown it,
        #: :meth:`WatchedSegments.settle`).
        self.applied = False


def segment_waves(segment: Segment, fast: np.ndarray) -> list[np.ndarray]:
    """The fast exchanges of ``segment`` (indices where ``fast``), wave after wave."""
    index = np.flatnonzero(fast)
    waves = np.array(segment.waves, dtype=np.intp)[index]
    order = index[np.argsort(waves, kind="stable")]
    bounds = np.flatnonzero(np.diff(np.sort(waves))) + 1
    return np.split(order, bounds)
