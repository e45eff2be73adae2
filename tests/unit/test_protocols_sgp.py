"""sgp: the exponential-graph schedule, plain mixing and true push-sum."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.contract import Context, State
from protocols.sgp import Sgp, SgpParams, offsets


def build(n: int, dim: int = 1, push_sum: bool = False) -> tuple[Sgp, State]:
    protocol = Sgp(SgpParams(push_sum=push_sum), Context(n, dim, 8, np.random.default_rng(0)))
    st = State(x=np.random.default_rng(1).normal(size=(n, dim)))
    protocol.init_state(st)
    return protocol, st


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (8, [(1, 2), (2, 4), (1, 2)]),
        (1024, [(1, 2), (2, 4), (4, 8)]),
        (2, [(1, 0), (1, 0), (1, 0)]),
        (3, [(1, 2), (1, 2), (1, 2)]),
    ],
)
def test_offsets_cycle_through_powers_of_two(n, expected):
    assert [offsets(n, t) for t in range(3)] == expected


def test_the_cycle_length_is_floor_log2_of_n_minus_1():
    assert offsets(1024, 9) == offsets(1024, 0)
    assert offsets(1024, 8) == (256, 512)


def test_sgp_averages_itself_and_the_two_offset_peers():
    protocol, st = build(8)
    x = st.x.copy()
    stats = protocol.round(st, np.ones(8, dtype=bool), 1)
    expected = (x + np.roll(x, -2, axis=0) + np.roll(x, -4, axis=0)) / 3
    np.testing.assert_allclose(st.x, expected, rtol=0, atol=1e-14)
    assert stats.messages == 16
    assert stats.mean_drift == 0.0


def test_sgp_skips_absent_peers_and_reports_drift():
    protocol, st = build(8)
    x = st.x.copy()
    present = np.ones(8, dtype=bool)
    present[1] = False
    stats = protocol.round(st, present, 0)
    np.testing.assert_allclose(st.x[0], (x[0] + x[2]) / 2, rtol=1e-14)
    assert np.array_equal(st.x[1], x[1])
    assert stats.mean_drift > 0


def test_one_peer_does_nothing():
    protocol, st = build(1)
    x = st.x.copy()
    assert protocol.round(st, np.ones(1, dtype=bool), 0).messages == 0
    assert np.array_equal(st.x, x)


def test_push_sum_starts_with_unit_weights_and_estimates_x_over_w():
    protocol, st = build(6, push_sum=True)
    assert np.array_equal(st.extra["w"], np.ones((6, 1)))
    st.extra["w"] = np.full((6, 1), 2.0)
    np.testing.assert_allclose(protocol.estimate(st), st.x / 2)


def test_push_sum_keeps_the_share_of_an_absent_out_neighbour():
    protocol, st = build(8, push_sum=True)
    present = np.ones(8, dtype=bool)
    present[1] = False  # out-neighbour of 0 (offset 1) and of 7 (offset 2)
    protocol.round(st, present, 0)
    w = st.extra["w"][:, 0]
    assert w[1] == 1.0
    # 0 keeps 1/3 plus the share meant for 1, and gets 1/3 from 7 and from 6
    assert w[0] == pytest.approx(2 / 3 + 2 / 3)
    # 7 keeps 1/3 plus the share meant for 1 and gets 1/3 from 6 and from 5
    assert w[7] == pytest.approx(4 / 3)
    assert w.sum() == pytest.approx(8)


def test_push_sum_under_churn_converges_to_the_true_mean():
    protocol, st = build(32, dim=2, push_sum=True)
    mean = st.x.mean(axis=0)
    rng = np.random.default_rng(5)
    for t in range(200):
        protocol.round(st, rng.random(32) > 0.2, t)
    np.testing.assert_allclose(protocol.estimate(st), np.tile(mean, (32, 1)), atol=1e-9)


def test_push_sum_traffic_includes_the_weight():
    protocol, st = build(8, dim=3, push_sum=True)
    stats = protocol.round(st, np.ones(8, dtype=bool), 0)
    assert stats.messages == 16
    assert stats.bytes_sent == 16 * (3 * 8 + 8)
