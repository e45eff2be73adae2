"""Churn on the ``rounds`` clock: a presence mask per round, sampled from a schedule.

One round is one unit of simulated time, so presence in round ``t`` is the state of the
churn schedule at time ``t`` (:meth:`ChurnSchedule.present_at`): every model of
:mod:`sim.model.churn.schedule` runs on this clock, with durations and rates in rounds.
``bernoulli`` (period one round by default) draws each round ``rng.random(N) >= p``,
exactly as before schedules existed, so results under ``none`` and ``bernoulli`` are
unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.model.churn.schedule import ChurnSchedule, build_schedule
from sim.model.scenario.churn import ChurnBase


class RoundChurn:
    """Presence masks of consecutive rounds, read off a churn schedule.

    Parameters
    ----------
    schedule
        The run's churn schedule (consumed as rounds go by).
    """

    def __init__(self, schedule: ChurnSchedule) -> None:
        self.schedule = schedule
        self.n_peers = schedule.n_peers
        self._read = False

    @property
    def exists(self) -> np.ndarray | None:
        """(n_peers,) bool: who exists now (``churn.joins``/``leaves``), or None."""
        exists = getattr(self.schedule, "exists", None)
        return None if exists is None else exists.copy()

    def present(self, t: int) -> np.ndarray:
        """(n_peers,) bool mask of the peers present in round ``t`` (non-decreasing t)."""
        self._read = True
        return self.schedule.present_at(float(t))

    def steady(self, t: int) -> bool:
        """True when presence and membership in round ``t`` are those :meth:`present` and
        :attr:`exists` last gave: a round was read, and no step falls after it up to t."""
        return self._read and not self.schedule.steps_due(float(t))


def build_round_churn(
    churn: ChurnBase,
    n_peers: int,
    rng: np.random.Generator,
    peer_classes: np.ndarray | None = None,
    class_names: Sequence[str | None] | None = None,
) -> RoundChurn:
    """The churn process of a scenario's ``churn`` section on the rounds clock.

    ``peer_classes`` ((N,) int, the peers table's ``class`` column) and ``class_names``
    are needed only by ``waves`` restricted to one class (see :func:`build_schedule`).
    """
    schedule = build_schedule(
        churn, n_peers, rng, peer_classes=peer_classes, class_names=class_names
    )
    return RoundChurn(schedule)
