"""Whether every value of an array is within a bound in magnitude (NaN never is): the
observer's health check between samples
(:func:`sim.engine.observe.observer.variance_is_finite`).

numpy reads the array twice (its max, then its min). The numba loop
(:mod:`sim.kernels._bounds_jit`, the extra ``fast``) reads it once, without branches, for
contiguous float32/float64 numpy arrays of at least :data:`JIT_MIN_ELEMENTS` values (a
small run never imports numba); it answers what the two reductions answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.core.optional import optional_module
from sim.kernels._xp import is_numpy, namespace

#: Smallest array handed to the numba loop.
JIT_MIN_ELEMENTS = 1 << 15
JIT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def all_within(a: Any, bound: float) -> bool:
    """True when ``a`` has an element and every element x has |x| ≤ ``bound`` (so none
    is NaN or infinite when ``bound`` is finite); ``a`` on any array-API backend."""
    if a.size == 0:
        return False
    if is_numpy(a):
        if a.size >= JIT_MIN_ELEMENTS and a.dtype in JIT_DTYPES and a.flags.c_contiguous:
            jit = optional_module("sim.kernels._bounds_jit")
            if jit is not None:
                return bool(jit.all_within(a.reshape(-1), float(bound)))
        top, bottom = float(a.max()), float(a.min())
    else:
        xp = namespace(a)
        top, bottom = float(xp.max(a)), float(xp.min(a))
    return max(abs(top), abs(bottom)) <= bound  # NaN compares False
