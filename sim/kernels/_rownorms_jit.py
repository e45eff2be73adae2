"""numba loops of :mod:`sim.kernels.rownorms`; needs the extra ``fast``.

Importing this module imports numba. ``fastmath`` stays off: every subtraction, product
and addition is the IEEE operation numpy does, in the order numpy does it. A row is
summed as numpy sums a contiguous float64 vector (``pairwise_sum`` in numpy's
``loops_utils.h``): fewer than 8 values one after another from +0.0; up to 128 values in
8 running sums combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the
rest one by one; more, split in two at a multiple of 8 near the middle. The reduction
adds that to its identity, +0.0.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

_compiled = numba.njit(cache=True, nogil=True)

#: numpy's ``PW_BLOCKSIZE``: the longest run summed by 8 running sums.
BLOCK = 128


@_compiled
def _block(v: Any, lo: int, n: int) -> float:
    """Σ v[lo:lo + n] for n ≤ :data:`BLOCK`, as numpy's pairwise sum adds it."""
    if n < 8:
        total = 0.0
        for i in range(n):
            total += v[lo + i]
        return total
    r0, r1, r2, r3 = v[lo], v[lo + 1], v[lo + 2], v[lo + 3]
    r4, r5, r6, r7 = v[lo + 4], v[lo + 5], v[lo + 6], v[lo + 7]
    i = 8
    whole = n - n % 8
    while i < whole:
        r0 += v[lo + i]
        r1 += v[lo + i + 1]
        r2 += v[lo + i + 2]
        r3 += v[lo + i + 3]
        r4 += v[lo + i + 4]
        r5 += v[lo + i + 5]
        r6 += v[lo + i + 6]
        r7 += v[lo + i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        total += v[lo + i]
        i += 1
    return total


@_compiled
def _half(n: int) -> int:
    """Where numpy splits a run longer than :data:`BLOCK`: near the middle, at a
    multiple of 8."""
    half = n // 2
    return half - half % 8


@_compiled
def _pairwise(v: Any, stack: Any, left: Any) -> float:
    """Σ v as numpy's pairwise sum adds it: blocks of at most :data:`BLOCK` values,
    combined as (left half) + (right half), depth first. The halving runs on an explicit
    stack (``stack``: (depth, 3) int64 of start, length, half done; ``left``: (depth,)
    float64), as numba's disk cache does not keep recursive functions."""
    n = v.size
    if n <= BLOCK:
        return _block(v, 0, n)
    top = 0
    stack[0, 0], stack[0, 1], stack[0, 2] = 0, n, 0
    while True:
        lo, m = stack[top, 0], stack[top, 1]
        if m > BLOCK:  # go down its left half
            top += 1
            stack[top, 0], stack[top, 1], stack[top, 2] = lo, _half(m), 0
            continue
        value = _block(v, lo, m)
        while True:  # hand the value up until a right half is still to do
            if top == 0:
                return value
            top -= 1
            lo, m = stack[top, 0], stack[top, 1]
            if stack[top, 2] == 0:  # its left half: keep it, go down the right one
                left[top] = value
                stack[top, 2] = 1
                half = _half(m)
                top += 1
                stack[top, 0], stack[top, 1], stack[top, 2] = lo + half, m - half, 0
                break
            value = left[top] + value


@_compiled
def centred_norms(a: Any, p: Any, out: Any) -> None:
    """out[r] = ‖float64(a[r]) − p‖² for each row r of the 2-D array ``a``."""
    dim = a.shape[1]
    square = np.empty(dim)
    stack, left = np.empty((64, 3), np.int64), np.empty(64)
    for r in range(a.shape[0]):
        for c in range(dim):
            d = np.float64(a[r, c]) - p[c]
            square[c] = d * d
        out[r] = 0.0 + _pairwise(square, stack, left)


@_compiled
def decaying_norms(a: Any, p: Any, d: Any, grow: Any, q: Any, out: Any) -> None:
    """With A = a[r] − p and B = d[r]·grow[r] − q: out[0, r], out[1, r], out[2, r] =
    ‖A‖², A·B, ‖B‖² for each row r of the 2-D float64 arrays ``a`` and ``d``."""
    dim = a.shape[1]
    aa, ab, bb = np.empty(dim), np.empty(dim), np.empty(dim)
    stack, left = np.empty((64, 3), np.int64), np.empty(64)
    for r in range(a.shape[0]):
        g = grow[r]
        for c in range(dim):
            x = a[r, c] - p[c]
            y = d[r, c] * g - q[c]
            aa[c] = x * x
            ab[c] = x * y
            bb[c] = y * y
        out[0, r] = 0.0 + _pairwise(aa, stack, left)
        out[1, r] = 0.0 + _pairwise(ab, stack, left)
        out[2, r] = 0.0 + _pairwise(bb, stack, left)
