"""numba loop of :func:`sim.kernels.pairwise.average_waves`; needs the extra ``fast``.

Importing this module imports numba. ``fastmath`` stays off, and ``half`` has the
state's dtype, so every subtraction, product and addition is the IEEE operation numpy
does on the same dtype, in the same order.
"""

from __future__ import annotations

from typing import Any

import numba


@numba.njit(cache=True, nogil=True)
def average_in_order(x: Any, i: Any, j: Any, half: Any) -> None:
    """For k = 0 … K−1: d = x_i − x_j, x_i ← x_i − half·d, x_j ← x_j + half·d (rows
    i[k], j[k] of the C-contiguous (n, dim) array ``x``, in place)."""
    dim = x.shape[1]
    for k in range(i.size):
        a, b = i[k], j[k]
        for c in range(dim):
            xa, xb = x[a, c], x[b, c]
            step = half * (xa - xb)
            x[a, c] = xa - step
            x[b, c] = xb + step
