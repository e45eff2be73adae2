"""A²CiD² kernels: the closed-form continuous mixing and the momentum exchange.

Between events every peer runs the linear ODE d/dt (x, x̃) = η·(x̃ − x, x − x̃); over an
elapsed Δ its solution is x ← x + c·(x̃ − x), x̃ ← x̃ − c·(x̃ − x) with
c = (1 − e^(−2ηΔ))/2 (:func:`mix_coefficient`). An exchange on edge (i, j) with
m = x_i − x_j moves x by ∓m/2 and x̃ by ∓α̃·m. Row indices and coefficients are host
numpy arrays; the state arrays may live on any array-API backend (numpy in place).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.kernels._xp import column, is_numpy, namespace, take_rows, to_backend
from sim.kernels.compression import IDENTITY, WireLike, as_wire
from sim.kernels.pairwise import sent_differences


def mix_coefficient(elapsed: np.ndarray, eta: float) -> np.ndarray:
    """c = (1 − e^(−2ηΔ))/2 for elapsed times Δ ≥ 0 (host float64, computed with expm1)."""
    return -0.5 * np.expm1(-2.0 * eta * np.asarray(elapsed, dtype=float))


def put_rows(x: Any, rows: np.ndarray, values: Any) -> Any:
    """``x`` with ``x[rows] = values`` (distinct rows); numpy in place, else a new array."""
    if is_numpy(x):
        scatter_rows(x, rows, np.asarray(values))
        return x
    xp = namespace(x)
    source = np.arange(x.shape[0], dtype=np.intp)
    source[rows] = x.shape[0] + np.arange(rows.size)
    return take_rows(xp, xp.concat((x, values), axis=0), source)


def replace_rows(x: Any, rows: np.ndarray, old: Any, new: Any) -> tuple[Any, np.ndarray]:
    """``x[rows] = new`` (``old`` = the rows before) and Σ_rows (new − old) in float64,
    shape (dim,): how far the change moved the global sum."""
    xp = namespace(x)
    shift = np.asarray(xp.sum(xp.astype(new, xp.float64) - xp.astype(old, xp.float64), axis=0))
    return put_rows(x, rows, new), shift


def a2cid2_mix(x: Any, x_tilde: Any, c: np.ndarray) -> tuple[Any, Any]:
    """Bring every row forward by its own mixing coefficient.

    Parameters
    ----------
    x, x_tilde
        (n_peers, dim) floating arrays; numpy arrays are updated in place.
    c
        (n_peers,) host coefficients from :func:`mix_coefficient`.

    Returns
    -------
    (x, x_tilde) after mixing.

    Notes
    -----
    With d = x̃ − x: x ← x + c·d, x̃ ← x̃ − c·d. The sum x + x̃ of every row is kept, and
    d shrinks by 1 − 2c = e^(−2ηΔ). Rows with c = 0 are untouched bit for bit.

    References
    ----------
    Nabli, Belilovsky, Oyallon, "A²CiD²: Accelerating Asynchronous Communication in
    Decentralized Deep Learning", NeurIPS 2023.
    """
    xp = namespace(x)
    step = column(xp, x, c) * (x_tilde - x)
    if is_numpy(x):
        x += step
        x_tilde -= step
        return x, x_tilde
    return x + step, x_tilde - step


def a2cid2_exchange(
    x: Any,
    x_tilde: Any,
    i: np.ndarray,
    j: np.ndarray,
    c: np.ndarray,
    alpha_tilde: float,
    wire: WireLike = IDENTITY,
) -> tuple[Any, Any]:
    """Mix both ends of disjoint exchanges forward, then apply the momentum exchange.

    Parameters
    ----------
    x, x_tilde
        (n_peers, dim) floating arrays; numpy arrays are updated in place.
    i, j
        (P,) host rows of the pairs; all 2P rows distinct.
    c
        (2P,) host mixing coefficients of rows ``i`` then ``j``, each for the time since
        that row was last brought forward up to its exchange.
    alpha_tilde
        Weight α̃ of the exchange on x̃.
    wire
        How the x rows travel (a :class:`~sim.kernels.compression.Wire` or its name,
        each row one message; x̃ is not sent); default exact.

    Returns
    -------
    (x, x_tilde) after the exchanges.

    Notes
    -----
    Each end is mixed (:func:`a2cid2_mix`), then with m = x_i − x_j (mixed values):
    x_i −= m/2, x̃_i −= α̃·m, x_j += m/2, x̃_j += α̃·m. Σx and Σx̃ are kept by the
    exchange, Σ(x + x̃) by the mixing.

    Through a lossy wire each end uses its own exact value and the other's decoded one
    (:func:`~sim.kernels.pairwise.sent_differences`):
    m_i = x_i − Q(x_j), m_j = Q(x_i) − x_j; x_i −= m_i/2, x̃_i −= α̃·m_i, x_j += m_j/2,
    x̃_j += α̃·m_j. Σx and Σx̃ then move by the wire's error.

    References
    ----------
    Nabli, Belilovsky, Oyallon, NeurIPS 2023 (A²CiD², Algorithm 1).
    """
    wire = as_wire(wire)
    rows = np.concatenate((i, j))
    if is_numpy(x) and wire.exact:
        return _exchange_numpy(x, x_tilde, rows, c, alpha_tilde)
    xp = namespace(x)
    ends, ends_tilde = take_rows(xp, x, rows), take_rows(xp, x_tilde, rows)
    if np.any(c):
        ends, ends_tilde = a2cid2_mix(ends, ends_tilde, c)
    pairs = i.size
    both = xp.concat(sent_differences(ends, wire), axis=0)
    sign = to_backend(xp, ends, np.repeat([-1.0, 1.0], pairs).reshape(-1, 1), dtype=x.dtype)
    ends = ends + sign * (0.5 * both)
    ends_tilde = ends_tilde + sign * (alpha_tilde * both)
    return put_rows(x, rows, ends), put_rows(x_tilde, rows, ends_tilde)


def _exchange_numpy(
    x: np.ndarray, x_tilde: np.ndarray, rows: np.ndarray, c: np.ndarray, alpha_tilde: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`a2cid2_exchange` in place on numpy arrays (same arithmetic, fewer copies)."""
    ends, ends_tilde = np.take(x, rows, axis=0), np.take(x_tilde, rows, axis=0)
    if np.any(c):
        step = c.astype(x.dtype, copy=False)[:, None] * (ends_tilde - ends)
        ends += step
        ends_tilde -= step
    pairs = rows.size // 2
    m = ends[:pairs] - ends[pairs:]
    half, kick = 0.5 * m, alpha_tilde * m
    ends[:pairs] -= half
    ends[pairs:] += half
    ends_tilde[:pairs] -= kick
    ends_tilde[pairs:] += kick
    scatter_rows(x, rows, ends)
    scatter_rows(x_tilde, rows, ends_tilde)
    return x, x_tilde


def scatter_rows(x: np.ndarray, rows: np.ndarray, values: np.ndarray) -> None:
    """``x[rows] = values`` for distinct rows of a numpy array, moving whole rows at once.

    A C-contiguous 2-D array is viewed as one opaque item per row, which numpy copies
    several times faster than a fancy-indexed assignment of the same bytes.
    """
    if x.ndim == 2 and x.flags.c_contiguous and values.flags.c_contiguous and x.shape[1]:
        row = np.dtype((np.void, x.dtype.itemsize * x.shape[1]))
        x.view(row)[:, 0][rows] = values.astype(x.dtype, copy=False).view(row)[:, 0]
    else:
        x[rows] = values
