"""Fused group means for numpy states: every member row read once and written once.

The tiles of :mod:`sim.kernels.grouped` gather a padded (groups, size, columns) copy,
subtract the reference rows, sum and scatter back: about four passes over the state.
For a numpy state, :func:`sim.kernels.group_mean` hands the columns it can to one of two
fused backends instead, with the same values bit for bit:

- ``numba`` (the optional extra ``fast``; used when importable): one compiled loop over
  the groups of a bucket, :data:`JIT_BLOCK_BYTES` of each row at a time, so a group's rows
  are read from memory once and written back while still in cache;
- ``numpy``: a Python loop over the groups and their members, a whole row per ufunc call;
  only for rows of at least :data:`ROW_LOOP_BYTES`, where the calls are cheap next to
  the arithmetic.

Bit identity with the tiles. A tile computes, for each column of a group with first
member r, members j in member order, weights w_j (1 without) and total weight T, in the
state's dtype: d_j = (x_j − x_r)·w_j, s = ((d_r + d_1) + d_2) + … (numpy reduces axis 1
of a C-contiguous (groups, size, columns) array with columns ≥ 2 one slab after another,
in order: pairwise summation only runs along a contiguous reduced axis), then
m = x_r + s / T. The fused backends do these operations in this order. A tile's padding
(its first member again) adds d_r = +0.0, which leaves s unchanged: a sum that starts
at +0.0 is never −0.0. One-column tiles are summed pairwise by numpy: they stay tiles
(see :func:`fused_columns`).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import numpy as np

from sim.core.optional import optional_module
from sim.kernels.groups import Groups

#: Bytes of a row done at a time by the numba loop: a group of 32 rows then holds 256 KiB.
#: The best size depends on the machine; the results do not (each column is the same
#: sum in the same order). K1 where the loop was written: 1 KiB ≈ 0.7–0.8 of a copy,
#: 4 KiB ≈ 0.6, 16 KiB ≈ 0.5; on stop 37's (AMD EPYC, 32 KiB L1d and 512 KiB L2 a core):
#: 1 KiB 0.36–0.43, 4 KiB 0.52–0.56, 8 KiB 0.58–0.70, 16 KiB 0.58–0.76, a whole row
#: 0.48–0.53. 8 KiB keeps both at about 0.55 or more; 1 KiB fell below 0.5 on the second.
JIT_BLOCK_BYTES = 8192
#: Smallest (members × columns) of a bucket worth the numba loop: below it the tiles are
#: as fast, and a small run never imports numba.
JIT_MIN_ELEMENTS = 1 << 16
#: Narrowest rows (bytes of the averaged columns) for the numba loop. Narrower rows are
#: as slow fused as tiled, both waiting on one cache miss per row (N = 10^6, dim = 8).
JIT_MIN_ROW_BYTES = 256
#: Narrowest rows (bytes) for the numpy row loop: a few ufunc calls per member row pay
#: off from about 16 KiB (float32 dim 4096: 1.5× the tiles; 4 KiB: even).
ROW_LOOP_BYTES = 16 * 1024
#: dtypes the fused backends handle (numba compiles these; others keep the tiles).
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def jit_module() -> ModuleType | None:
    """:mod:`sim.kernels._jit` when numba imports, else None (numpy paths only)."""
    return optional_module("sim.kernels._jit")


def fused_columns(blocks: Sequence[tuple[int, int]]) -> int:
    """How many leading columns of a bucket the fused backends may take: its leading
    column blocks [c0, c1) of two columns or more (numpy sums a one-column tile pairwise,
    not in member order)."""
    end = 0
    for c0, c1 in blocks:
        if c1 - c0 < 2 or c0 != end:
            break
        end = c1
    return end


def backend_for(x: np.ndarray, n_members: int, n_columns: int) -> str | None:
    """The fused backend for ``n_columns`` columns of a bucket of ``n_members`` member
    rows of the numpy state ``x``: ``"numba"``, ``"numpy"``, or None (keep the tiles)."""
    if x.dtype not in DTYPES or n_columns < 2:
        return None
    row_bytes = n_columns * x.itemsize
    jit = row_bytes >= JIT_MIN_ROW_BYTES and n_members * n_columns >= JIT_MIN_ELEMENTS
    if jit and x.flags.c_contiguous and jit_module() is not None:
        return "numba"
    return "numpy" if row_bytes >= ROW_LOOP_BYTES else None


def fused_group_mean(
    x: np.ndarray,
    groups: Groups,
    span: tuple[int, int],
    n_columns: int,
    weights: np.ndarray | None,
    totals: np.ndarray,
    backend: str,
) -> None:
    """Replace columns [0, n_columns) of the members of groups [first, stop) by their
    group's (weighted) mean, in place.

    Parameters
    ----------
    x
        (n_peers, dim) float32 or float64 numpy state (C-contiguous for ``numba``).
    groups
        The groups; those of ``span`` = (first, stop) must all have ≥ 2 members.
    n_columns
        Columns to average (the rest are left as they are).
    weights
        (n_peers,) float64 member weights, or None.
    totals
        (G,) total weight (or member count) of every group of ``groups``.
    backend
        ``"numba"`` or ``"numpy"`` (see :func:`backend_for`).

    Notes
    -----
    m = x_r + (Σ_j (x_j − x_r)·w_j) / T per column, summed in member order in ``x``'s
    dtype: the values of :func:`sim.kernels.group_mean`'s tiles, bit for bit.
    """
    first, stop = span
    order = np.ascontiguousarray(groups.order, dtype=np.intp)
    starts = np.ascontiguousarray(groups.starts[first:stop], dtype=np.intp)
    counts = np.ascontiguousarray(groups.counts[first:stop], dtype=np.intp)
    cast = np.asarray(totals[first:stop], dtype=x.dtype)
    member_w = None if weights is None else weights.astype(x.dtype)
    if backend == "numba":
        jit = jit_module()
        assert jit is not None, "numba is not importable"
        w = np.ones(1, x.dtype) if member_w is None else member_w
        block = max(1, min(JIT_BLOCK_BYTES // x.itemsize, n_columns))
        jit.group_mean_rows(
            x, order, starts, counts, cast, w, member_w is not None, n_columns, block
        )
    else:
        _row_loop(x, order, starts, counts, cast, member_w, n_columns)


def _row_loop(
    x: np.ndarray,
    order: np.ndarray,
    starts: np.ndarray,
    counts: np.ndarray,
    totals: np.ndarray,
    weights: np.ndarray | None,
    n_columns: int,
) -> None:
    """numpy backend: per group, one ufunc pass per member row to sum, one to write."""
    ref, acc, dev = (np.empty(n_columns, dtype=x.dtype) for _ in range(3))
    block = x[:, :n_columns]
    for first, size, total in zip(starts.tolist(), counts.tolist(), totals, strict=True):
        rows = order[first : first + size].tolist()
        np.copyto(ref, block[rows[0]])
        for j, row in enumerate(rows):
            out = dev if j else acc
            np.subtract(block[row], ref, out=out)
            if weights is not None:
                np.multiply(out, weights[row], out=out)
            if j:
                np.add(acc, dev, out=acc)
        np.divide(acc, total, out=acc)
        np.add(ref, acc, out=acc)
        for row in rows:
            block[row] = acc
