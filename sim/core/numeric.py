"""Small numeric helpers that must not overflow where numpy's would."""

from __future__ import annotations

import math

import numpy as np


def median(values: np.ndarray) -> float:
    """The median of finite ``values``: ``np.median``'s value, bit for bit, whenever the
    middle pair's sum is finite; ``a / 2 + b / 2`` where that sum overflows (two values
    near the largest float), instead of numpy's ``inf`` and its ``RuntimeWarning``."""
    ordered = np.sort(np.asarray(values, dtype=float))
    n = len(ordered)
    if n == 0:
        raise ValueError("median of no values")
    a, b = float(ordered[(n - 1) // 2]), float(ordered[n // 2])
    total = a + b  # a Python float: no numpy warning on overflow
    return total / 2 if math.isfinite(total) else a / 2 + b / 2
