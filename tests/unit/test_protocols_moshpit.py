"""Moshpit All-Reduce on the rounds clock: grid, keys, exactness, faults, traffic."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from protocols import _grid
from protocols.contract import Context, State
from protocols.moshpit import Moshpit, MoshpitParams


def build(n: int, dim: int = 1, seed: int = 0, **params) -> tuple[Moshpit, State]:
    protocol = Moshpit(MoshpitParams(**params), Context(n, dim, 8, np.random.default_rng(seed)))
    x = np.random.default_rng(seed + 1).normal(size=(n, dim))
    state = State(x=x)
    protocol.init_state(state)
    return protocol, state


def everyone(n: int) -> np.ndarray:
    return np.ones(n, dtype=bool)


def is_exact_mean(x: np.ndarray, mean: np.ndarray) -> bool:
    return bool(np.allclose(x, mean, rtol=0, atol=1e-12 * np.abs(mean).max() + 1e-15))


@pytest.mark.parametrize("rekey", [True, False])
@pytest.mark.parametrize(("size", "dims"), [(2, 1), (5, 1), (2, 2), (3, 2), (4, 2), (2, 3), (3, 3)])
def test_full_grid_reaches_the_exact_mean_after_exactly_d_rounds(size, dims, rekey):
    n = size**dims
    protocol, state = build(n, dim=2, group_size=size, grid_dims=dims, rekey=rekey)
    mean = state.x.mean(axis=0)
    for t in range(dims):
        assert not is_exact_mean(state.x, mean), f"exact already before round {t}"
        protocol.round(state, everyone(n), t)
    assert is_exact_mean(state.x, mean)


def test_full_grid_first_round_averages_blocks_of_m_consecutive_peers():
    protocol, state = build(16, group_size=4, grid_dims=2)
    x0 = state.x.copy()
    protocol.round(state, everyone(16), 0)
    blocks = x0.reshape(4, 4).mean(axis=1)
    np.testing.assert_allclose(state.x.reshape(4, 4), np.repeat(blocks[:, None], 4, axis=1))


def test_members_of_a_group_never_meet_again_the_next_round():
    protocol, state = build(64, group_size=4, grid_dims=3)
    for t in range(5):
        keys = protocol.keys.copy()
        protocol.round(state, everyone(64), t)
        for key in np.unique(keys):
            new = protocol.keys[keys == key]
            assert len(set(new.tolist())) == len(new)
        assert protocol.keys.min() >= 0
        assert protocol.keys.max() < 4**2


def test_rekey_drops_the_oldest_coordinate_and_appends_the_chunk():
    keys = np.array([0 * 9 + 1 * 3 + 2, 2 * 9 + 0 * 3 + 1])  # (0,1,2) and (2,0,1), M=3
    assert _grid.rekey(keys, np.array([0, 4]), 3, 4).tolist() == [1 * 9 + 2 * 3 + 0, 0 + 3 + 1]


def test_non_full_grid_keys_are_balanced():
    protocol, _ = build(900, group_size=32, grid_dims=2)
    counts = np.bincount(protocol.keys, minlength=32)
    assert counts.max() - counts.min() <= 1


def test_absent_peers_keep_their_keys_and_vectors():
    protocol, state = build(27, group_size=3, grid_dims=3)
    present = everyone(27)
    present[[0, 5, 13]] = False
    keys, x = protocol.keys.copy(), state.x.copy()
    protocol.round(state, present, 0)
    assert np.array_equal(protocol.keys[~present], keys[~present])
    assert np.array_equal(state.x[~present], x[~present])


def test_abort_cancels_only_the_groups_with_an_absent_member():
    protocol, state = build(9, group_size=3, grid_dims=2, fault_model="abort")
    present = everyone(9)
    present[4] = False  # the group {3, 4, 5} loses its round
    x, keys = state.x.copy(), protocol.keys.copy()
    stats = protocol.round(state, present, 0)
    assert np.array_equal(state.x[3:6], x[3:6])
    assert np.array_equal(protocol.keys[3:6], keys[3:6])
    np.testing.assert_allclose(state.x[:3], np.tile(x[:3].mean(axis=0), (3, 1)))
    assert stats.messages == 2 * (2 * 3 * 2)


def test_idealized_lets_the_present_members_average_among_themselves():
    protocol, state = build(9, group_size=3, grid_dims=2, fault_model="idealized")
    present = everyone(9)
    present[4] = False
    x = state.x.copy()
    stats = protocol.round(state, present, 0)
    np.testing.assert_allclose(state.x[[3, 5]], np.tile(x[[3, 5]].mean(axis=0), (2, 1)))
    assert stats.messages == 2 * (2 * 3 * 2) + 2 * 2 * 1


def test_groups_below_min_group_size_do_not_form():
    protocol, state = build(9, group_size=3, grid_dims=2, min_group_size=3)
    present = everyone(9)
    present[4] = False
    x, keys = state.x.copy(), protocol.keys.copy()
    protocol.round(state, present, 0)
    assert np.array_equal(state.x[[3, 5]], x[[3, 5]])
    assert np.array_equal(protocol.keys[3:6], keys[3:6])


def test_one_dimension_means_one_group_of_all_present_peers():
    protocol, state = build(10, group_size=4, grid_dims=1)
    present = everyone(10)
    present[0] = False
    x = state.x.copy()
    protocol.round(state, present, 0)
    np.testing.assert_allclose(state.x[1:], np.tile(x[1:].mean(axis=0), (9, 1)))


def test_fixed_grid_cells_are_distinct_when_they_fit_and_even_otherwise():
    small, _ = build(700, group_size=32, grid_dims=2, rekey=False)
    assert np.unique(small.cells).size == 700
    big, _ = build(1024, group_size=8, grid_dims=3, rekey=False)
    counts = np.bincount(big.cells, minlength=512)
    assert counts.min() == counts.max() == 2


def test_fixed_grid_averages_lines_along_axis_t_mod_d():
    protocol, state = build(16, group_size=4, grid_dims=2, rekey=False)
    x = state.x.copy()
    protocol.round(state, everyone(16), 1)
    lines = protocol.lines[1]
    for line in np.unique(lines):
        rows = lines == line
        np.testing.assert_allclose(state.x[rows], np.tile(x[rows].mean(axis=0), (4, 1)))
    cells = protocol.cells
    same_line = (cells[:, None] % 4) == (cells[None, :] % 4)  # axis 1 varies the high digit
    assert np.array_equal(same_line, lines[:, None] == lines[None, :])


def test_partly_filled_fixed_grid_is_not_exact_in_d_rounds():
    protocol, state = build(12, group_size=4, grid_dims=2, rekey=False)
    mean = state.x.mean(axis=0)
    for t in range(2):
        protocol.round(state, everyone(12), t)
    assert not is_exact_mean(state.x, mean)


def test_traffic_counts_a_butterfly_per_group():
    protocol, state = build(16, dim=4, group_size=4, grid_dims=2)
    stats = protocol.round(state, everyone(16), 0)
    vector_bytes = 4 * 8
    assert stats.bytes_sent == 4 * 2 * 3 * vector_bytes
    assert stats.messages == 4 * 2 * 4 * 3
    assert stats.mean_drift == 0.0


def test_network_clock_fields_accept_units():
    params = MoshpitParams(matchmaking_time="500 ms", part_bytes="1 MiB")
    assert params.matchmaking_time == 0.5
    assert params.part_bytes == 1024**2
    assert MoshpitParams().part_bytes == 512 * 1024


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"group_size": 0}, "group_size"),
        ({"grid_dims": 0}, "grid_dims"),
        ({"fault_model": "crash"}, "fault_model"),
        ({"min_group_size": 9}, "min_group_size"),
        ({"group_size": 1024, "grid_dims": 7}, "2\\*\\*62"),
        ({"matchmaking_time": "soon"}, "duration"),
        ({"part_bytes": 0}, "at least 1 byte"),
        ({"groupsize": 4}, "groupsize"),
    ],
)
def test_bad_parameters_are_rejected_with_the_field_named(params, message):
    with pytest.raises(ValidationError, match=message):
        MoshpitParams(**params)
