"""numba loops of the fused group mean (:mod:`sim.kernels.fused`); needs the extra ``fast``.

Importing this module imports numba; :mod:`sim.kernels.fused` does so only when a round
is large enough to use it, and falls back to numpy when numba is missing. Functions are
compiled on first use (cached on disk), once per dtype; ``fastmath`` stays off, so every
addition, subtraction, product and division is the IEEE operation numpy does, in the
state's dtype, in the order written here.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

_compiled = numba.njit(cache=True, nogil=True)


@_compiled
def _start(acc: Any, ref: Any, row: Any, weight: Any, weighted: bool) -> None:
    """ref ← row; acc ← (row − ref)·w: +0, or NaN where the row is not finite."""
    for c in range(acc.size):
        ref[c] = row[c]
    if weighted:
        for c in range(acc.size):
            acc[c] = (row[c] - ref[c]) * weight
    else:
        for c in range(acc.size):
            acc[c] = row[c] - ref[c]


@_compiled
def _add(acc: Any, ref: Any, row: Any, weight: Any, weighted: bool) -> None:
    """acc ← acc + (row − ref)·w (w = 1: no product)."""
    if weighted:
        for c in range(acc.size):
            acc[c] += (row[c] - ref[c]) * weight
    else:
        for c in range(acc.size):
            acc[c] += row[c] - ref[c]


@_compiled
def _finish(acc: Any, ref: Any, total: Any) -> None:
    """acc ← ref + acc / total: the group's mean."""
    for c in range(acc.size):
        acc[c] = ref[c] + acc[c] / total


@_compiled
def _put(row: Any, acc: Any) -> None:
    for c in range(acc.size):
        row[c] = acc[c]


@_compiled
def group_mean_rows(
    x: Any,
    order: Any,
    starts: Any,
    counts: Any,
    totals: Any,
    weights: Any,
    weighted: bool,
    n_columns: int,
    block: int,
) -> None:
    """Replace columns [0, n_columns) of every member row by its group's mean, in place.

    Group k has members ``order[starts[k] : starts[k] + counts[k]]`` (counts ≥ 2),
    total weight ``totals[k]`` and, when ``weighted``, member weights ``weights[row]``
    (all in ``x``'s dtype; unweighted, ``weights`` is any non-empty array). Columns are
    done ``block`` at a time, so a group's rows are read from memory once and written
    back while still in cache.
    """
    ref = np.empty(block, x.dtype)
    acc = np.empty(block, x.dtype)
    for k in range(counts.size):
        first, size, total = starts[k], counts[k], totals[k]
        for c0 in range(0, n_columns, block):
            c1 = min(c0 + block, n_columns)
            a, f = acc[: c1 - c0], ref[: c1 - c0]
            row = order[first]
            _start(a, f, x[row, c0:c1], weights[row if weighted else 0], weighted)
            for j in range(1, size):
                row = order[first + j]
                _add(a, f, x[row, c0:c1], weights[row if weighted else 0], weighted)
            _finish(a, f, total)
            for j in range(size):
                _put(x[order[first + j], c0:c1], a)
