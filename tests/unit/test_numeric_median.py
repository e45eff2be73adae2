"""sim.core.numeric.median: numpy's median bit for bit, without its overflow."""

import warnings

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sim.core.numeric import median

finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False)


@given(arrays(np.float64, st.integers(1, 40), elements=finite))
def test_it_is_numpys_median_bit_for_bit(values):
    assert median(values) == float(np.median(values))


def test_two_values_near_the_largest_float_do_not_overflow():
    top = np.finfo(float).max
    values = np.array([1e308, top, 1.5e308, top])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's RuntimeWarning fails the test
        value = median(values)
    assert value == top / 2 + 1.5e308 / 2
    assert 1.5e308 <= value <= top
