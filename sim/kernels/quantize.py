"""The quantizers behind the wires of :mod:`sim.kernels.compression`: pure arithmetic.

Each function maps a batch of messages (rows of an ``(n_messages, n_coords)`` array on
any array-API backend) to the values a receiver decodes; every row is quantized with its
own statistics. No names, no byte counts, no randomness, no state.

| quantizer | receiver gets |
| --- | --- |
| :func:`fp16_round` | x rounded to float16 (clamped to ±65504) |
| :func:`uniform8` | centre of x's bin among 256 on mean ± 6σ |
| :func:`quantile8` | mean of x's bin among 256 equal-count bins |
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.kernels._xp import is_numpy, namespace, to_backend

#: Number of 8-bit codes.
N_BINS = 256
#: Half-width of the ``uniform8`` range in standard deviations.
UNIFORM8_SIGMAS = 6.0
#: Largest finite float16.
FP16_MAX = 65504.0


def fp16_round(x: Any) -> Any:
    """x clamped to ±65504 and rounded to the nearest float16 (ties to even), in x's dtype.

    Notes
    -----
    Where the namespace has ``float16`` (numpy, CuPy) this is a cast there and back.
    Otherwise (``array_api_strict``) the rounding is emulated exactly: with
    e = clip(⌊log₂|x|⌋, −14, 15) the float16 spacing is q = 2^(e−10) (subnormals below
    2^−14 share q = 2^−24) and the result is round_half_even(x/q)·q, every step exact.
    """
    xp = namespace(x)
    clamped = xp.clip(x, -FP16_MAX, FP16_MAX)
    if hasattr(xp, "float16"):
        return xp.astype(xp.astype(clamped, xp.float16), x.dtype)
    magnitude = xp.abs(clamped)
    safe = xp.where(magnitude > 0, magnitude, xp.ones_like(magnitude))
    exponent = xp.floor(xp.log2(safe))
    # log2 may round up just below a power of two (or down just above): correct it
    exponent = xp.where(2.0**exponent > safe, exponent - 1, exponent)
    exponent = xp.where(2.0 ** (exponent + 1) <= safe, exponent + 1, exponent)
    step = 2.0 ** (xp.clip(exponent, -14.0, 15.0) - 10)
    return xp.round(clamped / step) * step


def uniform8(xp: Any, x: Any) -> Any:
    """Each row to the centres of 256 equal bins on mean ± 6σ (values outside clipped).

    Notes
    -----
    With lo = μ − 6σ, Δ = 12σ/256: code k = clip(⌊(x − lo)/Δ⌋, 0, 255) and the receiver
    takes lo + (k + ½)·Δ, within Δ/2 of every x inside [lo, lo + 256Δ]. A row of equal
    values (σ = 0) sends that value as lo with Δ = 0 and is exact.
    """
    mean = xp.mean(x, axis=1, keepdims=True)
    sigma = xp.std(x, axis=1, keepdims=True)
    constant = xp.min(x, axis=1, keepdims=True) == xp.max(x, axis=1, keepdims=True)
    lo = xp.where(constant, x[:, :1], mean - UNIFORM8_SIGMAS * sigma)
    width = xp.where(constant, xp.zeros_like(sigma), 2 * UNIFORM8_SIGMAS * sigma / N_BINS)
    safe_width = xp.where(width > 0, width, xp.ones_like(width))
    code = xp.clip(xp.floor((x - lo) / safe_width), 0.0, N_BINS - 1.0)
    return lo + (code + 0.5) * width


def quantile8(xp: Any, x: Any) -> Any:
    """Each row to the mean of its value's bin among 256 bins of (nearly) equal counts.

    Notes
    -----
    Bin k holds the sorted ranks ⌈k·n/256⌉ … ⌈(k+1)·n/256⌉ − 1: bin edges at the
    empirical quantiles k/256. The table entry of a bin is the mean of its values,
    clipped to their [min, max]. A value is coded by the bin of its left rank r (the
    number of smaller values in the row), so equal values share a code; as the value
    sits at sorted rank r, its error is at most its bin's width (max − min). A row of
    equal values is exact, and so is a row of fewer than 256 values (one per bin).
    Empty bins' entries are unused.
    """
    n_coords = x.shape[1]
    ordered, ranks = _sorted_and_left_ranks(xp, x)
    table = _bin_means(xp, ordered, n_coords)
    return xp.take_along_axis(table, (ranks * N_BINS) // n_coords, axis=1)


def _sorted_and_left_ranks(xp: Any, x: Any) -> tuple[Any, Any]:
    """Row-sorted values, and for every value the number of values below it in its row."""
    if is_numpy(x):
        return _sorted_and_left_ranks_numpy(x)
    ordered = xp.sort(x, axis=1)
    rows = [xp.searchsorted(ordered[i, :], x[i, :]) for i in range(x.shape[0])]
    return ordered, xp.stack(rows)


def _sorted_and_left_ranks_numpy(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """numpy fast path (one argsort instead of a binary search per value); same integers."""
    order = np.argsort(x, axis=1)
    ordered = np.take_along_axis(x, order, axis=1)
    position = np.arange(x.shape[1])
    starts_run = np.ones(ordered.shape, dtype=bool)
    starts_run[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    first = np.maximum.accumulate(np.where(starts_run, position, 0), axis=1)
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, first, axis=1)
    return ordered, ranks


def _bin_means(xp: Any, ordered: Any, n_coords: int) -> Any:
    """(n_messages, 256) clipped bin means of row-sorted values ``ordered``."""
    bins = np.arange(N_BINS + 1, dtype=np.int64)
    edges = (bins * n_coords + N_BINS - 1) // N_BINS
    starts, counts = edges[:-1], np.diff(edges)
    width = max(int(counts.max()), 1)
    slot = starts[:, None] + np.arange(width)[None, :]
    inside = to_backend(xp, ordered, slot < edges[1:, None])
    index = to_backend(xp, ordered, np.minimum(slot, n_coords - 1).reshape(-1))
    block = xp.reshape(xp.take(ordered, index, axis=1), (ordered.shape[0], N_BINS, width))
    total = xp.sum(xp.where(inside, block, xp.zeros_like(block)), axis=2)
    mean = total / to_backend(xp, ordered, np.maximum(counts, 1), dtype=ordered.dtype)
    lowest = xp.take(ordered, to_backend(xp, ordered, np.minimum(starts, n_coords - 1)), axis=1)
    highest = xp.take(ordered, to_backend(xp, ordered, np.maximum(edges[1:] - 1, 0)), axis=1)
    return xp.clip(mean, lowest, xp.maximum(highest, lowest))
