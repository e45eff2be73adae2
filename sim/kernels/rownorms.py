"""Centred squared norms of many rows, fused: the tracker's batches of events
(:mod:`sim.engine.observe.segments`) need, for each row r changed by an event,
‖a_r − p‖² (and, for decaying rows, (a_r − p)·(b_r − q) and ‖b_r − q‖²).

numpy computes these as ``(a - p)`` then ``np.multiply(u, v).sum(axis=-1)``: a
temporary the size of the batch per step, six passes over memory for decaying rows. The
numba loop (:mod:`sim.kernels._rownorms_jit`, the extra ``fast``) reads each row once and
gives the same bits: the same IEEE subtraction and product per coordinate, and each row
summed as numpy's pairwise sum adds a contiguous vector. It runs for batches of at least
:data:`JIT_MIN_ELEMENTS` values (a small run never imports numba); the numpy path stays
for everything else.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from sim.core.optional import optional_module

#: Smallest rows × columns handed to the numba loop.
JIT_MIN_ELEMENTS = 1 << 16


def jit_module() -> ModuleType | None:
    """:mod:`sim.kernels._rownorms_jit` when numba imports, else None."""
    return optional_module("sim.kernels._rownorms_jit")


def rowdots(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Σ_j u_ij·v_ij per row, numpy's pairwise sum over the contiguous last axis: a row's
    value does not depend on the other rows nor on how many there are (unlike einsum's or
    BLAS's row dots), and a vector's ``np.multiply(u, v).sum()`` gives the same bits."""
    return np.multiply(u, v).sum(axis=-1)


def _jit(a: np.ndarray) -> ModuleType | None:
    if a.size < JIT_MIN_ELEMENTS or not a.flags.c_contiguous:
        return None
    return jit_module()


def centred_norms(a: np.ndarray, p: np.ndarray) -> np.ndarray:
    """‖float64(a_r) − p‖² for each row of the 2-D array ``a`` ((rows,) float64)."""
    jit = _jit(a)
    if jit is None:
        centred = a.astype(np.float64, copy=False) - p
        return rowdots(centred, centred)
    out = np.empty(a.shape[0])
    jit.centred_norms(a, np.ascontiguousarray(p, dtype=np.float64), out)
    return out


def decaying_norms(
    a: np.ndarray, p: np.ndarray, d: np.ndarray, grow: np.ndarray, q: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """With A_r = a_r − p and B_r = d_r·grow_r − q for each row r of the 2-D float64
    arrays ``a`` and ``d`` (``grow``: (rows,)): (‖A_r‖², A_r·B_r, ‖B_r‖²)."""
    jit = _jit(a) if a.dtype == np.float64 and d.dtype == np.float64 else None
    if jit is None or not d.flags.c_contiguous:
        centred = a - p
        centred_b = d * grow[:, None] - q
        return (
            rowdots(centred, centred),
            rowdots(centred, centred_b),
            rowdots(centred_b, centred_b),
        )
    out = np.empty((3, a.shape[0]))
    jit.decaying_norms(
        a,
        np.ascontiguousarray(p, dtype=np.float64),
        d,
        np.ascontiguousarray(grow, dtype=np.float64),
        np.ascontiguousarray(q, dtype=np.float64),
        out,
    )
    return out[0], out[1], out[2]
