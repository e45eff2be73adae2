"""Invariants of the array kernels (validation.md §1), on numpy and array_api_strict."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import array_api_strict as xps
import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import sim.kernels.grouped as grouped_module
import sim.kernels.neighbours as neighbours_module
from sim.kernels import (
    Groups,
    a2cid2_exchange,
    ell_mix,
    group_mean,
    group_means,
    neighbour_mean,
    pairwise_delta,
    push_half,
)
from sim.kernels.compression import METHODS, roundtrip
from tests.strategies import (
    BOUND,
    disjoint_pairs,
    graphs,
    partitions,
    permutations,
    row_stochastic_tables,
    states,
    vectors,
)

#: Ways to cut a group average into tiles; every tiling must give the same invariants.
TILINGS = {
    "one_tile_per_bucket": {},
    "single_columns_row_order": {
        "GATHER_ELEMENTS": 0,
        "CACHE_ELEMENTS": 1,
        "MIN_BLOCK_COLUMNS": 1,
        "ROW_ORDER_MEMBERS": 0,
    },
}


@contextmanager
def tiling(name: str) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for attribute, value in TILINGS[name].items():
            patch.setattr(grouped_module, attribute, value)
        yield


def assert_sum_preserved(before: np.ndarray, after: np.ndarray, weights=None) -> None:
    """Σ_i w_i x_i unchanged to relative 1e-12 of Σ_i w_i |x_i| (per coordinate).

    The tiny absolute floor only matters for subnormal inputs, where round-off is absolute.
    """
    w = np.ones(len(before)) if weights is None else weights
    scale = (w[:, None] * np.abs(before)).sum(axis=0) + 1e-300
    drift = np.abs((w[:, None] * after).sum(axis=0) - (w[:, None] * before).sum(axis=0))
    assert np.all(drift <= 1e-12 * scale), (drift, scale)


def assert_var_not_increased(before: np.ndarray, after: np.ndarray) -> None:
    var0, var1 = before.var(axis=0).sum(), after.var(axis=0).sum()
    assert var1 <= var0 * (1 + 1e-12) + 1e-12 * float(np.mean(before**2)), (var0, var1)


def strict(x: np.ndarray):
    return xps.asarray(x)


# -- Groups ---------------------------------------------------------------------------


@given(st.data())
def test_groups_from_labels_are_the_label_classes_largest_first(data):
    n = data.draw(st.integers(1, 40))
    labels = data.draw(partitions(n))
    visit = data.draw(permutations(n))
    groups = Groups.from_labels(labels, visit)
    assert np.all(np.diff(groups.counts) <= 0)
    seen = set()
    for k in range(groups.n_groups):
        rows = groups.members[groups.member_group == k]
        assert len(set(labels[rows])) == 1
        assert labels[rows[0]] == groups.labels[k]
        assert list(rows) == [v for v in visit if labels[v] == groups.labels[k]]
        seen.update(rows.tolist())
    assert seen == set(np.flatnonzero(labels >= 0).tolist())


@given(st.data())
def test_buckets_hold_every_group_of_two_or_more_within_a_factor_two(data):
    n = data.draw(st.integers(1, 40))
    groups = Groups.from_labels(data.draw(partitions(n)))
    covered = []
    for first, stop in groups.buckets:
        sizes = groups.counts[first:stop]
        assert sizes.max() < 2 * sizes.min()
        rows = groups.padded_rows(first, stop)
        assert rows.shape == (stop - first, sizes.max())
        covered.extend(range(first, stop))
    assert covered == [k for k in range(groups.n_groups) if groups.counts[k] >= 2]


# -- group mean -----------------------------------------------------------------------


@pytest.mark.parametrize("name", TILINGS)
@given(data=st.data())
def test_group_mean_preserves_the_global_sum(name, data):
    x = data.draw(states())
    groups = Groups.from_labels(data.draw(partitions(len(x))))
    with tiling(name):
        assert_sum_preserved(x, group_mean(x.copy(), groups))


@pytest.mark.parametrize("name", TILINGS)
@given(data=st.data())
def test_group_mean_gives_every_member_the_same_mean_and_leaves_others(name, data):
    x = data.draw(states())
    labels = data.draw(partitions(len(x)))
    with tiling(name):
        y = group_mean(x.copy(), Groups.from_labels(labels))
    assert np.array_equal(y[labels < 0], x[labels < 0])
    for label in np.unique(labels[labels >= 0]):
        rows = labels == label
        assert np.all(y[rows] == y[rows][0])
        scale = np.abs(x[rows]).max() + 1e-300
        np.testing.assert_allclose(y[rows][0], x[rows].mean(axis=0), rtol=0, atol=1e-13 * scale)


@pytest.mark.parametrize("name", TILINGS)
@given(data=st.data())
def test_group_mean_is_the_same_on_numpy_and_array_api_strict(name, data):
    x = data.draw(states())
    groups = Groups.from_labels(data.draw(partitions(len(x))), data.draw(permutations(len(x))))
    weights = data.draw(st.none() | vectors(len(x), 1).map(lambda w: np.abs(w[:, 0]) + 0.5))
    with tiling(name):
        on_numpy = group_mean(x.copy(), groups, weights)
        on_strict = group_mean(strict(x), groups, weights)
    assert not isinstance(on_strict, np.ndarray)
    assert np.array_equal(on_numpy, np.asarray(on_strict))


@given(data=st.data())
def test_tilings_agree_to_round_off(data):
    x = data.draw(states())
    groups = Groups.from_labels(data.draw(partitions(len(x))))
    results = []
    for name in TILINGS:
        with tiling(name):
            results.append(group_mean(x.copy(), groups))
    scale = np.abs(x).max() + 1e-300
    for other in results[1:]:
        np.testing.assert_allclose(other, results[0], rtol=0, atol=1e-13 * scale)


@given(states())
def test_a_group_of_one_is_a_no_op(x):
    y = group_mean(x.copy(), Groups.from_labels(np.arange(len(x))))
    assert np.array_equal(y, x)


@pytest.mark.parametrize("name", TILINGS)
@given(data=st.data())
def test_group_mean_of_equal_vectors_changes_nothing(name, data):
    x = data.draw(states())
    x[:] = x[0]
    with tiling(name):
        y = group_mean(x.copy(), Groups.from_labels(data.draw(partitions(len(x)))))
    assert np.array_equal(y, x)


@given(data=st.data())
def test_group_mean_never_increases_var(data):
    x = data.draw(states())
    assert_var_not_increased(
        x, group_mean(x.copy(), Groups.from_labels(data.draw(partitions(len(x)))))
    )


@given(data=st.data())
def test_relabelling_peers_permutes_the_group_mean(data):
    x = data.draw(states())
    labels = data.draw(partitions(len(x)))
    perm = data.draw(permutations(len(x)))
    y = group_mean(x.copy(), Groups.from_labels(labels))
    y_perm = group_mean(x[perm].copy(), Groups.from_labels(labels[perm]))
    np.testing.assert_allclose(y_perm, y[perm], rtol=0, atol=1e-13 * (np.abs(x).max() + 1e-300))


@given(data=st.data())
def test_weighted_group_mean_preserves_the_weighted_sum(data):
    x = data.draw(states())
    labels = data.draw(partitions(len(x)))
    groups = Groups.from_labels(labels)
    weights = np.abs(data.draw(vectors(len(x), 1))[:, 0]) + 0.25
    with tiling(data.draw(st.sampled_from(list(TILINGS)))):
        y = group_mean(x.copy(), groups, weights)
    assert_weighted_shift_bound(x, y, weights, labels)


def assert_weighted_shift_bound(before, after, weights, labels) -> None:
    """Σ w·x moves by at most the round-off of the kernel's algorithm.

    The kernel takes m = x_r + Σ_j w_j (x_j − x_r) / W around a member row x_r (W = Σ_j w_j),
    so m carries an absolute error of a few (g + 2) ε·max_j |x_j| per coordinate, and
    the group's weighted sum W·m then moves by W times that. With very unequal weights
    this exceeds 1e-12 of Σ w|x| (Hypothesis found weights 0.25 against 39.25 × 19 with
    one non-zero row: drift 3.3e-13 against a scale of 0.29), so the sum check above is
    made against this bound: 4·(g + 2)·ε·W·max|x| per group, summed, plus the
    1e-12 relative margin of the unweighted checks.
    """
    eps = np.finfo(before.dtype).eps
    bound = np.zeros(before.shape[1])
    for label in np.unique(labels[labels >= 0]):
        members = labels == label
        g, total = int(members.sum()), float(weights[members].sum())
        bound += 4 * (g + 2) * eps * total * np.abs(before[members]).max(axis=0)
    drift = np.abs((weights[:, None] * after).sum(axis=0) - (weights[:, None] * before).sum(axis=0))
    assert np.all(drift <= bound + 1e-12 * (weights[:, None] * np.abs(before)).sum(axis=0) + 1e-300)


@given(data=st.data())
def test_equal_weights_give_the_plain_group_mean(data):
    x = data.draw(states())
    groups = Groups.from_labels(data.draw(partitions(len(x))))
    y = group_means(x, groups, np.full(len(x), 3.0))
    np.testing.assert_allclose(y, group_means(x, groups), rtol=1e-12, atol=1e-12)


def test_weighted_group_mean_rejects_a_group_without_weight():
    groups = Groups.from_labels(np.array([0, 0, 1]))
    with pytest.raises(ValueError, match="positive total weight"):
        group_means(np.ones((3, 1)), groups, np.array([0.0, 0.0, 1.0]))


def test_group_mean_works_in_float32():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = group_mean(x.copy(), Groups.from_matrix(np.arange(6).reshape(2, 3), 6))
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y[:3], np.tile([[2.0, 3.0]], (3, 1)))


# -- neighbour mixing -----------------------------------------------------------------


@given(data=st.data())
def test_neighbour_mean_never_widens_the_range(data):
    x = data.draw(states())
    neighbours, weights = data.draw(row_stochastic_tables(len(x)))
    y = neighbour_mean(x.copy(), neighbours, weights)
    slack = 1e-13 * (np.abs(x).max() + 1e-300)
    assert np.all(y.max(axis=0) <= x.max(axis=0) + slack)
    assert np.all(y.min(axis=0) >= x.min(axis=0) - slack)


@given(data=st.data())
def test_neighbour_mean_is_the_same_on_numpy_and_array_api_strict(data):
    x = data.draw(states())
    neighbours, weights = data.draw(row_stochastic_tables(len(x)))
    on_strict = neighbour_mean(strict(x), neighbours, weights)
    assert np.array_equal(neighbour_mean(x.copy(), neighbours, weights), np.asarray(on_strict))


@given(data=st.data())
def test_neighbour_mean_of_equal_vectors_changes_nothing(data):
    x = data.draw(states())
    x[:] = x[0]
    neighbours, weights = data.draw(row_stochastic_tables(len(x)))
    assert np.array_equal(neighbour_mean(x.copy(), neighbours, weights), x)


def metropolis_table(graph: nx.Graph, n: int) -> tuple[np.ndarray, np.ndarray]:
    width = max([d for _, d in graph.degree] + [1])
    neighbours = np.repeat(np.arange(n)[:, None], width, axis=1)
    weights = np.zeros((n, width))
    for i in range(n):
        for k, j in enumerate(sorted(graph[i])):
            neighbours[i, k] = j
            weights[i, k] = 1 / (1 + max(graph.degree[i], graph.degree[j]))
    return neighbours, weights


@given(data=st.data())
def test_metropolis_mixing_preserves_the_sum_and_never_increases_var(data):
    x = data.draw(states(max_peers=16))
    neighbours, weights = metropolis_table(data.draw(graphs(len(x))), len(x))
    y = neighbour_mean(x.copy(), neighbours, weights)
    assert_sum_preserved(x, y)
    assert_var_not_increased(x, y)


@given(data=st.data())
def test_column_stochastic_ell_mix_preserves_the_sum(data):
    x = data.draw(states(min_peers=2))
    n = len(x)
    shifts = data.draw(st.lists(st.integers(1, n - 1), min_size=1, max_size=3))
    senders = (np.arange(n)[:, None] - np.array(shifts)) % n
    share = 1.0 / (1 + len(shifts))
    receive = np.full(senders.shape, share)
    y = ell_mix(x, senders, receive, np.full(n, share))
    assert_sum_preserved(x, y)
    assert np.array_equal(y, np.asarray(ell_mix(strict(x), senders, receive, np.full(n, share))))


# -- pairwise deltas ------------------------------------------------------------------


@given(data=st.data())
def test_pairwise_delta_preserves_the_sum_and_averages_pairs(data):
    x = data.draw(states(min_peers=2))
    i, j = data.draw(disjoint_pairs(len(x)))
    y = pairwise_delta(x.copy(), i, j)
    assert_sum_preserved(x, y)
    scale = np.abs(x).max() + 1e-300
    np.testing.assert_allclose(y[i], (x[i] + x[j]) / 2, rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(y[j], (x[i] + x[j]) / 2, rtol=0, atol=1e-13 * scale)


@given(data=st.data())
def test_pairwise_delta_with_stale_snapshots_still_preserves_the_sum(data):
    x = data.draw(states(min_peers=2))
    i, j = data.draw(disjoint_pairs(len(x)))
    s_i, s_j = data.draw(vectors(len(i), x.shape[1])), data.draw(vectors(len(j), x.shape[1]))
    y = pairwise_delta(x.copy(), i, j, s_i, s_j)
    scale = np.abs(x).sum(axis=0) + np.abs(s_i).sum(axis=0) + np.abs(s_j).sum(axis=0)
    assert np.all(np.abs(y.sum(axis=0) - x.sum(axis=0)) <= 1e-12 * scale + 1e-300)
    on_strict = pairwise_delta(strict(x), i, j, strict(s_i), strict(s_j))
    assert np.array_equal(y, np.asarray(on_strict))


@given(data=st.data())
def test_pairwise_delta_with_received_values_uses_each_ends_own_value(data):
    x = data.draw(states(min_peers=2))
    i, j = data.draw(disjoint_pairs(len(x)))
    dim = x.shape[1]
    s_i, s_j = data.draw(vectors(len(i), dim)), data.draw(vectors(len(j), dim))
    q_i, q_j = data.draw(vectors(len(i), dim)), data.draw(vectors(len(j), dim))
    y = pairwise_delta(x.copy(), i, j, s_i, s_j, q_i, q_j)
    expected = x.copy()
    expected[i] -= (s_i - q_j) / 2
    expected[j] += (q_i - s_j) / 2
    assert np.array_equal(y, expected)
    on_strict = pairwise_delta(strict(x), i, j, strict(s_i), strict(s_j), strict(q_i), strict(q_j))
    assert np.array_equal(y, np.asarray(on_strict))
    # q = s is the exact wire, bit for bit
    exact = pairwise_delta(x.copy(), i, j, s_i, s_j)
    assert np.array_equal(pairwise_delta(x.copy(), i, j, s_i, s_j, s_i, s_j), exact)


@pytest.mark.parametrize("method", METHODS)
@given(data=st.data())
def test_push_half_through_a_wire_credits_the_decoded_half(method, data):
    x = data.draw(states(min_peers=2))
    senders, targets = data.draw(disjoint_pairs(len(x)))
    y = push_half(x.copy(), senders, targets, method)
    half = 0.5 * x[senders]
    expected = x.copy()
    expected[senders] = half
    expected[targets] = x[targets] + roundtrip(half, method)[0]
    assert np.array_equal(y, expected)
    assert np.array_equal(np.asarray(push_half(strict(x), senders, targets, method)), y)


@pytest.mark.parametrize("method", METHODS)
@given(data=st.data())
def test_a2cid2_exchange_through_a_wire_is_the_same_on_numpy_and_strict(method, data):
    x = data.draw(states(min_peers=2))
    x_tilde = data.draw(vectors(*x.shape))
    i, j = data.draw(disjoint_pairs(len(x)))
    c = data.draw(hnp.arrays(np.float64, 2 * i.size, elements=st.floats(0, 0.5)))
    y, y_tilde = a2cid2_exchange(x.copy(), x_tilde.copy(), i, j, c, 0.7, method)
    on_strict = a2cid2_exchange(strict(x), strict(x_tilde), i, j, c, 0.7, method)
    np.testing.assert_allclose(np.asarray(on_strict[0]), y, rtol=0, atol=1e-12 * BOUND)
    np.testing.assert_allclose(np.asarray(on_strict[1]), y_tilde, rtol=0, atol=1e-12 * BOUND)
    if method == "none":
        return
    # by hand: mix both ends, then each uses its own value and the other's decoded one
    rows = np.concatenate((i, j))
    ends, ends_tilde = x[rows].copy(), x_tilde[rows].copy()
    step = c[:, None] * (ends_tilde - ends)
    ends, ends_tilde = ends + step, ends_tilde - step
    received = roundtrip(ends, method)[0]
    pairs = i.size
    m_i = ends[:pairs] - received[pairs:]
    m_j = received[:pairs] - ends[pairs:]
    np.testing.assert_allclose(y[i], ends[:pairs] - m_i / 2, rtol=0, atol=1e-12 * BOUND)
    np.testing.assert_allclose(y[j], ends[pairs:] + m_j / 2, rtol=0, atol=1e-12 * BOUND)
    kick_i, kick_j = ends_tilde[:pairs] - 0.7 * m_i, ends_tilde[pairs:] + 0.7 * m_j
    np.testing.assert_allclose(y_tilde[i], kick_i, rtol=0, atol=1e-12 * BOUND)
    np.testing.assert_allclose(y_tilde[j], kick_j, rtol=0, atol=1e-12 * BOUND)


def test_pairwise_delta_rejects_overlapping_pairs():
    with pytest.raises(ValueError, match="disjoint"):
        pairwise_delta(np.zeros((4, 1)), np.array([0, 1]), np.array([1, 2]))


# -- the large-state code path of neighbour mixing (a loop over slots) -----------------


@given(data=st.data())
def test_neighbour_slot_loop_matches_numpy_and_strict(data):
    x = data.draw(states())
    neighbours, weights = data.draw(row_stochastic_tables(len(x)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(neighbours_module, "GATHER_ELEMENTS", 0)
        y = neighbour_mean(x.copy(), neighbours, weights)
        assert np.array_equal(y, np.asarray(neighbour_mean(strict(x), neighbours, weights)))
    scale = np.abs(x).max() + 1e-300
    np.testing.assert_allclose(y, neighbour_mean(x.copy(), neighbours, weights), atol=1e-13 * scale)
