"""Training on the rounds clock: local steps between averaging rounds (issue 14).

(The network clock's steps, which take ``compute`` seconds: :mod:`sim.engine.training_net`.)

With a ``workload``, each round of the rounds clock is (:class:`RoundTraining`):

1. churn and the rejoin rule, as without one; peers that came back also get the
   workload's rejoin rule (:meth:`~sim.model.training.Trainer.returned`);
2. every present peer takes ``local_steps`` H gradient steps
   (:meth:`~sim.model.training.Trainer.steps`, one batched gradient of all of them
   per step), at the round's start;
3. the protocol's round: the averaging step (local SGD; Moshpit SGD with ``moshpit``).

Preempted peers take no steps; their models and optimizer states wait. With
``overlap: true`` the H steps are computed from the models as the round starts, the
round averages those models, and the steps' changes are added after it: x ← W x + Δ(x),
D-PSGD's x ← W x − γ∇F(x) for H = 1 (communication in parallel with computation).
Without it, x ← W (x + Δ(x)): x ← W(x − γ∇F(x)) for H = 1 (adapt, then combine).

Every change goes through the exact-target tracker (:meth:`~sim.engine.observe.
tracker.Tracker.change`), so ``var`` thresholds are still timed exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from protocols.base import Protocol
from protocols.contract import State
from sim.engine.observe.tracker import Tracker
from sim.engine.training_net import training_table
from sim.model.scenario.models import Scenario
from sim.model.scenario.workload import is_training
from sim.model.training import Deltas, Trainer, build_trainer, start_vectors


def start_for(scenario: Scenario, x0: np.ndarray) -> np.ndarray:
    """The peers' starting vectors: ``x0`` (the ``vector.init`` draw) without a
    workload, else the workload's ``init`` (:func:`~sim.model.training.start_vectors`)."""
    workload = scenario.workload
    return start_vectors(workload.init, x0) if is_training(workload) else x0


def trainer_for(
    scenario: Scenario, seed: int, protocol: Protocol, state: State, start: np.ndarray
) -> Trainer | None:
    """The run's trainer (None without a workload), checked against the protocol's
    arrays (``state.extra``, after :meth:`~protocols.base.Protocol.init_state`)."""
    if not is_training(scenario.workload):
        return None
    trainer = build_trainer(scenario.workload, seed, protocol, state.x, start)
    trainer.check(state)
    return trainer


class RoundTraining:
    """The local steps of each round of the rounds clock (see the module doc).

    Parameters
    ----------
    scenario
        The run's scenario (``workload``, ``churn.rejoin``).
    trainer, state, tracker
        The run's trainer, state and exact-target tracker.
    """

    def __init__(self, scenario: Scenario, trainer: Trainer, state: State, tracker: Tracker):
        workload = scenario.workload
        assert is_training(workload)  # a trainer exists only with a training workload
        self.trainer, self.state, self.tracker = trainer, state, tracker
        self.local_steps, self.overlap = workload.local_steps, workload.overlap
        self.rejoin, self.init = scenario.churn.rejoin, workload.init
        self.pending: Deltas | None = None

    def returned(self, rows: np.ndarray) -> None:
        """Peers ``rows`` came back this round (called inside the churn's change)."""
        self.trainer.returned(self.state, rows, self.rejoin, self.init)

    def before_round(self, present: np.ndarray) -> None:
        """The present peers' H steps (``overlap``: their changes, kept for later)."""
        rows = np.flatnonzero(present)
        if self.overlap:
            self.pending = self.trainer.deltas(self.state, rows, self.local_steps)
            return
        self.tracker.change(rows, lambda: self.trainer.steps(self.state, rows, self.local_steps))

    def after_round(self) -> None:
        """``overlap``: add the steps' changes to the averaged rows."""
        pending, self.pending = self.pending, None
        if pending is not None:
            self.tracker.change(pending.rows, lambda: self.trainer.add(self.state, pending))

    def table(self) -> pd.DataFrame:
        """One row per peer: its gradient steps (the ``training`` table)."""
        return training_table(self.trainer)


def returning(previous: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Rows present now that were absent before (joiners count as returning)."""
    return np.flatnonzero(present & ~previous)


__all__: list[Any] = ["RoundTraining", "returning", "start_for", "trainer_for"]
