"""The recorder: samples convergence metrics into a tidy table.

``var`` is the population variance over all peers averaged over coordinates,
``mean_i ||x_i − x̄||² / dim``; ``err_init`` the same around the initial mean x̄₀;
``var_alive`` over the present peers only; ``mean_drift`` is ``||x̄ − x̄₀|| / sqrt(dim)``.
Statistics are computed in float64 whatever the state's dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from array_api_compat import array_namespace

COLUMNS = (
    "seed", "round", "time_s", "var", "err_init", "alive_fraction", "bytes_sent",
    "messages", "var_alive", "mean_drift",
)  # fmt: skip


@dataclass
class Sample:
    """The statistics of one state (float64 scalars)."""

    var: float
    err_init: float
    var_alive: float
    mean_drift: float


def statistics(
    estimate: Any, present: np.ndarray, mean0: Any, exists: np.ndarray | None = None
) -> Sample:
    """Variance, error to the initial mean, variance over present peers, mean drift.

    ``exists`` (with ``churn.joins``/``leaves``) restricts every statistic to the peers
    that exist now; ``present`` must then be a subset of it.
    """
    xp = array_namespace(estimate)
    x = xp.astype(estimate, xp.float64)
    if exists is not None and not exists.all():
        x = xp.take(x, xp.asarray(np.flatnonzero(exists)), axis=0)
        present = present[exists]
    mean = xp.mean(x, axis=0)
    var = float(xp.mean((x - mean) ** 2))
    drift = float(xp.sqrt(xp.mean((mean - mean0) ** 2)))
    err_init = var + drift**2  # E||x - m0||^2 = var + ||m - m0||^2, per coordinate
    return Sample(var, err_init, _var_alive(x, present, xp, var), drift)


def _var_alive(x: Any, present: np.ndarray, xp: Any, var_all: float) -> float:
    n_present = int(present.sum())
    if n_present == present.size:
        return var_all
    if n_present == 0:
        return math.nan
    alive = xp.take(x, xp.asarray(np.flatnonzero(present)), axis=0)
    return float(xp.mean((alive - xp.mean(alive, axis=0)) ** 2))


@dataclass
class Recorder:
    """Accumulates rows; ``every`` is in rounds (rounds clock) or seconds (network clock)."""

    seed: int
    every: float
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    _next_due: float = 0.0

    def due(self, at: float) -> bool:
        """True when a sample is due at round/time ``at``."""
        return at >= self._next_due - 1e-12

    def record(self, t: int, time_s: float, s: Sample, alive: float, traffic: tuple) -> None:
        """Add one row; ``traffic`` is (cumulative bytes_sent, cumulative messages)."""
        self.rows.append(
            (self.seed, t, time_s, s.var, s.err_init, alive, *traffic, s.var_alive, s.mean_drift)
        )
        self._next_due = (math.floor(time_s / self.every + 1e-9) + 1) * self.every

    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame with fixed column order and dtypes."""
        frame = pd.DataFrame(self.rows, columns=list(COLUMNS))
        return frame.astype({"seed": "int64", "round": "int64", "messages": "int64"})
