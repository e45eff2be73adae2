"""Push-sum pushes: a sender keeps half of its value and hands the other half on."""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.kernels._xp import is_numpy, namespace, take_rows
from sim.kernels.mixing import put_rows, scatter_rows


def push_half(x: Any, senders: np.ndarray, targets: np.ndarray) -> Any:
    """Apply the pushes of disjoint (sender, target) pairs.

    Parameters
    ----------
    x
        (n_peers, dim) floating array (values x, or push-sum weights w of shape
        (n_peers, 1)); numpy arrays are updated in place.
    senders, targets
        (P,) host rows; all 2P rows distinct.

    Returns
    -------
    (n_peers, dim) array: ``x`` itself for numpy, a new array otherwise.

    Notes
    -----
    With h = x_s / 2: x_s ← h, x_t ← x_t + h. Halving is exact in binary floating point
    (barring underflow), so x_s + h equals the old x_s exactly and the total changes only
    by the round-off of x_t + h.

    References
    ----------
    Kempe, Dobra, Gehrke, "Gossip-based computation of aggregate information", FOCS 2003.
    """
    if senders.size == 0:
        return x
    if is_numpy(x):
        half = 0.5 * np.take(x, senders, axis=0)
        received = np.take(x, targets, axis=0) + half
        scatter_rows(x, senders, half)
        scatter_rows(x, targets, received)
        return x
    xp = namespace(x)
    half = 0.5 * take_rows(xp, x, senders)
    moved = xp.concat((half, take_rows(xp, x, targets) + half), axis=0)
    return put_rows(x, np.concatenate((senders, targets)), moved)
