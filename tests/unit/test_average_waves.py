"""``average_waves`` (sim.kernels.pairwise): the compiled loop over exact pairwise
averages gives the numpy waves' bits, float64 and float32, NaN and inf included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols._edge_clocks import waves
from sim.kernels.pairwise import average_waves, compiled_average
from tests.strategies import pair_sequences, peer_counts, vectors

pytest.importorskip("numba")


@st.composite
def cases(draw: st.DrawFn):
    n = draw(peer_counts(2, 24))
    dim = draw(st.integers(1, 9))
    x = draw(vectors(n, dim))
    i, j = draw(pair_sequences(n))
    if draw(st.booleans()) and x.size:
        x.flat[draw(st.integers(0, x.size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    return x.astype(draw(st.sampled_from([np.float64, np.float32]))), i, j


@settings(max_examples=200, deadline=None)
@given(cases())
def test_the_compiled_loop_gives_the_waves_bits(case):
    x, i, j = case
    plan = waves(i, j)
    with np.errstate(invalid="ignore", over="ignore"):  # inf − inf: NaN, as in the loop
        numpy_path = average_waves(x.copy(), i, j, plan)
    compiled = average_waves(x.copy(), i, j, plan, compiled_average())
    assert compiled.dtype == numpy_path.dtype == x.dtype
    assert compiled.tobytes() == numpy_path.tobytes()


def test_it_is_the_pairwise_average_in_order():
    x = np.array([[0.0], [4.0], [8.0]])
    i, j = np.array([0, 1]), np.array([1, 2])
    out = average_waves(x, i, j, waves(i, j), compiled_average())
    assert out is x  # in place
    assert x.ravel().tolist() == [2.0, 5.0, 5.0]  # (0,1) → 2, 2; then (1,2) → 5, 5


def test_arrays_it_cannot_take_go_the_numpy_way():
    x = np.asfortranarray(np.arange(12.0).reshape(6, 2))
    i, j = np.array([0, 2]), np.array([1, 3])
    expected = average_waves(x.copy(order="C"), i, j, waves(i, j))
    out = average_waves(x, i, j, waves(i, j), compiled_average())
    assert np.array_equal(out, expected)
