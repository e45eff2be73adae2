"""A churn schedule read ahead: which peers the churn process will take down or bring
back in a window of time, and at which instant, before it happens.

Churn is exogenous: its schedule is drawn from its own seeded stream and does not depend
on what the network does. :class:`ChurnLookahead` hands the steps to
:func:`~sim.model.churn.process.churn_process` as the schedule would, drawing them ahead
when asked about a window (:meth:`ChurnLookahead.ahead`), so that the groups run alone
(:mod:`sim.engine.netclock.alone_groups`) can time their flows once with every change of
their members' presence, instead of again at each change.

The instant a step applies is the process's: it waits ``time_s - now`` from the instant
it applied the step before, and SimPy's timeout fires at ``now + delay``; the same
arithmetic gives the same float.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

import numpy as np

from sim.model.churn.schedule import ChurnChange


class ChurnLookahead:
    """Iterates over ``steps`` (a :class:`~sim.model.churn.schedule.ChurnSchedule`) as the
    churn process consumes them, and reads them ahead on demand.

    Parameters
    ----------
    steps
        The schedule (consumed: a single-pass cursor).
    start_s
        The simulated instant the churn process starts at.
    """

    def __init__(self, steps: Iterable[ChurnChange], start_s: float) -> None:
        self._steps: Iterator[ChurnChange] = iter(steps)
        self._drawn: deque[ChurnChange] = deque()  # drawn ahead, not yet handed out
        self._clock = float(start_s)  # the process's now after the last step drawn
        self._done = False  # the schedule has no step left
        # every change drawn and not forgotten, in time order: instant, peer, up
        self._at = np.zeros(0)
        self._peer = np.zeros(0, dtype=np.intp)
        self._up = np.zeros(0, dtype=bool)
        self._pending: list[tuple[float, np.ndarray, np.ndarray]] = []

    def __iter__(self) -> ChurnLookahead:
        return self

    def __next__(self) -> ChurnChange:
        if self._drawn:
            return self._drawn.popleft()
        if not self._draw():
            raise StopIteration
        return self._drawn.popleft()

    def _draw(self) -> bool:
        """Draw the schedule's next step (False: there is none)."""
        if self._done:
            return False
        try:
            change = next(self._steps)
        except StopIteration:
            self._done = True
            return False
        delay_s = change.time_s - self._clock
        if delay_s > 0:
            self._clock = self._clock + delay_s
        self._drawn.append(change)
        peers = np.r_[change.down, change.up].astype(np.intp)
        if peers.size:
            ups = np.r_[np.zeros(change.down.size, bool), np.ones(change.up.size, bool)]
            self._pending.append((self._clock, peers, ups))
        return True

    def ahead(
        self, members: np.ndarray, after_s: float, until_s: float
    ) -> list[tuple[float, int, bool]]:
        """The changes of ``members`` (sorted peers) that apply after ``after_s`` and by
        ``until_s``, as (instant, peer, up) in the order the process applies them; each
        step's downs come before its ups. Draws the schedule that far."""
        while not self._done and self._clock <= until_s:
            self._draw()
        self._gather()
        lo = int(np.searchsorted(self._at, after_s, side="right"))
        hi = int(np.searchsorted(self._at, until_s, side="right"))
        peer = self._peer[lo:hi]
        slot = np.minimum(np.searchsorted(members, peer), max(members.size - 1, 0))
        where = np.flatnonzero(members[slot] == peer) if members.size else slot[:0]
        at, up = self._at[lo:hi], self._up[lo:hi]
        return [(float(at[k]), int(peer[k]), bool(up[k])) for k in where.tolist()]

    def forget_before(self, t_s: float) -> None:
        """Drop the changes before ``t_s``: no one will ask about them again."""
        self._gather()
        cut = int(np.searchsorted(self._at, t_s, side="left"))
        if cut > self._at.size // 2:  # amortised: copy only when half can go
            self._at, self._peer, self._up = self._at[cut:], self._peer[cut:], self._up[cut:]

    def _gather(self) -> None:
        """Append the steps drawn since the last look to the flat arrays."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        self._at = np.r_[self._at, np.concatenate([np.full(p.size, at) for at, p, _ in pending])]
        self._peer = np.r_[self._peer, np.concatenate([p for _, p, _ in pending])]
        self._up = np.r_[self._up, np.concatenate([u for _, _, u in pending])]


__all__ = ["ChurnLookahead"]
