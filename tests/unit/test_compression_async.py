"""pairwise_gossip, push_sum and a2cid2 through a compressing wire, on both clocks."""

from __future__ import annotations

import array_api_strict as xps
import numpy as np
import pytest

import sim
from protocols._async_net import pairwise_rules
from protocols.a2cid2 import A2cid2
from protocols.contract import Context, State
from protocols.pairwise_gossip import PairwiseGossip
from protocols.push_sum import PushSum, apply_pushes
from sim.kernels.compression import fp16_round, roundtrip, wire_bytes
from sim.network.flows import FlowNetwork

PROTOCOLS = ("pairwise_gossip", "push_sum", "a2cid2")
LOSSY = ("fp16", "uniform8", "quantile8")
DIM = 200


def scenario(name, clock="rounds", compression=None, count=16, dim=DIM, length=4):
    # a2cid2 on the complete graph has α̃ = ½, so x̃ = x: use a graph where x̃ moves
    protocol = {"name": name, "topology": "exponential" if name == "a2cid2" else "complete"}
    if compression is not None:
        protocol["compression"] = compression
    stop = {"max_rounds": length} if clock == "rounds" else {"max_time": length}
    return sim.scenario_from_mapping(
        {
            "name": "async-wire",
            "clock": clock,
            "peers": {"count": count},
            "vector": {"dim": dim},
            "protocol": protocol,
            "stop": {**stop, "target_var": 0},
        }
    )


def build(cls, n, dim, seed=0, **params):
    protocol = cls(cls.Params(**params), Context(n, dim, 8, np.random.default_rng(seed)))
    state = State(x=np.random.default_rng(seed + 1).normal(size=(n, dim)))
    protocol.init_state(state)
    return protocol, state


def total_sum(result):
    return result.state.x.sum(axis=0)


@pytest.mark.parametrize("clock", ["rounds", "network"])
@pytest.mark.parametrize("name", PROTOCOLS)
def test_compression_none_is_the_default_bit_for_bit(name, clock):
    default = sim.run(scenario(name, clock))
    explicit = sim.run(scenario(name, clock, "none"))
    np.testing.assert_array_equal(explicit.state.x, default.state.x)
    assert explicit.metrics.equals(default.metrics)
    assert explicit.summary["final_mean_drift"] == default.summary["final_mean_drift"]


def per_message_bytes(name, method, dim=DIM, itemsize=8):
    return wire_bytes(method, dim, itemsize) + (itemsize if name == "push_sum" else 0)


@pytest.mark.parametrize("method", LOSSY)
@pytest.mark.parametrize("name", PROTOCOLS)
def test_rounds_clock_bytes_are_the_compressed_messages(name, method):
    plain = sim.run(scenario(name, "rounds", "none"))
    packed = sim.run(scenario(name, "rounds", method))
    messages = packed.summary["messages"]
    assert messages == plain.summary["messages"] > 0  # the same rings and pushes
    assert packed.summary["bytes_sent"] == messages * per_message_bytes(name, method)
    assert plain.summary["bytes_sent"] == messages * per_message_bytes(name, "none")
    assert packed.summary["bytes_sent"] < plain.summary["bytes_sent"]


@pytest.mark.parametrize("method", [*LOSSY, "none"])
@pytest.mark.parametrize("name", PROTOCOLS)
def test_network_clock_flows_carry_the_compressed_messages(name, method, monkeypatch):
    sizes: list[float] = []
    send = FlowNetwork.send

    def recording(self, src, dst, nbytes, *args, **kwargs):
        sizes.append(nbytes)
        return send(self, src, dst, nbytes, *args, **kwargs)

    monkeypatch.setattr(FlowNetwork, "send", recording)
    count_solo = FlowNetwork.count_solo

    def counting(self, src, dst, nbytes):  # flows timed in closed form (protocols/_solo_exchanges/)
        sizes.extend([nbytes] * len(src))
        return count_solo(self, src, dst, nbytes)

    monkeypatch.setattr(FlowNetwork, "count_solo", counting)
    result = sim.run(scenario(name, "network", method, length=2))
    assert len(sizes) == result.summary["messages"] > 0
    assert set(sizes) == {float(per_message_bytes(name, method))}


def test_one_pairwise_exchange_at_a_time_matches_the_hand_computation():
    protocol, state = build(PairwiseGossip, 2, 40, seed=3, compression="uniform8", rate=4.0)
    x = state.x.copy()
    stats = protocol.round(state, np.ones(2, dtype=bool), 0)
    exchanges = protocol.counters["exchanges"]
    assert exchanges >= 2  # two peers: every exchange is its own wave
    for _ in range(exchanges):
        received, _ = roundtrip(x.copy(), "uniform8")
        s_0, s_1 = x[0].copy(), x[1].copy()
        x[0] = s_0 - (s_0 - received[1]) / 2
        x[1] = s_1 + (received[0] - s_1) / 2
    np.testing.assert_array_equal(state.x, x)
    assert stats.bytes_sent == 2 * exchanges * wire_bytes("uniform8", 40, 8)
    assert stats.messages == 2 * exchanges


def test_one_a2cid2_exchange_at_a_time_matches_the_hand_computation():
    alpha = 0.3
    protocol, state = build(
        A2cid2, 2, 30, seed=5, compression="fp16", eta=0.0, alpha_tilde=alpha, rate=4.0
    )
    state.x *= 1e3  # well away from float16's precision: the wire visibly rounds
    state.extra["x_tilde"] = state.x.copy()
    x, x_tilde = state.x.copy(), state.x.copy()
    stats = protocol.round(state, np.ones(2, dtype=bool), 0)
    exchanges = protocol.counters["exchanges"]
    assert exchanges >= 1
    for _ in range(exchanges):  # η = 0: no mixing between events
        q = fp16_round(x)
        m_0, m_1 = x[0] - q[1], q[0] - x[1]
        x[0], x[1] = x[0] - m_0 / 2, x[1] + m_1 / 2
        x_tilde[0], x_tilde[1] = x_tilde[0] - alpha * m_0, x_tilde[1] + alpha * m_1
    np.testing.assert_array_equal(state.x, x)
    np.testing.assert_array_equal(state.extra["x_tilde"], x_tilde)
    assert stats.bytes_sent == 2 * exchanges * wire_bytes("fp16", 30, 8)


def test_a_push_through_the_wire_keeps_the_weight_exact_and_credits_the_decoded_half():
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=(3, 50)), np.ones((3, 1))
    x0 = x.copy()
    x, w = apply_pushes(x, w, np.array([0]), np.array([2]), "uniform8")
    np.testing.assert_array_equal(x[0], x0[0] / 2)  # the sender keeps exactly half
    np.testing.assert_array_equal(x[2], x0[2] + roundtrip(x0[0] / 2, "uniform8")[0])
    np.testing.assert_array_equal(x[1], x0[1])
    assert w.ravel().tolist() == [0.5, 1.0, 1.5]


def test_a_push_sum_round_keeps_the_weights_and_moves_the_values():
    protocol, state = build(PushSum, 6, 64, seed=4, compression="uniform8", rate=3.0)
    x0 = state.x.copy()
    stats = protocol.round(state, np.ones(6, dtype=bool), 0)
    pushes = protocol.counters["pushes"]
    assert pushes > 0
    assert stats.bytes_sent == pushes * (wire_bytes("uniform8", 64, 8) + 8)
    assert float(state.extra["w"].sum()) == 6.0  # dyadic weights: exact
    assert np.max(np.abs(state.x.sum(axis=0) - x0.sum(axis=0))) > 1e-9


@pytest.mark.parametrize("clock", ["rounds", "network"])
def test_push_sum_keeps_the_weights_and_moves_the_values(clock):
    plain = sim.run(scenario("push_sum", clock, "none"))
    packed = sim.run(scenario("push_sum", clock, "uniform8"))
    w = packed.state.extra["w"]
    assert abs(float(w.sum()) - 16) <= 1e-12 * 16
    assert np.all(w > 0)
    initial = plain.state.x.sum(axis=0)  # Σx kept without compression
    assert np.max(np.abs(total_sum(packed) - initial)) > 1e-9
    assert packed.summary["final_mean_drift"] > 0


@pytest.mark.parametrize("clock", ["rounds", "network"])
@pytest.mark.parametrize("name", PROTOCOLS)
def test_uniform8_runs_still_converge_and_the_mean_drifts(name, clock):
    result = sim.run(scenario(name, clock, "uniform8", length=25))
    var = result.metrics["var"].to_numpy()
    assert var[-1] < 1e-3 * var[0], (var[0], var[-1])
    assert result.summary["final_mean_drift"] > 0
    # push-sum included: its drift is that of Σx/Σw (Protocol.conserved_mean)
    plain = sim.run(scenario(name, clock, "none", length=2))
    assert plain.summary["final_mean_drift"] < 1e-12


@pytest.mark.parametrize("strict", [False, True])
def test_network_rules_apply_the_snapshot_as_each_end_decoded_it(strict):
    rng = np.random.default_rng(6)
    x = rng.normal(size=(3, 300))
    state = State(x=xps.asarray(x) if strict else x.copy())
    snapshot, apply = pairwise_rules(state, "uniform8")
    sent = snapshot(0, 2)
    state.x = state.x + 1.0  # the rows move while the flows are in flight
    apply(0, 2, sent)
    q = roundtrip(x[[0, 2]], "uniform8")[0]
    expected = x + 1.0
    expected[0] -= (x[0] - q[1]) / 2
    expected[2] += (q[0] - x[2]) / 2
    np.testing.assert_allclose(np.asarray(state.x), expected, rtol=0, atol=1e-15)
    assert np.abs(expected.sum(axis=0) - (x + 1.0).sum(axis=0)).max() > 1e-9  # the wire's error
