"""Push-sum pushes: a sender keeps half of its value and hands the other half on."""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.kernels._xp import is_numpy, namespace, take_rows
from sim.kernels.compression import IDENTITY, WireLike, as_wire
from sim.kernels.mixing import put_rows, scatter_rows


def push_half(x: Any, senders: np.ndarray, targets: np.ndarray, wire: WireLike = IDENTITY) -> Any:
    """Apply the pushes of disjoint (sender, target) pairs.

    Parameters
    ----------
    x
        (n_peers, dim) floating array (values x, or push-sum weights w of shape
        (n_peers, 1)); numpy arrays are updated in place.
    senders, targets
        (P,) host rows; all 2P rows distinct.
    wire
        How the halves travel (a :class:`~sim.kernels.compression.Wire` or its name,
        each half one message); default exact.

    Returns
    -------
    (n_peers, dim) array: ``x`` itself for numpy, a new array otherwise.

    Notes
    -----
    With h = x_s / 2: x_s ← h, x_t ← x_t + h. Halving is exact in binary floating point
    (barring underflow), so x_s + h equals the old x_s exactly and the total changes only
    by the round-off of x_t + h.

    Through a lossy wire the target adds the decoded Q(h) instead (the sender still
    keeps exactly h): the total moves by Σ (Q(h) − h), the wire's error.

    References
    ----------
    Kempe, Dobra, Gehrke, "Gossip-based computation of aggregate information", FOCS 2003.
    """
    if senders.size == 0:
        return x
    wire = as_wire(wire)
    if is_numpy(x):
        half = 0.5 * np.take(x, senders, axis=0)
        arrived = wire.receive(half)
        received = np.take(x, targets, axis=0) + arrived
        scatter_rows(x, senders, half)
        scatter_rows(x, targets, received)
        return x
    xp = namespace(x)
    half = 0.5 * take_rows(xp, x, senders)
    arrived = wire.receive(half)
    moved = xp.concat((half, take_rows(xp, x, targets) + arrived), axis=0)
    return put_rows(x, np.concatenate((senders, targets)), moved)
