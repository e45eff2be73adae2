"""Churn as a deterministic, seeded schedule of state changes, shared by both clocks.

A :class:`ChurnSchedule` is a single-pass cursor over **steps** ``(time_s, down, up)``:
the peers that go down and come up at ``time_s``. Steps are generated lazily (a
schedule may be infinite; N may be 10⁵) and come in strictly increasing time, one per
distinct change time. Conventions:

- Every peer is up before the first step; a step at time 0 sets the initial state.
- ``down`` and ``up`` are sorted (intp) and disjoint: a step is the **net** change at
  its instant, so a peer never goes down twice without coming up in between.
- :meth:`ChurnSchedule.present_at` is right-continuous: the state at ``t`` includes the
  steps at ``t`` (on the rounds clock, presence in round t is the state at time t).
- A step may be empty (a ``bernoulli`` redraw that changes nobody, a wave that hits only
  peers already down): it is still yielded, so that finding the next step never needs
  unbounded look-ahead (waves that keep everyone down would otherwise never yield).

One class per model; :func:`build_schedule` picks it from the ``churn`` section.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from sim.core.errors import ScenarioError
from sim.core.sets import unique_ints
from sim.model.churn.trace import Trace, load_trace
from sim.model.scenario import churn as sections

_NONE = np.zeros(0, dtype=np.intp)


class ChurnChange(NamedTuple):
    """One step of a schedule: at ``time_s`` peers ``down`` leave and peers ``up`` return.

    With ``churn.joins``/``leaves``, ``joined`` and ``left`` list the peers that start or
    stop existing at that instant (whether or not their presence changes).
    """

    time_s: float
    down: np.ndarray
    up: np.ndarray
    joined: np.ndarray = _NONE
    left: np.ndarray = _NONE


class ChurnSchedule:
    """A schedule with no changes (``model: none``); the base of every churn schedule.

    Subclasses generate steps through :meth:`_peek_s` (time of the next step, ``inf``
    when there is none) and :meth:`_pop` (that step: its time, a sorted array of unique
    peers and their state after it); this class turns them into net changes.

    Parameters
    ----------
    n_peers
        Number of peers N.
    """

    def __init__(self, n_peers: int) -> None:
        self.n_peers = n_peers
        self._up = np.ones(n_peers, dtype=bool)
        self._now_s = -math.inf

    def __iter__(self) -> ChurnSchedule:
        return self

    def __next__(self) -> ChurnChange:
        if self._peek_s() == math.inf:
            raise StopIteration
        return self._advance()

    @property
    def present(self) -> np.ndarray:
        """(N,) bool copy of the state after the last step consumed."""
        return self._up.copy()

    def present_at(self, t_s: float) -> np.ndarray:
        """(N,) bool: who is present at time ``t_s`` (seconds, or rounds), steps at t included.

        Advances the schedule: ``t_s`` may not go back before a time already reached.
        """
        if t_s < self._now_s:
            raise ValueError(f"churn schedules only move forward: asked t={t_s} < {self._now_s}")
        while self._peek_s() <= t_s:
            self._apply()
        self._now_s = t_s
        return self._up.copy()

    def steps_due(self, t_s: float) -> bool:
        """True when a step not yet consumed falls at or before ``t_s`` (an empty one
        included): False means the state at ``t_s`` is the current one."""
        return self._peek_s() <= t_s

    def _advance(self) -> ChurnChange:
        time_s, peers, up_after = self._pop()
        was_up = self._up[peers]
        change = ChurnChange(time_s, peers[was_up & ~up_after], peers[~was_up & up_after])
        self._up[peers] = up_after
        self._now_s = time_s
        return change

    def _apply(self) -> None:
        """Apply the next step when nobody needs its change (as :meth:`present_at`)."""
        self._advance()

    def _peek_s(self) -> float:
        return math.inf

    def _pop(self) -> tuple[float, np.ndarray, np.ndarray]:
        raise StopIteration  # pragma: no cover - _peek_s says there is nothing to pop


class BernoulliSchedule(ChurnSchedule):
    """Each ``period_s`` every peer is redrawn: absent with probability ``p``.

    The draw at time k·period is ``rng.random(N) >= p`` (present), the rounds clock's
    historical per-round draw; ``p = 0`` draws nothing and ``p = 1`` draws once.
    """

    def __init__(self, n_peers: int, rng: np.random.Generator, p: float, period_s: float) -> None:
        super().__init__(n_peers)
        self._rng, self._p, self._period_s = rng, p, period_s
        self._all = np.arange(n_peers, dtype=np.intp)
        self._tick = 0

    def _peek_s(self) -> float:
        if self._p == 0.0 or (self._p == 1.0 and self._tick > 0):
            return math.inf
        return self._tick * self._period_s

    def _pop(self) -> tuple[float, np.ndarray, np.ndarray]:
        time_s = self._tick * self._period_s
        self._tick += 1
        return time_s, self._all, self._rng.random(self.n_peers) >= self._p

    def _advance(self) -> ChurnChange:  # every peer at once: whole-array masks, no gathers
        time_s, _, up_after = self._pop()
        down, up = np.flatnonzero(self._up & ~up_after), np.flatnonzero(up_after & ~self._up)
        self._up, self._now_s = up_after, time_s
        return ChurnChange(time_s, down, up)

    def _apply(self) -> None:
        self._now_s, _, self._up = self._pop()


class _Buffered(ChurnSchedule):
    """Steps read from batches of events ``(time_s, peer, up_after)``; see :meth:`_load`."""

    def __init__(self, n_peers: int) -> None:
        super().__init__(n_peers)
        self._load(np.empty(0), np.empty(0, dtype=np.intp), np.empty(0, dtype=bool))

    def _load(self, times_s: np.ndarray, peers: np.ndarray, ups: np.ndarray) -> None:
        """Sort a batch by (time, peer); of one peer's events at one instant keep the last."""
        order = np.lexsort((peers, times_s))  # stable: ties keep their generation order
        times_s, peers, ups = times_s[order], peers[order], ups[order]
        same = (times_s[1:] == times_s[:-1]) & (peers[1:] == peers[:-1])
        keep = np.concatenate((~same, [True]))[: times_s.size]
        self._times_s, self._peers, self._ups = times_s[keep], peers[keep], ups[keep]
        new_time = np.concatenate(([True], self._times_s[1:] != self._times_s[:-1]))
        starts = np.flatnonzero(new_time[: self._times_s.size])
        self._starts = np.concatenate((starts, [self._times_s.size]))
        self._group = 0

    def _refill(self) -> bool:
        """Load the next batch; False when the schedule is exhausted."""
        return False

    def _peek_s(self) -> float:
        while self._group >= self._starts.size - 1:
            if not self._refill():
                return math.inf
        return float(self._times_s[self._starts[self._group]])

    def _pop(self) -> tuple[float, np.ndarray, np.ndarray]:
        begin, end = self._starts[self._group], self._starts[self._group + 1]
        self._group += 1
        return float(self._times_s[begin]), self._peers[begin:end], self._ups[begin:end]


class ExponentialSchedule(_Buffered):
    """Alternating exponential up-times (mean ``mtbf_s``) and down-times (``mttr_s``).

    Stationary start: each peer is up at 0 with probability mtbf / (mtbf + mttr) and its
    first change comes after an exponential residual time (memoryless). Changes are
    generated window by window ((mtbf + mttr) / 2 long: about one per peer each).
    """

    def __init__(
        self, n_peers: int, rng: np.random.Generator, mtbf_s: float, mttr_s: float
    ) -> None:
        super().__init__(n_peers)
        self._rng, self._mtbf_s, self._mttr_s = rng, mtbf_s, mttr_s
        self._window_s, self._until_s = (mtbf_s + mttr_s) / 2, 0.0
        self._gen_up = rng.random(n_peers) < mtbf_s / (mtbf_s + mttr_s)
        self._next_s = np.maximum(self._durations(self._gen_up), np.finfo(np.float64).tiny)
        down = np.flatnonzero(~self._gen_up)
        self._load(np.zeros(down.size), down, np.zeros(down.size, dtype=bool))

    def _durations(self, up: np.ndarray) -> np.ndarray:
        return self._rng.exponential(np.where(up, self._mtbf_s, self._mttr_s))

    def _refill(self) -> bool:
        if self.n_peers == 0:
            return False
        self._until_s += self._window_s
        times, peers, ups = [], [], []
        due = np.flatnonzero(self._next_s < self._until_s)
        while due.size:
            up = ~self._gen_up[due]
            times.append(self._next_s[due])
            peers.append(due)
            ups.append(up)
            self._gen_up[due] = up
            self._next_s[due] = self._next_s[due] + self._durations(up)
            due = due[self._next_s[due] < self._until_s]  # only the rescheduled can be due
        if times:
            self._load(np.concatenate(times), np.concatenate(peers), np.concatenate(ups))
        return True


class WavesSchedule(ChurnSchedule):
    """Poisson waves: each takes ``count`` random eligible peers down for ``duration_s``.

    ``count`` is ``fraction · len(eligible)`` rounded half up, at least 1 (no waves when
    nobody is eligible). A peer hit while down stays down until the later return time;
    when a wave ends at the instant another starts, the peers of both are down after it.
    """

    def __init__(
        self,
        n_peers: int,
        rng: np.random.Generator,
        rate_per_s: float,
        fraction: float,
        duration_s: float,
        eligible: np.ndarray,
    ) -> None:
        super().__init__(n_peers)
        self._rng, self._duration_s, self._gap_s = rng, duration_s, 1.0 / rate_per_s
        self._eligible = np.asarray(eligible, dtype=np.intp)
        size = self._eligible.size
        self._count = max(1, math.floor(fraction * size + 0.5)) if size else 0
        self._next_wave_s = rng.exponential(self._gap_s) if size else math.inf
        self._ends: deque[tuple[float, np.ndarray]] = deque()
        self._until_s = np.full(n_peers, -math.inf)

    def _peek_s(self) -> float:
        return min(self._next_wave_s, self._ends[0][0] if self._ends else math.inf)

    def _pop(self) -> tuple[float, np.ndarray, np.ndarray]:
        time_s = self._peek_s()
        touched = []
        while self._ends and self._ends[0][0] == time_s:
            touched.append(self._ends.popleft()[1])
        if self._next_wave_s == time_s:
            hit = np.sort(self._rng.choice(self._eligible, self._count, replace=False))
            end_s = time_s + self._duration_s
            self._until_s[hit] = np.maximum(self._until_s[hit], end_s)
            self._ends.append((end_s, hit))
            self._next_wave_s = time_s + self._rng.exponential(self._gap_s)
            touched.append(hit)
        peers = unique_ints(np.concatenate(touched))
        return time_s, peers, self._until_s[peers] <= time_s


class TraceSchedule(_Buffered):
    """A trace replayed exactly: down at each ``down_s``, up at each finite ``up_s``."""

    def __init__(self, n_peers: int, trace: Trace) -> None:
        super().__init__(n_peers)
        back = np.isfinite(trace.up_s)
        self._load(
            np.concatenate((trace.down_s, trace.up_s[back])),
            np.concatenate((trace.peer, trace.peer[back])).astype(np.intp),
            np.concatenate((np.zeros(trace.peer.size, bool), np.ones(int(back.sum()), bool))),
        )


def build_schedule(
    churn: sections.ChurnBase,
    n_peers: int,
    rng: np.random.Generator,
    *,
    peer_classes: np.ndarray | None = None,
    class_names: Sequence[str | None] | None = None,
) -> ChurnSchedule:
    """The schedule of a scenario's ``churn`` section.

    Parameters
    ----------
    churn
        The ``churn`` section.
    n_peers
        Number of peers N.
    rng
        The run's ``churn`` generator: the only source of randomness.
    peer_classes
        (N,) int, each peer's index into ``peers.classes`` (the ``class`` column of the
        peers table); needed by ``waves`` with a ``class``.
    class_names
        The ``name`` of each class of ``peers.classes``; needed when ``class`` is a name.
    """
    if isinstance(churn, sections.NoChurn):
        return ChurnSchedule(n_peers)
    if isinstance(churn, sections.BernoulliChurn):
        return BernoulliSchedule(n_peers, rng, churn.p, churn.period_s)
    if isinstance(churn, sections.ExponentialChurn):
        return ExponentialSchedule(n_peers, rng, churn.mtbf, churn.mttr)
    if isinstance(churn, sections.WavesChurn):
        eligible = churn.targets(n_peers, peer_classes, class_names)
        return WavesSchedule(n_peers, rng, churn.rate, churn.fraction, churn.duration, eligible)
    if isinstance(churn, sections.TraceChurn):
        return TraceSchedule(n_peers, load_trace(churn.file, n_peers))
    expected = "none, bernoulli, exponential, waves or trace"
    raise ScenarioError("churn.model", getattr(churn, "model", None), expected)


__all__ = ["BernoulliSchedule", "ChurnChange", "ChurnSchedule", "ExponentialSchedule"]
__all__ += ["TraceSchedule", "WavesSchedule", "build_schedule"]
