"""The recorder: samples convergence metrics into a tidy table.

``var`` is the population variance over all peers averaged over coordinates,
``mean_i ||x_i − x̄||² / dim``; ``err_init`` the same around the initial mean x̄₀;
``var_alive`` over the present peers only; ``mean_drift`` is ``||m − x̄₀|| / sqrt(dim)``
with m the average the protocol conserves (:meth:`protocols.base.Protocol.conserved_mean`;
by default the mean x̄ of the estimates). Statistics are computed in float64 whatever the
state's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable
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
    """The statistics of one state (float64 scalars), and the sums behind them.

    ``mean``, ``squares`` (Σ‖x − mean‖² over the existing peers, ``n`` of them) and
    ``mean_alive``, ``alive_squares``, ``n_alive`` (the present ones) let the exact-target
    tracker resynchronise from a sample without another pass (:mod:`sim.engine.observe.tracker`).
    """

    var: float
    err_init: float
    var_alive: float
    mean_drift: float
    n: int = 0
    mean: Any = None
    squares: float = math.nan
    n_alive: int = 0
    mean_alive: Any = None
    alive_squares: float = math.nan


#: Elements of the state converted to float64 at a time: statistics walk the columns in
#: blocks so that a sample never holds a float64 copy of a large state.
BLOCK_ELEMENTS = 4 * 1024 * 1024


def statistics(
    estimate: Any,
    present: np.ndarray,
    mean0: Any,
    exists: np.ndarray | None = None,
    conserved: Any = None,
) -> Sample:
    """Variance, error to the initial mean, variance over present peers, mean drift.

    ``exists`` (with ``churn.joins``/``leaves``) restricts every statistic to the peers
    that exist now; ``present`` must then be a subset of it. ``conserved`` ((dim,)
    float64, or None: the mean of ``estimate``) is the average whose distance to
    ``mean0`` is the drift. Computed in float64, over blocks of columns (at most
    :data:`BLOCK_ELEMENTS` elements converted at a time).
    """
    xp = array_namespace(estimate)
    rows = None
    if exists is not None and not exists.all():
        rows = xp.asarray(np.flatnonzero(exists))
        present = present[exists]
    n, dim = int(present.size), int(estimate.shape[1])
    if n == 0:
        return Sample(math.nan, math.nan, math.nan, math.nan)
    n_alive = int(present.sum())
    alive = None if n_alive in (0, n) else xp.asarray(np.flatnonzero(present))
    width = max(1, BLOCK_ELEMENTS // n)
    squares, alive_squares, means, alive_means = 0.0, 0.0, [], []
    # numpy: one float64 scratch for every block, so that a sample faults in one block's
    # pages, not a fresh allocation's per block (the same values as ``astype``)
    scratch = np.empty(n * min(width, dim)) if type(estimate) is np.ndarray else None
    for start in range(0, dim, width):
        columns = estimate[:, start : start + width]
        if rows is not None:  # the existing rows first: a block is n rows, not every peer's
            columns = xp.take(columns, rows, axis=0)
        if scratch is None:
            block = xp.astype(columns, xp.float64)
        else:
            block = scratch[: columns.size].reshape(columns.shape)
            np.copyto(block, columns)
        mean = xp.mean(block, axis=0)
        means.append(mean)
        if alive is not None:
            alive_block = xp.take(block, alive, axis=0)
            alive_means.append(xp.mean(alive_block, axis=0))
            alive_squares += _squares(xp, alive_block, alive_means[-1])
        squares += _squares(xp, block, mean)
    var = squares / (n * dim)
    mean = _joined(xp, means)
    drift = float(xp.sqrt(xp.mean((mean - mean0) ** 2)))
    err_init = var + drift**2  # E||x - m0||^2 = var + ||m - m0||^2, per coordinate
    if conserved is not None:
        drift = float(xp.sqrt(xp.mean((xp.asarray(conserved) - mean0) ** 2)))
    if n_alive == n:
        var_alive, alive_squares, mean_alive = var, squares, mean
    elif n_alive == 0:
        var_alive, mean_alive = math.nan, None
    else:
        var_alive, mean_alive = alive_squares / (n_alive * dim), _joined(xp, alive_means)
    return Sample(
        var, err_init, var_alive, drift, n, mean, squares, n_alive, mean_alive, alive_squares
    )


def _joined(xp: Any, parts: list[Any]) -> Any:
    """The column blocks' vectors as one (dim,) vector."""
    return xp.concat(parts) if len(parts) > 1 else parts[0]


#: Bytes of a page, for :func:`apart`.
PAGE = 4096


def apart(vector: np.ndarray, block: np.ndarray) -> np.ndarray:
    """A copy of ``vector`` whose address is half a page from ``block``'s, modulo a page.

    ``block -= vector`` stores into each row of ``block`` while it loads ``vector``. When
    the rows are a whole number of pages long (2^k columns of float64) and ``vector``
    lies at nearly the same offset in its page as the rows do, each load waits on the
    stores in flight to the same page offset (4K aliasing): 15–23 ms instead of 3.4–4.2
    for a block of 2^22 elements of 4096 columns or fewer (AMD EPYC, stop 37). Half a page
    apart, no load aliases a recent store. The values, and so the result, are the same.
    """
    buf = np.empty(vector.size + PAGE // vector.itemsize, vector.dtype)
    shift = ((block.ctypes.data + PAGE // 2 - buf.ctypes.data) % PAGE) // vector.itemsize
    out = buf[shift : shift + vector.size]
    out[...] = vector
    return out


def _squares(xp: Any, block: Any, mean: Any = None) -> float:
    """Σ (block − column mean)²; numpy: in place on ``block`` (a float64 copy of the state's
    columns: the sample's scratch, or a row selection of it)."""
    if mean is None:
        mean = xp.mean(block, axis=0)
    if type(block) is np.ndarray:
        block -= apart(mean, block)
        flat = block.reshape(-1)
        # einsum, not np.dot: BLAS would start threads, and sweep workers oversubscribe
        return float(np.einsum("i,i->", flat, flat))
    return float(xp.sum((block - mean) ** 2))


@dataclass
class Recorder:
    """Accumulates rows; ``every`` is in rounds (rounds clock) or seconds (network clock).

    A training run adds its columns after :data:`COLUMNS` (``workload_columns``, values
    given to :meth:`record`: :mod:`sim.engine.observe.training`). A schedule may add
    columns after those: ``extra_columns`` names them and ``extra()`` gives their values
    at each row (``schedule: async``: steps and phases).
    """

    seed: int
    every: float
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    _next_due: float = 0.0
    workload_columns: tuple[str, ...] = ()
    extra_columns: tuple[str, ...] = ()
    extra: Callable[[], tuple[Any, ...]] | None = None

    def due(self, at: float) -> bool:
        """True when a sample is due at round/time ``at``."""
        return at >= self._next_due - 1e-12

    def record(
        self, t: int, time_s: float, s: Sample, alive: float, traffic: tuple,
        workload: tuple[Any, ...] = (),
    ) -> None:  # fmt: skip
        """Add one row; ``traffic`` is (cumulative bytes_sent, cumulative messages),
        ``workload`` the values of ``workload_columns``."""
        row = (self.seed, t, time_s, s.var, s.err_init, alive, *traffic, s.var_alive, s.mean_drift,
               *workload)  # fmt: skip
        self.rows.append(row if self.extra is None else (*row, *self.extra()))
        self._next_due = (math.floor(time_s / self.every + 1e-9) + 1) * self.every

    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame with fixed column order and dtypes."""
        columns = [*COLUMNS, *self.workload_columns, *self.extra_columns]
        frame = pd.DataFrame(self.rows, columns=columns)
        types = {"seed": "int64", "round": "int64", "messages": "int64"}
        if "grad_steps" in self.workload_columns:
            types["grad_steps"] = "int64"
        return frame.astype(types)
