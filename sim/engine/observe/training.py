"""What a training run measures besides ``var``: losses, accuracy, steps (issue 14).

At every sample the observer hands the sample's statistics to a :class:`TrainingProbe`:

- while a loss target (``metrics.targets`` entry ``{loss: v}``) is pending, the loss
  of the averaged model F(x̄) is evaluated and the targets below it are crossed
  (:meth:`~sim.engine.observe.targets.Targets.below` on metric ``loss``): at sample
  resolution (every round on the rounds clock);
- on a recorded row, the :attr:`~sim.model.training.Trainer.columns` values:
  ``loss`` F(x̄) (x̄ the mean of the existing peers' estimates, F = (1/n)Σ_i f_i, no
  weight decay term), ``accuracy`` of x̄ on the test split (``logistic``) or
  ``excess_loss`` F(x̄) − F* (``quadratic``), ``local_loss`` the mean over existing
  peers of f_i(x_i), ``consensus`` (1/n)Σ‖x_i − x̄‖² (= var·dim) and ``grad_steps``
  (all peers' steps so far).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.engine.observe.targets import Targets
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

    def check(self, stats: Sample, rounds: int, time_s: float) -> None:
        """Cross the loss targets F(x̄) is below (evaluated only while one is pending)."""
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
