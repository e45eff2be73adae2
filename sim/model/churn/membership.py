"""Joins and permanent leaves on top of any churn schedule (``churn.joins``/``leaves``).

The run holds every peer that will ever exist: peers ``0 … n_initial−1`` exist from the
start, peers ``n_initial …`` join one by one at Poisson times of ``joins.rate``; at
Poisson times of ``leaves.rate`` a uniformly drawn existing peer leaves for good. A peer
is present when the underlying churn model says so **and** it exists. The metrics are
taken over the existing peers (``var``) and the present ones (``var_alive``).
"""

from __future__ import annotations

import math

import numpy as np

from sim.core.sets import unique_ints
from sim.model.churn.schedule import ChurnChange, ChurnSchedule
from sim.model.scenario.churn import PopulationChange

_NONE = np.zeros(0, dtype=np.intp)


class MembershipSchedule(ChurnSchedule):
    """``base`` (over all peers) masked by who exists; steps merge both in time order.

    Parameters
    ----------
    base
        The churn model's schedule over all ``n_peers`` peers.
    n_initial
        Peers that exist at time 0 (the first ones).
    joins, leaves
        The ``churn.joins`` / ``churn.leaves`` sections, or None.
    rng
        The run's ``membership`` generator (join and leave times, who leaves).
    """

    def __init__(
        self,
        base: ChurnSchedule,
        n_initial: int,
        joins: PopulationChange | None,
        leaves: PopulationChange | None,
        rng: np.random.Generator,
    ) -> None:
        super().__init__(base.n_peers)
        self.base, self.rng = base, rng
        self.exists = np.zeros(base.n_peers, dtype=bool)
        self.exists[:n_initial] = True
        self._up[n_initial:] = False
        self._next_joiner = n_initial
        self._joined = self._left = _NONE
        self._joins = _arrival_times(joins, rng)
        self._leaves = _arrival_times(leaves, rng)

    def _peek_s(self) -> float:
        return min(self.base._peek_s(), self._joins[0], self._leaves[0])

    def _advance(self) -> ChurnChange:
        self._joined = self._left = _NONE
        change = super()._advance()
        return change._replace(joined=self._joined, left=self._left)

    def _pop(self) -> tuple[float, np.ndarray, np.ndarray]:
        time_s = self._peek_s()
        touched = []
        if self.base._peek_s() == time_s:
            change = self.base._advance()
            touched += [change.down, change.up]
        if self._joins[0] == time_s:
            self._joins.pop(0)
            self._joined = np.array([self._next_joiner], dtype=np.intp)
            self.exists[self._joined] = True
            touched.append(self._joined)
            self._next_joiner += 1
        if self._leaves[0] == time_s:
            self._leaves.pop(0)
            self._left = self._leave()
            touched.append(self._left)
        peers = unique_ints(np.concatenate(touched)).astype(np.intp)
        return time_s, peers, self.base._up[peers] & self.exists[peers]

    def _leave(self) -> np.ndarray:
        candidates = np.flatnonzero(self.exists)
        if candidates.size == 0:
            return _NONE
        peer = int(candidates[self.rng.integers(candidates.size)])
        self.exists[peer] = False
        return np.array([peer], dtype=np.intp)


def _arrival_times(change: PopulationChange | None, rng: np.random.Generator) -> list[float]:
    """``count`` Poisson arrival times of ``rate`` (then ``inf``), drawn up front."""
    if change is None or change.count == 0:
        return [math.inf]
    gaps = rng.exponential(1.0 / change.rate, change.count)
    return [*np.cumsum(gaps).tolist(), math.inf]
