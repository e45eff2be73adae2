"""λ₂ by shift-invert Lanczos (graphs over ``DENSE_MAX_PEERS``) is the same bit for bit
on every call: ARPACK's default start vector comes from a generator whose state persists
across calls in one process, so a sweep's runs of one scenario differed in the last bits
of a2cid2's η and α̃."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from protocols._spectra import DENSE_MAX_PEERS, _sparse


def ring_laplacian(n: int, rng: np.random.Generator) -> sp.csr_matrix:
    i = np.arange(n)
    w = rng.uniform(0.5, 2.0, n)
    a = sp.coo_matrix((w, (i, (i + 1) % n)), shape=(n, n))
    a = (a + a.T).tocsr()
    return (sp.diags(np.asarray(a.sum(axis=1)).ravel()) - a).tocsr()


def test_sparse_lambda2_is_identical_on_every_call():
    n = 2 * DENSE_MAX_PEERS + 3
    lap = ring_laplacian(n, np.random.default_rng(1))
    edges = np.stack([np.arange(n), (np.arange(n) + 1) % n], axis=1)
    first = _sparse(lap, edges)
    for _ in range(4):
        assert _sparse(lap, edges) == first
