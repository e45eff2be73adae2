"""Properties of the load-balancing LP and of the rounding to whole coordinates."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linprog

from protocols._load_balance import (
    _optimal_tau,
    _time_ratio,
    butterfly_time_s,
    lp_shares,
    part_bounds,
    whole_coordinates,
)
from tests.strategies import group_bandwidths, permutations, share_vectors

VECTOR_BYTES = 4e6


def _equal_split(bandwidth: np.ndarray, reducer: np.ndarray) -> np.ndarray:
    eligible = reducer & (bandwidth > 0)
    return np.where(eligible, 1 / eligible.sum(), 0.0)


def _bisection_time_s(bandwidth: np.ndarray, reducer: np.ndarray) -> float:
    """T* without the LP: the least T ≥ max S/b_i at which the members' caps reach Σw = 1."""
    g = bandwidth.size
    if g <= 2:
        return butterfly_time_s(bandwidth, _equal_split(bandwidth, reducer), VECTOR_BYTES)
    finite = (bandwidth > 0) & np.isfinite(bandwidth)
    eligible = reducer & (bandwidth > 0)
    if np.any(eligible & ~np.isfinite(bandwidth)):
        return VECTOR_BYTES * np.max(1 / bandwidth[finite], initial=0.0)

    def enough(time_s: float) -> bool:
        caps = (time_s * bandwidth[eligible] / VECTOR_BYTES - 1) / (g - 2)
        return bool(np.maximum(caps, 0).sum() >= 1)

    low = VECTOR_BYTES * np.max(1 / bandwidth[finite])
    high = VECTOR_BYTES * (g - 1) / np.min(bandwidth[eligible])
    if enough(low):
        return float(low)
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return float(high)


def _highs_tau(ratio: np.ndarray, eligible: np.ndarray) -> float:
    """τ* from the linear program itself (variables w_0 … w_{g−1}, τ), solved by HiGHS."""
    g = ratio.size
    rows = np.flatnonzero(ratio > 0)
    a_ub = np.zeros((rows.size, g + 1))
    a_ub[np.arange(rows.size), rows] = ratio[rows] * (g - 2)
    a_ub[:, g] = -1.0
    bounds = [(0.0, None if ok else 0.0) for ok in eligible] + [(0.0, None)]
    result = linprog(
        np.append(np.zeros(g), 1.0),
        A_ub=a_ub,
        b_ub=-ratio[rows],
        A_eq=np.append(np.ones(g), 0.0)[None, :],
        b_eq=[1.0],
        bounds=bounds,
        method="highs",
    )
    assert result.status == 0, result.message
    return float(result.x[g])


@given(group_bandwidths())
def test_closed_form_optimum_is_the_linear_programs(members):
    bandwidth, reducer = members
    ratio, eligible = _time_ratio(bandwidth), reducer & (bandwidth > 0)
    if bandwidth.size <= 2 or not np.any(ratio > 0) or not eligible.any():
        return  # lp_shares needs no optimum: the equal split, or one member
    np.testing.assert_allclose(
        _optimal_tau(ratio, eligible), _highs_tau(ratio, eligible), rtol=1e-9
    )


@given(group_bandwidths())
def test_shares_are_a_distribution_on_the_possible_reducers(members):
    bandwidth, reducer = members
    shares = lp_shares(bandwidth, VECTOR_BYTES, reducer)
    assert np.all(shares >= 0)
    assert abs(shares.sum() - 1) < 1e-12
    if bandwidth.size > 1:
        assert np.all(shares[~reducer | (bandwidth == 0)] == 0)


@given(group_bandwidths())
def test_lp_time_is_never_above_the_equal_split(members):
    bandwidth, reducer = members
    lp_s = butterfly_time_s(bandwidth, lp_shares(bandwidth, VECTOR_BYTES, reducer), VECTOR_BYTES)
    equal_s = butterfly_time_s(bandwidth, _equal_split(bandwidth, reducer), VECTOR_BYTES)
    assert lp_s <= equal_s * (1 + 1e-9)


@given(group_bandwidths(max_members=6))
def test_lp_time_is_the_optimum_found_by_bisection(members):
    bandwidth, reducer = members
    if np.any(bandwidth == 0) and bandwidth.size > 1:
        return  # the time is infinite whatever the shares
    lp_s = butterfly_time_s(bandwidth, lp_shares(bandwidth, VECTOR_BYTES, reducer), VECTOR_BYTES)
    np.testing.assert_allclose(lp_s, _bisection_time_s(bandwidth, reducer), rtol=1e-9)


@given(st.data(), group_bandwidths())
def test_relabelling_members_permutes_the_shares(data, members):
    bandwidth, reducer = members
    order = data.draw(permutations(bandwidth.size))
    permuted = lp_shares(bandwidth[order], VECTOR_BYTES, reducer[order])
    np.testing.assert_allclose(
        permuted, lp_shares(bandwidth, VECTOR_BYTES, reducer)[order], atol=1e-12
    )


@given(share_vectors(), st.integers(0, 10**6))
def test_whole_coordinates_sum_to_dim_and_stay_within_one(shares, dim):
    counts = whole_coordinates(shares, dim)
    assert counts.sum() == dim
    assert np.all(np.abs(counts - shares * dim) < 1)
    assert np.all(counts[shares == 0] == 0)
    starts, stops = part_bounds(counts)
    assert starts[0] == 0
    assert stops[-1] == dim
    np.testing.assert_array_equal(starts[1:], stops[:-1])
