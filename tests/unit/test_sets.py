"""sim.core.sets.unique_ints against np.unique: the same values, dtype and order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sim.core.sets import unique_ints

INTS = st.sampled_from([np.int64, np.int32, np.intp, np.uint8, np.bool_])


@given(INTS.flatmap(lambda t: hnp.arrays(t, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0))))
def test_unique_is_numpys(a):
    expected = np.unique(a)
    got = unique_ints(a)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_a_new_array_and_no_floats():
    a = np.array([3, 1, 3, 2])
    got = unique_ints(a)
    got[0] = 99
    assert a.tolist() == [3, 1, 3, 2]
    single = np.array([5])
    unique_ints(single)[0] = 7
    assert single.tolist() == [5]
    with pytest.raises(TypeError, match="integer"):
        unique_ints(np.array([1.0, np.nan]))
