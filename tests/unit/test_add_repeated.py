"""``add_repeated`` (sim.network.flows): the batched count of closed-form flows' bytes
gives the floats of adding them one by one, in order, whatever the totals and amount."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.network.flows import EXACT_INTEGERS, add_repeated

TOTALS = st.one_of(
    st.integers(0, 10**6).map(float),  # whole numbers: the batched path
    st.floats(-1e6, 1e6, allow_nan=False),  # fractions and negatives: one by one
    st.sampled_from([EXACT_INTEGERS - 1024, EXACT_INTEGERS, float("inf"), float("nan")]),
)
AMOUNTS = st.one_of(
    st.sampled_from([512.0, 1.0, 0.0, 3.0, 1e9, 0.1, -2.0, 2.5]),
    st.floats(0, 1e12, allow_nan=False),
)


def one_by_one(totals: list[float], peers: list[int], amount: float) -> list[float]:
    out = list(totals)
    for peer in peers:
        out[peer] += amount
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(TOTALS, min_size=1, max_size=40).flatmap(
        lambda totals: st.tuples(
            st.just(totals),
            st.lists(st.integers(0, len(totals) - 1), max_size=300),
        )
    ),
    AMOUNTS,
)
def test_the_batched_sums_are_the_one_by_one_sums(case, amount):
    totals, peers = case
    expected = one_by_one(totals, peers, amount)
    got = list(totals)
    add_repeated(got, np.array(peers, dtype=np.intp), amount)
    assert [v.hex() if v == v else "nan" for v in got] == [
        v.hex() if v == v else "nan" for v in expected
    ]
    assert all(type(v) is float for v in got)


@pytest.mark.parametrize("peers", [1, 5, 200])  # the unique and the bincount branches
def test_additions_past_the_exact_bound_fall_back(peers):
    totals = [EXACT_INTEGERS - 601.0] * 10  # odd: past 2^53 the additions round
    rows = np.repeat(np.arange(10), peers)
    expected = one_by_one(totals, rows.tolist(), 513.0)
    add_repeated(totals, rows, 513.0)
    assert totals == expected


@pytest.mark.parametrize("peers", [1, 7, 200])
def test_a_fractional_total_falls_back(peers):
    totals = [0.9778201605158856] * 10  # 7 additions of 12288 round differently
    rows = np.repeat(np.arange(10), peers)
    expected = one_by_one(totals, rows.tolist(), 12288.0)
    add_repeated(totals, rows, 12288.0)
    assert totals == expected
