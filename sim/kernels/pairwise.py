"""Pairwise exchanges applied as deltas: the kernel of randomized (pairwise) gossip."""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.kernels._xp import is_numpy, namespace, take_rows, to_backend


def pairwise_delta(
    x: Any,
    i: np.ndarray,
    j: np.ndarray,
    s_i: Any = None,
    s_j: Any = None,
    q_i: Any = None,
    q_j: Any = None,
) -> Any:
    """Apply the exchanges of disjoint pairs (i_p, j_p) as deltas.

    Parameters
    ----------
    x
        (n_peers, dim) floating array; numpy arrays are updated in place.
    i, j
        (P,) host integer rows; all 2P rows distinct (disjoint pairs).
    s_i, s_j
        (P, dim) arrays of the values each end **sent** (snapshots taken when the
        exchange started); default: the current rows ``x[i]`` and ``x[j]``.
    q_i, q_j
        (P, dim) arrays of the values the **other** end received (s_i and s_j after a
        lossy wire, e.g. :func:`sim.kernels.compression.roundtrip`); default: ``s_i`` and
        ``s_j`` (an exact wire).

    Returns
    -------
    (n_peers, dim) array: ``x`` itself for numpy, a new array otherwise.

    Notes
    -----
    With m = (s_i − s_j)/2: x_i ← x_i − m, x_j ← x_j + m. The pair's sum changes by
    −m + m, so the global sum is preserved to round-off even when x has moved since the
    snapshot (overlapping exchanges); with s = x it is the pairwise mean.

    With a lossy wire (q given) each end uses its own exact value and the other's
    received one: x_i ← x_i − (s_i − q_j)/2, x_j ← x_j + (q_i − s_j)/2; the pair's sum
    then moves by ((q_i − s_i) + (q_j − s_j))/2, the wire's error. Without q the
    arithmetic is exactly the exact-wire one above.

    References
    ----------
    Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", IEEE Trans. Inf.
    Theory 52(6), 2006.
    """
    i = np.asarray(i, dtype=np.intp).reshape(-1)
    j = np.asarray(j, dtype=np.intp).reshape(-1)
    _check_disjoint(i, j)
    xp = namespace(x)
    if i.size == 0:
        return x
    s_i = take_rows(xp, x, i) if s_i is None else s_i
    s_j = take_rows(xp, x, j) if s_j is None else s_j
    if q_i is None and q_j is None:
        half_i = half_j = (s_i - s_j) / 2
    else:
        half_i = (s_i - (s_j if q_j is None else q_j)) / 2
        half_j = ((s_i if q_i is None else q_i) - s_j) / 2
    if is_numpy(x):
        x[i] -= half_i
        x[j] += half_j
        return x
    side = np.zeros(x.shape[0], dtype=np.int8)
    side[i], side[j] = 1, 2
    pair = np.zeros(x.shape[0], dtype=np.intp)
    pair[i] = pair[j] = np.arange(i.size)
    moved_i = take_rows(xp, half_i, pair)
    moved_j = moved_i if half_j is half_i else take_rows(xp, half_j, pair)
    on_side = to_backend(xp, x, side.reshape(-1, 1))
    return xp.where(on_side == 1, x - moved_i, xp.where(on_side == 2, x + moved_j, x))


def _check_disjoint(i: np.ndarray, j: np.ndarray) -> None:
    if i.shape != j.shape:
        raise ValueError(f"i and j must have the same length, got {i.size} and {j.size}")
    both = np.concatenate((i, j))
    if np.unique(both).size != both.size:
        raise ValueError("pairs must be disjoint: a row appears in more than one pair")
