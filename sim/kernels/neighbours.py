"""Neighbourhood mixing in padded neighbour-table (ELL) form: y = W x for a sparse W.

Row i of W is given by a (n_peers, K) table of neighbour rows and a table of weights of
the same shape (padding: any row with weight 0). Both tables live on the host; the
protocol rebuilds the weights each round from the presence mask. The product uses the
values of the previous round for every row (a synchronous update).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.kernels._xp import GATHER_ELEMENTS, column, is_numpy, namespace, take_rows, to_backend


def neighbour_mean(x: Any, neighbours: np.ndarray, weights: np.ndarray) -> Any:
    """Row-stochastic mixing: each row moves towards its neighbours by their weights.

    Parameters
    ----------
    x
        (n_peers, dim) floating array; numpy arrays are updated in place.
    neighbours
        (n_peers, K) host integer table of neighbour rows.
    weights
        (n_peers, K) host float weights w_ik ≥ 0 with Σ_k w_ik ≤ 1 (0 on padding);
        the self weight is 1 − Σ_k w_ik.

    Returns
    -------
    (n_peers, dim) array: ``x`` itself for numpy, a new array otherwise.

    Notes
    -----
    y_i = x_i + Σ_k w_ik (x_{n_ik} − x_i), i.e. y = W x with W_ii = 1 − Σ_k w_ik; all
    terms use the old x. In deviation form equal vectors stay exactly equal and a row
    with zero weights is untouched. Mean-preserving iff W is also column-stochastic
    (e.g. Metropolis–Hastings weights).

    References
    ----------
    Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", IEEE Trans. Inf.
    Theory 52(6), 2006 (Metropolis weights: Xiao & Boyd, "Fast linear iterations for
    distributed averaging", 2004).
    """
    xp = namespace(x)
    acc = _weighted_neighbour_sum(xp, x, neighbours, weights, centre=x)
    if is_numpy(x):
        x += acc
        return x
    return x + acc


def ell_mix(x: Any, neighbours: np.ndarray, weights: np.ndarray, self_weights: np.ndarray) -> Any:
    """General sparse mixing y = W x (e.g. the column-stochastic step of push-sum).

    Parameters
    ----------
    x
        (n_peers, dim) floating array (not modified).
    neighbours, weights
        (n_peers, K) host tables: W_{i, n_ik} += w_ik.
    self_weights
        (n_peers,) host diagonal W_ii.

    Returns
    -------
    New (n_peers, dim) array y with y_i = W_ii x_i + Σ_k w_ik x_{n_ik}.

    Notes
    -----
    Σ_i y_i = Σ_j x_j · (W_jj + Σ_{(i,k): n_ik = j} w_ik): the total is conserved when
    every column of W sums to 1, which push-sum guarantees by construction.

    References
    ----------
    Kempe, Dobra, Gehrke, "Gossip-based computation of aggregate information", FOCS
    2003; Assran et al., "Stochastic Gradient Push for Distributed Deep Learning",
    ICML 2019.
    """
    xp = namespace(x)
    return x * column(xp, x, self_weights) + _weighted_neighbour_sum(
        xp, x, neighbours, weights, centre=None
    )


def _weighted_neighbour_sum(
    xp: Any, x: Any, neighbours: np.ndarray, weights: np.ndarray, centre: Any
) -> Any:
    """Σ_k w_ik (x_{n_ik} − centre_i) (centre None: Σ_k w_ik x_{n_ik})."""
    n_peers, n_slots = neighbours.shape
    active = [k for k in range(n_slots) if np.any(weights[:, k] != 0)]
    if n_peers * len(active) * int(x.shape[1]) <= GATHER_ELEMENTS and len(active) > 1:
        return _gathered(xp, x, neighbours[:, active], weights[:, active], centre)
    acc = xp.zeros_like(x)
    for k in active:
        term = take_rows(xp, x, neighbours[:, k])
        if centre is not None:
            term = term - centre
        term = term * column(xp, x, weights[:, k])
        if is_numpy(acc):
            acc += term
        else:
            acc = acc + term
    return acc


def _gathered(xp: Any, x: Any, neighbours: np.ndarray, weights: np.ndarray, centre: Any) -> Any:
    n_peers, n_slots = neighbours.shape
    gathered = xp.reshape(take_rows(xp, x, neighbours.reshape(-1)), (n_peers, n_slots, -1))
    if centre is not None:
        gathered = gathered - xp.reshape(centre, (n_peers, 1, -1))
    w = to_backend(xp, x, weights.reshape(n_peers, n_slots, 1), dtype=x.dtype)
    return xp.sum(gathered * w, axis=1)
