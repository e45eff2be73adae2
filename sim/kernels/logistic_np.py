"""numpy paths of the logistic kernels: in place, in cache-sized blocks, bit for bit.

:mod:`sim.kernels.objectives` calls these for numpy arrays. They compute the values of
its array-API formulas up to the order of operations that the tests pin down, so that
results do not depend on which path ran:

- the logits of (P, C, B) are stored classes first, (C, P, B) (for B, C ≥ 2), so that the
  softmax's class sums are C − 1 additions of contiguous (P, B) rows and its scaling a
  broadcast of one (P, B) row (each sample's sum is still taken in order c = 0, 1, …,
  as numpy's ``sum(axis=1)`` of the (P, C, B) layout takes it when B > 1);
- the one-hot term is a scatter of one entry per sample, not a (P, C, B) indicator;
- :func:`grad_gather` gathers the samples in blocks of :data:`CACHE_ELEMENTS`, twice
  (for the logits, then for the gradients), so that a block is still in cache when its
  product reads it; every peer's products are the BLAS calls of :func:`grad`.
"""

from __future__ import annotations

import functools

import numpy as np

#: Largest spread of all logits for which one common shift is safe: e^(−span) stays a
#: normal number, so no sample's exponentials all underflow (float64, float32).
SHIFT_SPAN = {np.dtype(np.float64): 690.0, np.dtype(np.float32): 80.0}

#: Sample elements :func:`grad_gather` gathers at a time (512 KiB of float64, which
#: stays in a core's cache between the gather and the product that reads it).
CACHE_ELEMENTS = 64 * 1024


def shift(logits: np.ndarray, axis: int) -> np.ndarray:
    """Subtract in place the largest of all ``logits`` when all lie within
    :data:`SHIFT_SPAN` (two whole-array reductions; softmax is shift-invariant, so only
    round-off differs), else each sample's largest (over the class ``axis``)."""
    top, span = logits.max(initial=-np.inf), SHIFT_SPAN.get(logits.dtype, 0.0)
    if top - logits.min(initial=np.inf) <= span:
        logits -= top
    else:
        logits -= logits.max(axis=axis, keepdims=True)
    return logits


def logits_array(n_peers: int, classes: int, batch: int, dtype: np.dtype) -> np.ndarray:
    """An uninitialised (P, C, B) array for logits: a view of (C, P, B) storage when
    B, C ≥ 2 (what :func:`weighted_residual` runs fastest on), plain (P, C, B) else."""
    if batch >= 2 and classes >= 2:
        return np.empty((classes, n_peers, batch), dtype=dtype).transpose(1, 0, 2)
    return np.empty((n_peers, classes, batch), dtype=dtype)


def weighted_residual(logits: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """a·(softmax(z) − onehot(y)) of (P, C, B) ``logits`` (overwritten and returned),
    computed as e·(a/Σe) − a·onehot; ``labels``, ``weights`` are (P, B)."""
    n_peers, classes, batch = logits.shape
    by_class = logits.transpose(1, 0, 2)
    if batch >= 2 and classes >= 2 and by_class.flags.c_contiguous:
        exp = np.exp(shift(by_class, 0), out=by_class)
        sums = exp[0] + exp[1]
        for c in range(2, classes):
            sums += exp[c]
        exp *= weights / sums
        at = labels * (n_peers * batch) + _positions(n_peers * batch).reshape(n_peers, batch)
    else:  # B = 1: numpy sums a contiguous class axis pairwise, so keep its layout
        logits = np.ascontiguousarray(logits)  # the scatter below needs a flat view
        exp = np.exp(shift(logits, 1), out=logits)
        exp *= weights[:, None, :] / exp.sum(axis=1, keepdims=True)
        at = (np.arange(n_peers)[:, None] * classes + labels) * batch + np.arange(batch)
    flat, at = exp.reshape(-1), at.reshape(-1)  # one entry per sample: a scatter
    flat.put(at, flat.take(at) - weights.reshape(-1))
    return logits


def _for_product(residual: np.ndarray, n_features: int) -> np.ndarray:
    """``residual`` as the left operand of the gradient product: as it is when numpy
    makes that product a BLAS gemm (whose values do not depend on the operand's row
    stride: ``tests/property/test_logistic_np.py``), a C-ordered copy when a dimension
    of 1 makes it a gemv or a dot (whose kernels may)."""
    if min(residual.shape[1:]) >= 2 and n_features >= 2:
        return residual
    return np.ascontiguousarray(residual)


@functools.lru_cache(maxsize=4)
def _positions(size: int) -> np.ndarray:
    """``np.arange(size)``, made once per size (read-only)."""
    positions = np.arange(size)
    positions.setflags(write=False)
    return positions


def grad(w: np.ndarray, features: np.ndarray, labels: np.ndarray, weights: np.ndarray
         ) -> np.ndarray:  # fmt: skip
    """:func:`~sim.kernels.objectives.logistic_grad` of numpy arrays."""
    n_peers, batch = labels.shape
    logits = logits_array(n_peers, w.shape[1], batch, np.result_type(w, features))
    np.matmul(w, features.transpose(0, 2, 1), out=logits)
    residual = _for_product(weighted_residual(logits, labels, weights), features.shape[-1])
    return np.matmul(residual, features)


def grad_gather(w: np.ndarray, table: np.ndarray, table_labels: np.ndarray, index: np.ndarray,
                weights: np.ndarray, add_to: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """:func:`~sim.kernels.objectives.logistic_grad_gather` of numpy arrays: the values
    of :func:`grad` on ``table[index]``, bit for bit, added to ``add_to`` in place when
    it is given (a (P, C, F) array that may share memory with ``w``: all logits are
    computed before anything is added)."""
    n_peers, batch = index.shape
    flat = index.reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= table.shape[0]):
        raise IndexError(f"sample index out of range 0 … {table.shape[0] - 1}")
    blocks = _Blocks(table, flat, batch)
    logits = logits_array(n_peers, w.shape[1], batch, np.result_type(w, table))
    for a, b in blocks.bounds:
        np.matmul(w[a:b], blocks.samples(a, b).transpose(0, 2, 1), out=logits[a:b])
    labels = np.take(table_labels, flat).reshape(n_peers, batch)
    residual = _for_product(weighted_residual(logits, labels, weights), table.shape[1])
    out = add_to if add_to is not None else np.empty(w.shape, dtype=residual.dtype)
    part = None if add_to is None else np.empty((blocks.step, *w.shape[1:]), dtype=out.dtype)
    for a, b in blocks.bounds:
        if part is None:
            np.matmul(residual[a:b], blocks.samples(a, b), out=out[a:b])
        else:
            out[a:b] += np.matmul(residual[a:b], blocks.samples(a, b), out=part[: b - a])
    return out


class _Blocks:
    """Blocks of peers whose samples (``table`` rows ``flat``, B per peer) are gathered
    into one reused buffer of about :data:`CACHE_ELEMENTS` elements."""

    def __init__(self, table: np.ndarray, flat: np.ndarray, batch: int) -> None:
        n_peers = flat.size // batch if batch else 0
        self.step = max(1, min(n_peers, CACHE_ELEMENTS // max(1, batch * table.shape[1])))
        self.bounds = [(a, min(a + self.step, n_peers)) for a in range(0, n_peers, self.step)]
        self.table, self.flat, self.batch = table, flat, batch
        self.buffer = np.empty((self.step * batch, table.shape[1]), dtype=table.dtype)

    def samples(self, a: int, b: int) -> np.ndarray:
        """(b − a, B, F) samples of peers a … b − 1 (the buffer: valid until the next call)."""
        rows = self.flat[a * self.batch : b * self.batch]
        # indices were checked; "clip" lets take write into ``out`` without a copy
        part = np.take(self.table, rows, axis=0, out=self.buffer[: rows.size], mode="clip")
        return part.reshape(b - a, self.batch, self.table.shape[1])


__all__ = ["CACHE_ELEMENTS", "SHIFT_SPAN", "grad", "grad_gather", "logits_array", "shift",
           "weighted_residual"]  # fmt: skip
