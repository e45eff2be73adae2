"""sim.kernels.bounds.all_within: the numba loop answers what numpy's max and min answer
(NaN, ±inf, values at the bound, float32 and float64, any size)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sim.kernels.bounds as bounds

pytest.importorskip("numba")

BOUND = 1e100
SPECIAL = [np.nan, np.inf, -np.inf, BOUND, -BOUND, 2e100, -0.0, 1e-300]


def by_numpy(a: np.ndarray, bound: float) -> bool:
    return a.size > 0 and max(abs(float(a.max())), abs(float(a.min()))) <= bound


@st.composite
def arrays(draw: st.DrawFn) -> np.ndarray:
    rows = draw(st.integers(0, 300))
    dim = draw(st.integers(1, 9))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    seed = draw(st.integers(0, 2**32 - 1))
    a = np.random.default_rng(seed).normal(size=(rows, dim)) * draw(st.sampled_from([1, 1e90]))
    for value in draw(st.lists(st.sampled_from(SPECIAL), max_size=3)):
        if a.size:
            a.reshape(-1)[draw(st.integers(0, a.size - 1))] = value
    with np.errstate(over="ignore"):  # float32: 1e90 and the bound overflow to inf
        return a.astype(dtype)


@given(arrays(), st.sampled_from([BOUND, 1.0, np.inf]))
def test_the_loop_answers_what_max_and_min_answer(a, bound):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounds, "JIT_MIN_ELEMENTS", 1)
        with np.errstate(over="ignore", invalid="ignore"):
            assert bounds.all_within(a, bound) == by_numpy(a, bound)


def test_large_arrays_take_the_loop():
    a = np.zeros(bounds.JIT_MIN_ELEMENTS)
    assert bounds.all_within(a, BOUND)
    a[-1] = np.nan  # the last element counts: no early exit that skips it
    assert not bounds.all_within(a, BOUND)
    a[-1] = -2e100
    assert not bounds.all_within(a, BOUND)
    assert bounds.all_within(a[::2], BOUND)  # not contiguous: numpy's reductions
