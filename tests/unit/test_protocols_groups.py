"""random_groups and all_reduce: who averages with whom, and what it costs."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from protocols.all_reduce import AllReduce, AllReduceParams
from protocols.contract import Context, State
from protocols.random_groups import RandomGroups, RandomGroupsParams, random_partition


def context(n: int, dim: int = 1, seed: int = 0) -> Context:
    return Context(n, dim, 8, np.random.default_rng(seed))


def state(n: int, dim: int = 1, seed: int = 1) -> State:
    return State(x=np.random.default_rng(seed).normal(size=(n, dim)))


@pytest.mark.parametrize(
    ("n", "size", "expected"),
    [
        (12, 4, [4, 4, 4]),
        (10, 4, [5, 5]),
        (7, 4, [7]),
        (3, 4, [3]),
        (11, 3, [4, 4, 3]),
        (5, 1, [1] * 5),
    ],
)
def test_random_partition_sizes_put_leftovers_round_robin(n, size, expected):
    groups = random_partition(np.arange(n), size, n)
    assert groups.counts.tolist() == expected
    assert sorted(groups.members.tolist()) == list(range(n))


def test_random_partition_keeps_the_shuffled_blocks():
    rows = np.array([5, 3, 0, 4, 1, 2, 6])
    groups = random_partition(rows, 3, 7)
    first = groups.members[groups.member_group == 0].tolist()
    second = groups.members[groups.member_group == 1].tolist()
    assert first == [5, 3, 0, 6]
    assert second == [4, 1, 2]


def test_random_groups_average_each_group_and_skip_absent_peers():
    protocol = RandomGroups(RandomGroupsParams(group_size=3), context(10))
    st = state(10)
    x = st.x.copy()
    present = np.ones(10, dtype=bool)
    present[[2, 7]] = False
    stats = protocol.round(st, present, 0)
    assert np.array_equal(st.x[~present], x[~present])
    values, counts = np.unique(st.x[present].round(12), return_counts=True)
    assert sorted(counts.tolist()) == [4, 4]  # 8 present peers → two groups of 4
    assert stats.bytes_sent == 2 * 2 * 3 * 8
    assert stats.messages == 2 * 2 * 4 * 3
    assert values.size == 2


def test_fewer_present_peers_than_the_group_size_form_one_group():
    protocol = RandomGroups(RandomGroupsParams(group_size=8), context(5))
    st = state(5)
    mean = st.x.mean(axis=0)
    protocol.round(st, np.ones(5, dtype=bool), 0)
    np.testing.assert_allclose(st.x, np.tile(mean, (5, 1)))


def test_groups_of_one_change_nothing_and_cost_nothing():
    protocol = RandomGroups(RandomGroupsParams(group_size=1), context(6))
    st = state(6)
    x = st.x.copy()
    stats = protocol.round(st, np.ones(6, dtype=bool), 0)
    assert np.array_equal(st.x, x)
    assert (stats.bytes_sent, stats.messages) == (0.0, 0)


def test_random_groups_rejects_a_zero_group_size():
    with pytest.raises(ValidationError, match="group_size"):
        RandomGroupsParams(group_size=0)


def test_all_reduce_gives_everyone_the_exact_mean_when_all_are_present():
    protocol = AllReduce(AllReduceParams(), context(7, dim=3))
    st = state(7, dim=3)
    mean = st.x.mean(axis=0)
    stats = protocol.round(st, np.ones(7, dtype=bool), 0)
    assert np.all(st.x == st.x[0])
    np.testing.assert_allclose(st.x[0], mean, rtol=1e-14)
    assert stats.bytes_sent == 2 * 6 * 3 * 8
    assert stats.messages == 2 * 7 * 6


def test_all_reduce_changes_nothing_when_anyone_is_absent():
    protocol = AllReduce(AllReduceParams(), context(7))
    st = state(7)
    x = st.x.copy()
    present = np.ones(7, dtype=bool)
    present[3] = False
    stats = protocol.round(st, present, 0)
    assert np.array_equal(st.x, x)
    assert (stats.bytes_sent, stats.messages) == (0.0, 0)
