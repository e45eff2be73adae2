"""Set-up steps of a round on the network clock, against what they replace: the
families of streams (rows of gates, :func:`~sim.engine.netclock.chains._distinct_rows`
against ``np.unique(axis=0)``), each flow's next piece on its connection
(:func:`~sim.engine.netclock.round_state._single_follower`) and the flows after each
(:func:`~sim.engine.netclock.round_state._followers`, against the CSR index it stands in
for)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sim.engine.netclock.chains import _distinct_rows
from sim.engine.netclock.round_state import _followers, _Index, _single_follower


@st.composite
def gate_rows(draw: st.DrawFn) -> np.ndarray:
    """Rows of gates: families' sequences repeated (the plans' case), or any rows."""
    k = draw(st.integers(1, 5))
    if draw(st.booleans()):
        return draw(hnp.arrays(np.intp, (draw(st.integers(1, 30)), k), elements=st.integers(0, 6)))
    families = draw(st.integers(1, 6))
    gates = draw(st.permutations(range(families * k)))
    seqs = np.array(gates, dtype=np.intp).reshape(families, k)
    which = draw(st.lists(st.integers(0, families - 1), min_size=1, max_size=40))
    return seqs[which]


@given(gate_rows())
def test_distinct_rows_is_numpys_unique_of_rows(rows: np.ndarray) -> None:
    seqs, inverse = _distinct_rows(rows)
    expected_seqs, expected_inverse = np.unique(rows, axis=0, return_inverse=True)
    assert seqs.dtype == expected_seqs.dtype
    np.testing.assert_array_equal(seqs, expected_seqs)
    np.testing.assert_array_equal(inverse, expected_inverse.reshape(-1))
    assert inverse.shape == (rows.shape[0],)


def test_distinct_rows_sharing_a_first_gate_are_told_apart() -> None:
    rows = np.array([[3, 1], [3, 2], [0, 5], [3, 1]])
    seqs, inverse = _distinct_rows(rows)
    np.testing.assert_array_equal(seqs, [[0, 5], [3, 1], [3, 2]])
    np.testing.assert_array_equal(inverse, [1, 2, 0, 1])


PREVIOUS = st.integers(1, 40).flatmap(
    lambda n: st.lists(st.integers(-1, n - 1), min_size=n, max_size=n)
)


@given(PREVIOUS)
def test_single_follower_inverts_previous_or_refuses_two_followers(previous: list[int]) -> None:
    prev = np.array(previous, dtype=np.intp)
    n = prev.size
    listed = prev[prev >= 0]
    if np.unique(listed).size != listed.size:
        with pytest.raises(ValueError, match="previous piece of two flows"):
            _single_follower(prev, n)
        return
    follower = _single_follower(prev, n)
    for i in range(n):
        j = np.flatnonzero(prev == i)
        assert follower[i] == (j[0] if j.size else -1)


@given(PREVIOUS, st.integers(1, 3))
def test_the_flows_after_each_are_the_index_of_after_or_none(after: list[int], most: int) -> None:
    keys = np.array(after, dtype=np.intp)
    n = keys.size
    index = _Index(keys, n)
    followers = _followers(keys, n, most)
    if any(len(index.of(i)) > most for i in range(n)):
        assert followers is None
        return
    assert followers is not None
    assert followers.shape == (n, most)
    for i in range(n):
        listed = index.of(i)
        assert followers[i].tolist() == listed + [-1] * (most - len(listed))
