"""What a training run measures besides ``var``: losses, accuracy, steps (issue 14).

At every sample the observer hands the sample's statistics to a :class:`TrainingProbe`:

- while a loss target (``metrics.targets`` entry ``{loss: v}``, or ``stop.target_loss``)
  is pending, the loss of the averaged model F(x̄) is evaluated and the targets below it
  are crossed (:meth:`~sim.engine.observe.targets.Targets.below` on metric ``loss``):
  every round on the rounds clock; on the network clock the snapshots of x̄ taken after
  every change since the last sample are evaluated first (:meth:`TrainingProbe.follow`,
  :mod:`sim.engine.observe.loss_trail`), so the times are those of the changes;
- on a recorded row, the :attr:`~sim.model.training.Trainer.columns` values:
  ``loss`` F(x̄) (x̄ the mean of the existing peers' estimates, F = (1/n)Σ_i f_i, no
  weight decay term), ``accuracy`` of x̄ on the test split (``logistic``) or
  ``excess_loss`` F(x̄) − F* (``quadratic``), ``local_loss`` the mean over existing
  peers of f_i(x_i), ``consensus`` (1/n)Σ‖x_i − x̄‖² (= var·dim) and ``grad_steps``
  (all peers' steps so far).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from protocols.base import ContinuousProtocol, Protocol
from protocols.contract import State
from sim.engine.observe.loss_trail import FollowingWatcher, LossTrail
from sim.engine.observe.targets import Targets
from sim.engine.observe.tracker import Tracker
from sim.engine.recorder import Sample
from sim.model.training import Trainer, metric_columns

#: Columns whose last value is not a summary field (``grad_steps`` has its own).
NOT_FINAL = ("consensus", "grad_steps")
#: The gradient-step fields of the summary.
STEP_FIELDS = ("grad_steps", "grad_steps_min", "grad_steps_median", "grad_steps_max")


def training_fields(name: str) -> tuple[str, ...]:
    """The summary fields of a run with workload ``name`` (none for ``none``):
    ``final_<column>`` of its metrics but :data:`NOT_FINAL`, then :data:`STEP_FIELDS`."""
    if name == "none":
        return ()
    finals = [f"final_{c}" for c in metric_columns(name) if c not in NOT_FINAL]
    return (*finals, *STEP_FIELDS)


class TrainingProbe:
    """The training metrics of one run (see the module doc)."""

    def __init__(self, trainer: Trainer, targets: Targets) -> None:
        self.trainer, self.targets = trainer, targets
        self.columns = trainer.columns
        self.last: dict[str, Any] = {}
        #: The snapshots of x̄ between samples (network clock, with a loss target).
        self.trail: LossTrail | None = None

    def follow(self, protocol: Protocol, state: State, tracker: Tracker,
               halt: Callable[[], None]) -> None:  # fmt: skip
        """Network clock: time the loss targets at the changes of x̄ between samples
        (a :class:`~sim.engine.observe.loss_trail.LossTrail` fed by every ``tracker``
        change; ``halt`` ends the run at ``stop.target_loss``). Nothing without a loss
        target."""
        if not self.targets.losses:
            return
        trail = LossTrail(self.trainer, self.targets, protocol, state, tracker.masks,
                          tracker.now, halt)  # fmt: skip
        self.trail, tracker.on_change = trail, trail.changed
        if isinstance(protocol, ContinuousProtocol) and not protocol.events_keep_sum:
            self._follow_exchanges(protocol, trail)

    def _follow_exchanges(self, protocol: Protocol, trail: LossTrail) -> None:
        """Show ``trail`` the exchanges of a continuous protocol that move x̄ (a
        :class:`~sim.engine.observe.loss_trail.FollowingWatcher` around the tracker,
        kept once the tracker retires)."""
        watcher = FollowingWatcher(protocol.watcher, trail.changed)
        protocol.watcher = watcher
        retire = self.targets.on_done

        def retired() -> None:
            if retire is not None:
                retire()
            watcher.retire()
            protocol.watcher = watcher

        self.targets.on_done = retired

    def check(self, stats: Sample, rounds: int, time_s: float) -> None:
        """Cross the loss targets F(x̄) is below (evaluated only while one is pending):
        the snapshots since the last sample first, then the sample."""
        if self.trail is not None:
            self.trail.flush()
        if self.targets.next_level("loss") is not None:
            self.targets.below("loss", self.trainer.loss(stats.mean), rounds, time_s)

    def row(self, estimate: Any, stats: Sample, exists: np.ndarray) -> tuple[Any, ...]:
        """The values of :attr:`columns` for a recorded row."""
        values = self.trainer.metrics(estimate, stats.mean, stats.var, np.flatnonzero(exists))
        self.last = dict(zip(self.columns, values, strict=True))
        return values

    def fields(self) -> dict[str, Any]:
        """Summary fields: the last row's loss (and accuracy or excess loss), and the
        gradient steps, all peers together and per peer (min, median, max)."""
        steps = self.trainer.sgd.steps
        finals = [name for name in self.columns if name not in NOT_FINAL]
        out = {f"final_{name}": _number(self.last.get(name)) for name in finals}
        out["grad_steps"] = int(steps.sum())
        out["grad_steps_min"] = int(steps.min())  # a run has at least one peer
        out["grad_steps_median"] = float(np.median(steps))
        out["grad_steps_max"] = int(steps.max())
        return out


def _number(value: Any) -> float | None:
    """A float for JSON: None for a missing or NaN value."""
    if value is None:
        return None
    value = float(value)
    return None if np.isnan(value) else value


__all__ = ["STEP_FIELDS", "TrainingProbe", "training_fields"]
