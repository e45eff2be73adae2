"""Group averaging: every member of a group gets the group's (weighted) mean.

One call averages all the groups of a round at once. The work is cut into **tiles**: a
bucket of groups of similar sizes (:attr:`Groups.buckets`) × a block of columns. A tile
gathers its members into a padded (groups, size, columns) array and reduces it; small
states are one tile per bucket, large ones use cache-sized column blocks so the state
is read and written about once. The arithmetic uses only array-API operations (``take``,
``sum``, ``where``, ``reshape``, ``concat``), so the same code runs on numpy, CuPy and
``array_api_strict``. numpy arrays are updated in place: :func:`group_mean` hands the
columns it can to the fused kernels of :mod:`sim.kernels.fused` (one read and one write
of each member row), the rest tile by tile; other namespaces get a new array. All paths
give the tiles' values, bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from sim.kernels._xp import GATHER_ELEMENTS, column, is_numpy, namespace, take_rows, to_backend
from sim.kernels.fused import backend_for, fused_columns, fused_group_mean
from sim.kernels.groups import Groups

#: Size, in elements of the padded gather, of a column block once a bucket's whole
#: (groups × size × dim) gather exceeds :data:`GATHER_ELEMENTS` (about an L2 cache).
CACHE_ELEMENTS = 1 << 19
#: Narrowest column block: a row segment of at least one 64-byte cache line.
MIN_BLOCK_COLUMNS = 16
#: Buckets with this many members or more are written back in row order (sequential
#: memory access); smaller ones in group order (fewer numpy calls).
ROW_ORDER_MEMBERS = 1 << 16


def group_means(x: Any, groups: Groups, weights: np.ndarray | None = None) -> Any:
    """The (weighted) mean of every group.

    Parameters
    ----------
    x
        (n_peers, dim) floating array on any array-API backend (not modified).
    groups
        The groups (host-side index arrays).
    weights
        Optional (n_peers,) finite non-negative host weights; every group needs a
        positive total.

    Returns
    -------
    (G, dim) array of ``x``'s dtype and namespace; row k is the mean of group k.

    Notes
    -----
    With r the group's first member, m = x_r + Σ_j w_j (x_j − x_r) / Σ_j w_j (w_j = 1
    without weights). Summing deviations from a member keeps the mean of equal vectors
    exactly equal to them; a group of one is its member's row, untouched.
    """
    weights, totals = _checked(groups, weights)
    xp = namespace(x)
    parts = [
        xp.concat([_tile_means(xp, x, bucket, weights, totals, cols) for cols in blocks], axis=1)
        for bucket, blocks in _buckets(groups, int(x.shape[1]))
    ]
    singles = groups.counts == 1
    if np.any(singles):
        parts.append(take_rows(xp, x, groups.order[groups.starts[singles]]))
    return xp.concat(parts, axis=0) if parts else x[:0, ...]


def group_mean(x: Any, groups: Groups, weights: np.ndarray | None = None) -> Any:
    """Replace every member's vector by its group's (weighted) mean.

    Parameters
    ----------
    x
        (n_peers, dim) floating array; numpy arrays are updated in place.
    groups, weights
        As in :func:`group_means`.

    Returns
    -------
    (n_peers, dim) array: ``x`` itself for numpy, a new array otherwise. Rows in no
    group, and groups of one, are unchanged.

    Notes
    -----
    x_i ← Σ_{j∈g(i)} w_j x_j / Σ_{j∈g(i)} w_j for every member i (w_j = 1 without
    weights), computed as in :func:`group_means`. Unweighted, it preserves the sum of
    each group (hence the global mean) to round-off; weighted, it preserves Σ w_i x_i.
    """
    weights, totals = _checked(groups, weights)
    if groups.n_groups == 0:
        return x
    if not is_numpy(x):
        return assign_groups(x, groups, group_means(x, groups, weights))
    for bucket, blocks in _buckets(groups, int(x.shape[1])):
        done = _fused(x, groups, bucket, blocks, weights, totals)
        for cols in blocks:
            if cols[0] >= done:
                means = _tile_means(np, x, bucket, weights, totals, cols)
                _write_tile(x, groups, bucket, means, cols)
    return x


def assign_groups(x: Any, groups: Groups, values: Any) -> Any:
    """Set every member row to its group's row of ``values`` ((G, dim)).

    numpy arrays are written in place; other namespaces get
    ``where(member, take(values, group), x)``.
    """
    if is_numpy(x):
        x[groups.members] = values[groups.member_group]
        return x
    xp = namespace(x)
    group = groups.peer_group
    picked = take_rows(xp, values, np.maximum(group, 0))
    member = xp.reshape(to_backend(xp, x, group >= 0), (-1, 1))
    return xp.where(member, picked, x)


def _checked(groups: Groups, weights: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray]:
    """Validated float64 weights (or None) and the (G,) total weight of each group."""
    if weights is None:
        return None, groups.counts
    weights = np.asarray(weights, dtype=np.float64)
    if np.any(weights < 0) or not np.all(np.isfinite(weights)):
        raise ValueError("weights must be finite and non-negative")
    totals = np.bincount(groups.member_group, weights[groups.members], groups.n_groups)
    if np.any(totals <= 0):
        raise ValueError("every group needs a positive total weight")
    return weights, totals


class _Bucket(NamedTuple):
    first: int  # first group
    stop: int  # one past the last group
    rows: np.ndarray  # (stop − first, size) padded member rows


def _buckets(groups: Groups, dim: int) -> Iterator[tuple[_Bucket, list[tuple[int, int]]]]:
    """Each bucket of groups with its column blocks [c0, c1)."""
    for first, stop in groups.buckets:
        rows = groups.padded_rows(first, stop)
        width = dim
        if rows.size * dim > GATHER_ELEMENTS:
            width = max(MIN_BLOCK_COLUMNS, CACHE_ELEMENTS // rows.size)
        yield _Bucket(first, stop, rows), [(c, min(c + width, dim)) for c in range(0, dim, width)]


def _fused(
    x: np.ndarray,
    groups: Groups,
    bucket: _Bucket,
    blocks: list[tuple[int, int]],
    weights: np.ndarray | None,
    totals: np.ndarray,
) -> int:
    """numpy: the bucket's leading columns through a fused kernel; how many it did."""
    n_columns = fused_columns(blocks)
    members = int(groups.offsets[bucket.stop] - groups.offsets[bucket.first])
    backend = backend_for(x, members, n_columns)
    if backend is None:
        return 0
    span = (bucket.first, bucket.stop)
    fused_group_mean(x, groups, span, n_columns, weights, totals, backend)
    return n_columns


def _columns(x: Any, cols: tuple[int, int]) -> Any:
    return x if cols == (0, x.shape[1]) else x[:, cols[0] : cols[1]]


def _tile_means(
    xp: Any, x: Any, bucket: _Bucket, weights: Any, totals: np.ndarray, cols: tuple[int, int]
) -> Any:
    """(groups of the bucket, columns) means of one tile (numpy: deviations in place)."""
    n_groups, size = bucket.rows.shape
    gathered = take_rows(xp, _columns(x, cols), bucket.rows.reshape(-1))
    gathered = xp.reshape(gathered, (n_groups, size, cols[1] - cols[0]))
    ref = gathered[:, 0, :]
    if is_numpy(gathered):
        ref = ref.copy()
        gathered -= ref[:, None, :]
        dev = gathered
    else:
        dev = gathered - xp.reshape(ref, (n_groups, 1, -1))
    if weights is not None:
        w = weights[bucket.rows].reshape(n_groups, size, 1)
        dev = dev * to_backend(xp, x, w, dtype=x.dtype)
    return ref + xp.sum(dev, axis=1) / column(xp, x, totals[bucket.first : bucket.stop])


def _write_tile(
    x: np.ndarray, groups: Groups, bucket: _Bucket, means: np.ndarray, cols: tuple[int, int]
) -> None:
    """numpy: write a tile's means to its members (padding rows get their own group's)."""
    block = _columns(x, cols)
    lo, hi = int(groups.offsets[bucket.first]), int(groups.offsets[bucket.stop])
    if hi - lo < ROW_ORDER_MEMBERS:
        block[bucket.rows] = means[:, None, :]
        return
    group = groups.peer_group
    rows = np.flatnonzero((group >= bucket.first) & (group < bucket.stop))
    if rows.size == x.shape[0] and block is x:
        np.take(means, group - bucket.first, axis=0, out=x)
    else:
        block[rows] = means[group[rows] - bucket.first]
