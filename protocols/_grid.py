"""Moshpit grid arithmetic on integer codes: cells, keys, lines and re-keying.

A point of the M^k grid is stored as one integer code: the base-M number whose digits
are its coordinates, the **oldest** key coordinate being the most significant digit.
All functions are vectorised over peers (numpy, host side).
"""

from __future__ import annotations

import numpy as np


def spread(n_peers: int, n_cells: int, rng: np.random.Generator) -> np.ndarray:
    """Random cells for n peers, as even as possible: each cell gets ⌊n/C⌋ or ⌈n/C⌉.

    Every cell gets ⌊n/C⌋ peers and n mod C distinct random cells one more; the cells
    are then dealt to the peers in a random order. With n ≤ C the cells are distinct.
    """
    full, extra = divmod(n_peers, n_cells)
    cells = np.concatenate(
        (
            np.tile(np.arange(n_cells, dtype=np.int64), full),
            rng.choice(n_cells, size=extra, replace=False).astype(np.int64),
        )
    )
    return cells[rng.permutation(n_peers)]


def initial_keys(n_peers: int, size: int, dims: int, rng: np.random.Generator) -> np.ndarray:
    """Initial group keys (codes in [0, M^(d−1))) for ``rekey: true``.

    On a full grid (N = M^d) peer i's key is the d−1 high base-M digits of i, i.e.
    i // M: the first round's groups are the blocks of M consecutive peers. Otherwise
    the keys are spread as evenly as possible over the M^(d−1) cells (:func:`spread`).
    """
    n_keys = size ** (dims - 1)
    if n_peers == size**dims:
        return np.arange(n_peers, dtype=np.int64) // size
    return spread(n_peers, n_keys, rng)


def rekey(keys: np.ndarray, chunks: np.ndarray, size: int, dims: int) -> np.ndarray:
    """Drop each key's oldest coordinate and append ``chunks mod M`` as the newest.

    ``keys`` and ``chunks`` are arrays of the same shape; returns the new codes.
    """
    if dims == 1:
        return keys
    return (keys % size ** (dims - 2)) * size + chunks % size


def line_labels(cells: np.ndarray, size: int, dims: int, axis: int) -> np.ndarray:
    """Label of the line along ``axis`` through each cell (the cell without that digit)."""
    low = size**axis
    return (cells // (low * size)) * low + cells % low
