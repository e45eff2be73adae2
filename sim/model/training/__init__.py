"""Training workloads (issue 14): data, splits, objectives, the local optimizer.

- :mod:`~sim.model.training.data`: the ``logistic`` data sets (no download);
- :mod:`~sim.model.training.splits`: the test hold-out and each peer's share;
- :mod:`~sim.model.training.problems`: the objectives (gradients, losses, metrics);
- :mod:`~sim.model.training.optimizer`: SGD with momentum, weight decay, schedules;
- :mod:`~sim.model.training.trainer`: :class:`Trainer`, "peers ``rows`` take k steps";
- :mod:`~sim.model.training.build`: a run's trainer from its ``workload``, seeded.
"""

from sim.model.training.build import build_trainer
from sim.model.training.trainer import Deltas, Trainer, metric_columns, start_vectors

__all__ = ["Deltas", "Trainer", "build_trainer", "metric_columns", "start_vectors"]
