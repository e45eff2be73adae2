"""The numpy paths of the logistic kernels give the values of the plain formula, bit for bit.

:mod:`sim.kernels.logistic_np` reorders memory (classes-first logits, samples gathered
in cache-sized blocks, the update added into the models in place) but not arithmetic:
``reference_grad`` below is the straightforward numpy formula (the kernel as it was
before those changes), and every path must equal it exactly, for float64 and float32,
one and many blocks, a common and a per-sample shift, batches of one and more.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.kernels import logistic_np
from sim.kernels.objectives import logistic_grad, logistic_grad_gather

SPAN = {np.dtype(np.float64): 690.0, np.dtype(np.float32): 80.0}


def reference_grad(w, features, labels, weights):
    """Σ_b a_pb (softmax(W_p x_pb) − e_y) x_pbᵀ: logits (P, C, B), one common shift when
    the logits lie within the span, sums over axis 1, a scatter for the one-hot term."""
    logits = np.matmul(w, features.transpose(0, 2, 1))
    top = logits.max(initial=-np.inf)
    if top - logits.min(initial=np.inf) <= SPAN[logits.dtype]:
        logits -= top
    else:
        logits -= logits.max(axis=1, keepdims=True)
    exp = np.exp(logits, out=logits)
    exp *= weights[:, None, :] / exp.sum(axis=1, keepdims=True)
    n_peers, classes, batch = exp.shape
    at = (np.arange(n_peers)[:, None] * classes + labels) * batch + np.arange(batch)
    exp.reshape(-1)[at.reshape(-1)] -= weights.reshape(-1)
    return np.matmul(exp, features)


@st.composite
def problems(draw: st.DrawFn):
    """(W, table, table labels, index, weights) of P peers on an N-sample table."""
    p, b = draw(st.integers(1, 40)), draw(st.integers(1, 9))
    c, f, n = draw(st.integers(1, 6)), draw(st.integers(1, 7)), draw(st.integers(1, 50))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([0.1, 1.0, 30.0, 300.0]))  # 300: a per-sample shift
    w = (rng.standard_normal((p, c, f)) * scale).astype(dtype)
    table = rng.standard_normal((n, f)).astype(dtype)
    labels = rng.integers(0, c, n)
    index = rng.integers(0, n, (p, b))
    weights = (rng.random((p, b)) - 0.5).astype(dtype)
    return w, table, labels, index, weights


@given(problems(), st.sampled_from([1, 7, 64, logistic_np.CACHE_ELEMENTS]))
def test_every_numpy_path_equals_the_reference_bit_for_bit(problem, cache_elements):
    w, table, labels, index, weights = problem
    features, y = table[index], labels[index]
    expected = reference_grad(w, features, y, weights)
    np.testing.assert_array_equal(logistic_grad(w, features, y, weights), expected)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logistic_np, "CACHE_ELEMENTS", cache_elements)
        np.testing.assert_array_equal(logistic_grad_gather(w, table, labels, index, weights),
                                      expected)  # fmt: skip
        start = np.random.default_rng(1).standard_normal(w.shape).astype(w.dtype)
        added = logistic_grad_gather(w, table, labels, index, weights, add_to=start.copy())
        np.testing.assert_array_equal(added, start + expected)
        models = w.copy()  # the models themselves, moved by their own gradients
        logistic_grad_gather(models, table, labels, index, weights, add_to=models)
        np.testing.assert_array_equal(models, w + expected)


def test_blocks_cover_every_peer_once_with_a_bounded_buffer():
    table, batch = np.zeros((10, 5)), 3
    flat = np.zeros(100 * batch, dtype=np.int64)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logistic_np, "CACHE_ELEMENTS", 64)
        blocks = logistic_np._Blocks(table, flat, batch)
    assert blocks.step == 4
    assert blocks.buffer.size <= 64
    covered = np.concatenate([np.arange(a, b) for a, b in blocks.bounds])
    np.testing.assert_array_equal(covered, np.arange(100))


@pytest.mark.parametrize("bad", [-1, 4])
def test_a_sample_index_outside_the_table_is_refused(bad):
    w, table = np.zeros((2, 3, 4)), np.zeros((4, 4))
    index = np.array([[0, 1], [2, bad]])
    with pytest.raises(IndexError, match="out of range 0 … 3"):
        logistic_grad_gather(w, table, np.zeros(4, dtype=np.int64), index, np.ones((2, 2)))


def test_batches_of_two_or_more_keep_their_logits_classes_first():
    assert (
        logistic_np.logits_array(5, 3, 2, np.dtype(np.float64))
        .transpose(1, 0, 2)
        .flags["C_CONTIGUOUS"]
    )
    assert logistic_np.logits_array(5, 3, 1, np.dtype(np.float64)).flags["C_CONTIGUOUS"]
