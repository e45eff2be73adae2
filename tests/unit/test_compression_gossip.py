"""gossip and sgp through a compressing wire: bytes, the update rule, absences, drift."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from protocols.contract import Context, State
from protocols.gossip import Gossip, GossipParams, gossip_weights
from protocols.sgp import Sgp, SgpParams, offsets
from sim.kernels.compression import roundtrip, wire_bytes

METHODS = ["fp16", "uniform8", "quantile8"]
PROTOCOLS = [
    {"name": "gossip", "topology": "ring"},
    {"name": "gossip", "topology": "exponential", "weights": "metropolis"},
    {"name": "sgp"},
    {"name": "sgp", "push_sum": True},
]
DIM = 300  # above 256 coordinates: quantile8 is lossy too


def scenario(protocol, clock="rounds", rounds=6, count=16, dim=DIM):
    return sim.scenario_from_mapping(
        {
            "name": "gossip-wire",
            "clock": clock,
            "peers": {"count": count},
            "vector": {"dim": dim, "dtype": "float32"},
            "protocol": protocol,
            "stop": {"max_rounds": rounds, "target_var": 0},
        }
    )


def without_wall_time(summary):
    return {k: v for k, v in summary.items() if k != "wall_time_s"}


@pytest.mark.parametrize("clock", ["rounds", "network"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_none_is_bit_identical_to_leaving_the_key_out(protocol, clock):
    plain = sim.run(scenario(protocol, clock))
    none = sim.run(scenario({**protocol, "compression": "none"}, clock))
    np.testing.assert_array_equal(none.state.x, plain.state.x)
    assert without_wall_time(none.summary) == without_wall_time(plain.summary)
    assert none.metrics.equals(plain.metrics)


@pytest.mark.parametrize("clock", ["rounds", "network"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bytes_shrink_to_the_wire_size(protocol, method, clock):
    weight = 4 if protocol.get("push_sum") else 0  # push-sum's w: one exact float32
    plain = sim.run(scenario(protocol, clock)).summary
    packed = sim.run(scenario({**protocol, "compression": method}, clock)).summary
    assert packed["messages"] == plain["messages"] > 0
    assert plain["bytes_sent"] == plain["messages"] * (DIM * 4 + weight)
    assert packed["bytes_sent"] == packed["messages"] * (wire_bytes(method, DIM, 4) + weight)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_network_clock_gives_the_rounds_clock_vectors(protocol, method):
    on_rounds = sim.run(scenario({**protocol, "compression": method}, "rounds"))
    on_net = sim.run(scenario({**protocol, "compression": method}, "network"))
    np.testing.assert_array_equal(on_net.state.x, on_rounds.state.x)


# -- the update rule against direct computations -------------------------------------------


def start(n, dim=DIM, seed=1):
    return np.random.default_rng(seed).normal(size=(n, dim)) * 3 + 1


def gossip(n, method, **params):
    ctx = Context(n, DIM, 8, np.random.default_rng(0))
    return Gossip(GossipParams(compression=method, **params), ctx)


def sgp(n, method, push_sum=False):
    ctx = Context(n, DIM, 8, np.random.default_rng(0))
    return Sgp(SgpParams(compression=method, push_sum=push_sum), ctx)


MASKS = {
    "all": np.ones(8, dtype=bool),
    "absences": np.array([True, False, True, True, False, True, True, True]),
}


@pytest.mark.parametrize("mask", MASKS.values(), ids=MASKS.keys())
@pytest.mark.parametrize(
    "params",
    [{"topology": "ring"}, {"topology": "exponential", "weights": "metropolis"}],
)
@pytest.mark.parametrize("method", METHODS)
def test_gossip_matches_a_dense_reference(method, params, mask):
    protocol = gossip(8, method, **params)
    x = start(8)
    state = State(x=x.copy())
    stats = protocol.round(state, mask, 0)
    weights = gossip_weights(protocol.neighbours, protocol.valid, mask, protocol.params.weights)
    a = np.zeros((8, 8))  # off-diagonal weights w_ij
    for i, k in zip(*np.nonzero(weights), strict=True):
        a[i, protocol.neighbours[i, k]] += weights[i, k]
    xq = roundtrip(x, method)[0]
    assert not np.array_equal(xq, x)
    expected = x + a @ xq - a.sum(axis=1)[:, None] * x  # x_i + Σ_j w_ij (Q(x_j) − x_i)
    np.testing.assert_allclose(state.x, expected, rtol=0, atol=1e-12)
    messages = int(np.count_nonzero(a))
    assert stats.messages == messages
    assert stats.bytes_sent == messages * wire_bytes(method, DIM, 8)
    shift = (expected - x).sum(axis=0)
    assert stats.mean_drift == pytest.approx(np.linalg.norm(shift) / 8 / np.sqrt(DIM))
    assert stats.mean_drift > 0


@pytest.mark.parametrize("n", [8, 2])  # N = 2: offset b ≡ 0, a slot naming the peer itself
@pytest.mark.parametrize("mask_name", ["all", "absences"])
@pytest.mark.parametrize("method", METHODS)
def test_sgp_matches_explicit_loops(method, mask_name, n):
    mask = MASKS[mask_name][:n] if n == 8 else np.array([True, mask_name == "all"])
    protocol, t = sgp(n, method), 1
    x = start(n)
    state = State(x=x.copy())
    protocol.init_state(state)
    stats = protocol.round(state, mask, t)
    xq = roundtrip(x, method)[0]
    expected = x.copy()
    for i in np.flatnonzero(mask):
        live = [(i + off) % n for off in offsets(n, t) if mask[(i + off) % n]]
        for j in live:  # a slot naming i itself uses the exact x_i: no change
            expected[i] += (xq[j] if j != i else x[i]) / (1 + len(live)) - x[i] / (1 + len(live))
    np.testing.assert_allclose(state.x, expected, rtol=0, atol=1e-12)
    assert stats.bytes_sent == stats.messages * wire_bytes(method, DIM, 8)


@pytest.mark.parametrize("n", [8, 2])
@pytest.mark.parametrize("mask_name", ["all", "absences"])
@pytest.mark.parametrize("method", METHODS)
def test_push_sum_matches_explicit_loops_and_w_travels_exact(method, mask_name, n):
    mask = MASKS[mask_name][:n] if n == 8 else np.array([True, mask_name == "all"])
    protocol, exact, t = sgp(n, method, push_sum=True), sgp(n, "none", push_sum=True), 0
    x = start(n)
    state, reference = State(x=x.copy()), State(x=x.copy())
    protocol.init_state(state)
    exact.init_state(reference)
    state.extra["w"] = reference.extra["w"] = np.linspace(0.5, 1.5, n)[:, None]
    w = state.extra["w"].copy()
    stats = protocol.round(state, mask, t)
    exact_stats = exact.round(reference, mask, t)
    xq = roundtrip(x, method)[0]
    expected = np.zeros_like(x)
    expected_w = np.zeros_like(w)
    for j in range(n):  # what j keeps and what it pushes (only present peers push)
        if not mask[j]:
            expected[j] += x[j]
            expected_w[j] += w[j]
            continue
        for off in offsets(n, t):
            i = (j + off) % n
            to = i if mask[i] else j  # an absent out-neighbour's share stays with j
            expected[to] += (x[j] if to == j else xq[j]) / 3  # j's own share stays exact
            expected_w[to] += w[j] / 3
        expected[j] += x[j] / 3
        expected_w[j] += w[j] / 3
    np.testing.assert_allclose(state.x, expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(state.extra["w"], reference.extra["w"])
    np.testing.assert_allclose(state.extra["w"], expected_w, rtol=0, atol=1e-15)
    assert stats.messages == exact_stats.messages
    assert stats.bytes_sent == stats.messages * (wire_bytes(method, DIM, 8) + 8)


# -- absences and convergence ---------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "make",
    [
        lambda m: gossip(8, m, topology="ring"),
        lambda m: gossip(8, m, topology="complete", weights="metropolis"),
        lambda m: sgp(8, m),
        lambda m: sgp(8, m, push_sum=True),
    ],
    ids=["gossip-uniform", "gossip-metropolis", "sgp", "push-sum"],
)
def test_absent_peers_stay_unchanged_bit_for_bit(make, method):
    protocol = make(method)
    state = State(x=start(8))
    protocol.init_state(state)
    rng = np.random.default_rng(4)
    for t in range(6):
        present = rng.random(8) > 0.3
        before = state.x.copy()
        w_before = state.extra["w"].copy() if "w" in state.extra else None
        protocol.round(state, present, t)
        np.testing.assert_array_equal(state.x[~present], before[~present])
        if w_before is not None:
            np.testing.assert_array_equal(state.extra["w"][~present], w_before[~present])
        assert not np.array_equal(state.x[present], before[present])


@pytest.mark.parametrize("protocol", PROTOCOLS[1:])
def test_uniform8_still_converges_and_the_mean_drifts(protocol):
    exact = sim.run(scenario(protocol, rounds=40, count=32, dim=512))
    packed = sim.run(
        scenario({**protocol, "compression": "uniform8"}, rounds=40, count=32, dim=512)
    )
    var = packed.metrics["var"]
    assert var.iloc[-1] < 1e-4 * var.iloc[0]
    assert packed.summary["final_mean_drift"] > 0
    assert packed.summary["final_mean_drift"] > 100 * exact.summary["final_mean_drift"]
