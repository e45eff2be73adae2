"""Load-balanced butterfly shares against hand-solved linear programs (protocols/_load_balance)."""

from __future__ import annotations

import numpy as np
import pytest

from protocols._load_balance import (
    butterfly_time_s,
    lp_shares,
    member_bandwidth_bytes_per_s,
    member_bytes,
    part_bounds,
    whole_coordinates,
)

GBIT_PER_S = 1.25e8  # bytes/s
MB = 1e6
INF = float("inf")


@pytest.mark.parametrize("g", [3, 4, 7, 16])
def test_equal_bandwidths_give_exactly_equal_shares(g):
    shares = lp_shares(np.full(g, GBIT_PER_S), 100 * MB)
    assert np.all(shares == 1.0 / g)


def test_one_slower_member_of_three_gets_a_smaller_share():
    # r = b_fast/b = (1, 1, 1.25): 1 + w_f = τ = 1.25·(1 + w_s), 2·w_f + w_s = 1
    # ⇒ τ = 10/7, w = (3/7, 3/7, 1/7)
    shares = lp_shares(np.array([1.0, 1.0, 0.8]) * GBIT_PER_S, 100 * MB)
    np.testing.assert_allclose(shares, [3 / 7, 3 / 7, 1 / 7], rtol=0, atol=1e-9)


def test_one_slower_member_of_four_gets_a_smaller_share():
    # r = (1, 1, 1, 4/3): 1 + 2·w_f = τ = (4/3)·(1 + 2·w_s), 3·w_f + w_s = 1
    # ⇒ τ = 8/5, w = (0.3, 0.3, 0.3, 0.1)
    bandwidth = np.array([1.0, 1.0, 1.0, 0.75]) * GBIT_PER_S
    shares = lp_shares(bandwidth, 100 * MB)
    np.testing.assert_allclose(shares, [0.3, 0.3, 0.3, 0.1], rtol=0, atol=1e-9)
    assert butterfly_time_s(bandwidth, shares, 100 * MB) == pytest.approx(1.6 * 0.8, rel=1e-9)


def test_a_much_slower_member_reduces_nothing_and_sets_the_time():
    # its own S/b = 8 s exceeds what the fast three need for the whole vector (S·(5/3)/b)
    bandwidth = np.array([1.0, 1.0, 1.0, 0.1]) * GBIT_PER_S
    shares = lp_shares(bandwidth, 100 * MB)
    np.testing.assert_array_equal(shares, [1 / 3, 1 / 3, 1 / 3, 0.0])
    assert butterfly_time_s(bandwidth, shares, 100 * MB) == pytest.approx(8.0, rel=1e-12)
    assert butterfly_time_s(bandwidth, np.full(4, 0.25), 100 * MB) == pytest.approx(12.0)


def test_zero_bandwidth_members_reduce_nothing():
    shares = lp_shares(np.array([GBIT_PER_S, 0.0, GBIT_PER_S, GBIT_PER_S]), 100 * MB)
    np.testing.assert_array_equal(shares, [1 / 3, 0.0, 1 / 3, 1 / 3])


def test_client_members_reduce_nothing_and_the_others_split_equally():
    reducer = np.array([True, False, True, True])
    shares = lp_shares(np.full(4, GBIT_PER_S), 100 * MB, reducer)
    np.testing.assert_array_equal(shares, [1 / 3, 0.0, 1 / 3, 1 / 3])


def test_a_slow_client_leaves_the_equal_split_optimal():
    reducer = np.array([True, True, True, False])
    bandwidth = np.array([1.0, 1.0, 1.0, 0.1]) * GBIT_PER_S
    np.testing.assert_array_equal(lp_shares(bandwidth, 100 * MB, reducer), [1 / 3] * 3 + [0.0])


def test_an_infinite_bandwidth_member_takes_everything():
    shares = lp_shares(np.array([INF, GBIT_PER_S, GBIT_PER_S]), 100 * MB)
    np.testing.assert_array_equal(shares, [1.0, 0.0, 0.0])


def test_infinite_bandwidth_members_split_equally():
    shares = lp_shares(np.array([INF, GBIT_PER_S, INF]), 100 * MB)
    np.testing.assert_array_equal(shares, [0.5, 0.0, 0.5])
    np.testing.assert_array_equal(lp_shares(np.full(3, INF), 100 * MB), [1 / 3] * 3)


def test_a_group_of_one_reduces_everything():
    np.testing.assert_array_equal(lp_shares(np.array([GBIT_PER_S]), 100 * MB), [1.0])
    assert butterfly_time_s(np.array([GBIT_PER_S]), np.array([1.0]), 100 * MB) == 0.0


def test_a_group_of_two_splits_equally_whatever_the_bandwidths():
    np.testing.assert_array_equal(lp_shares(np.array([1e9, 1e6]), 100 * MB), [0.5, 0.5])
    np.testing.assert_array_equal(
        lp_shares(np.array([1e9, 1e6]), 100 * MB, np.array([False, True])), [0.0, 1.0]
    )


def test_no_possible_reducer_is_an_error():
    with pytest.raises(ValueError, match="no member can reduce"):
        lp_shares(np.array([0.0, GBIT_PER_S]), 100 * MB, np.array([True, False]))


@pytest.mark.parametrize(
    "bandwidth", [np.array([1.0, np.nan, 1.0]), np.array([1.0, -1.0, 1.0]), np.ones((2, 2))]
)
def test_bad_bandwidths_are_errors(bandwidth):
    with pytest.raises(ValueError, match="bandwidth_bytes_per_s"):
        lp_shares(bandwidth, 100 * MB)


def test_shares_do_not_depend_on_the_vector_size():
    bandwidth = np.array([1.0, 1.0, 1.0, 0.75]) * GBIT_PER_S
    np.testing.assert_allclose(lp_shares(bandwidth, 1.0), lp_shares(bandwidth, 1e12), atol=1e-12)


def test_member_bandwidth_is_the_smaller_direction():
    got = member_bandwidth_bytes_per_s(np.array([1e6, 5e6, INF]), np.array([2e6, 1e6, 3e6]))
    np.testing.assert_array_equal(got, [1e6, 1e6, 3e6])


def test_member_bytes_and_time_follow_the_closed_form():
    shares = np.array([0.5, 0.25, 0.25, 0.0])
    np.testing.assert_array_equal(member_bytes(shares, 8.0), [16.0, 12.0, 12.0, 8.0])
    bandwidth = np.array([4.0, 4.0, 2.0, 1.0])
    assert butterfly_time_s(bandwidth, shares, 8.0) == 8.0
    assert butterfly_time_s(np.array([4.0, 0.0, 2.0, 1.0]), shares, 8.0) == INF


def test_whole_coordinates_use_the_largest_remainders():
    # exact 2.1, 2.1, 2.1, 0.7: floors 2, 2, 2, 0 and the one left goes to the 0.7
    counts = whole_coordinates(np.array([0.3, 0.3, 0.3, 0.1]), 7)
    np.testing.assert_array_equal(counts, [2, 2, 2, 1])


def test_whole_coordinates_break_ties_by_member_order():
    np.testing.assert_array_equal(whole_coordinates(np.full(3, 1 / 3), 4), [2, 1, 1])
    np.testing.assert_array_equal(whole_coordinates(np.full(3, 1 / 3), 5), [2, 2, 1])


def test_members_without_share_get_no_coordinates():
    counts = whole_coordinates(np.array([0.5, 0.0, 0.5]), 3)
    np.testing.assert_array_equal(counts, [2, 0, 1])


def test_bad_shares_are_errors():
    with pytest.raises(ValueError, match="shares"):
        whole_coordinates(np.array([0.0, 0.0]), 3)


def test_part_bounds_are_consecutive_slices():
    starts, stops = part_bounds(np.array([2, 0, 3]))
    np.testing.assert_array_equal(starts, [0, 2, 2])
    np.testing.assert_array_equal(stops, [2, 2, 5])
