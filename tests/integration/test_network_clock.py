"""Barrier rounds on the network clock: closed-form round times, equivalence with the
rounds clock's arithmetic, stragglers, determinism."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim
from sim.core.errors import ScenarioError

S_BYTES = 1024 * 8  # dim 1024, float64
UP = 12.5e6  # 100 Mbit/s


def scenario(protocol, clock="network", **overrides):
    data = {
        "name": "net",
        "clock": clock,
        "peers": {"count": 16, "upload": UP, "download": UP, "latency": "10 ms"},
        "vector": {"dim": 1024},
        "protocol": protocol,
        "stop": {"max_rounds": 5, "target_var": 0},
    }
    return sim.scenario_from_mapping(data, overrides)


def test_ring_gossip_round_takes_latency_plus_two_vectors_over_the_uplink():
    result = sim.run(scenario({"name": "gossip", "topology": "ring"}))
    per_round = 0.020 + 2 * S_BYTES / UP  # two flows share each upload and each download
    assert result.summary["sim_time_s"] == pytest.approx(5 * per_round, rel=1e-12)
    assert result.summary["bytes_sent"] == pytest.approx(5 * 16 * 2 * S_BYTES)


@pytest.mark.parametrize(
    "protocol",
    [
        {"name": "gossip", "topology": "torus", "weights": "metropolis"},
        {"name": "sgp", "push_sum": True},
        {"name": "random_groups", "group_size": 4},
    ],
)
def test_without_churn_the_network_clock_does_the_rounds_clock_arithmetic(protocol):
    net = sim.run(scenario(protocol))
    rounds = sim.run(scenario(protocol, clock="rounds"))
    np.testing.assert_array_equal(net.state.x, rounds.state.x)


def test_butterfly_round_time_for_equal_groups():
    result = sim.run(scenario({"name": "random_groups", "group_size": 4}))
    # each member sends 3 parts of S/4 and later gets 3 back: two phases of 3·S/(4·UP)
    per_round = 2 * (0.020 + 3 * S_BYTES / 4 / UP)
    assert result.summary["sim_time_s"] == pytest.approx(5 * per_round, rel=1e-12)


def test_a_straggler_delays_the_whole_barrier_round():
    plain = sim.run(scenario({"name": "gossip", "topology": "ring"}))
    slow = sim.run(scenario({"name": "gossip", "topology": "ring"}, **{"peers.delay": "50 ms"}))
    assert slow.summary["sim_time_s"] == pytest.approx(plain.summary["sim_time_s"] + 5 * 0.050)


def test_network_runs_are_deterministic():
    protocol = {"name": "random_groups", "group_size": 4}
    overrides = {"peers.upload": {"dist": "lognormal", "median": "50 Mbit/s", "sigma": 1.0}}
    a = sim.run(scenario(protocol, **overrides), seed=3).metrics
    b = sim.run(scenario(protocol, **overrides), seed=3).metrics
    pd.testing.assert_frame_equal(a, b)


def test_max_time_cuts_a_run_short_and_records_the_end():
    result = sim.run(scenario({"name": "gossip"}, **{"stop.max_time": 0.05}))
    assert result.metrics["time_s"].iloc[-1] == pytest.approx(0.05)


def test_a_rounds_only_protocol_is_refused_on_the_network_clock():
    with pytest.raises(ScenarioError, match=r"protocol\.name: .*clock: network"):
        sim.run(scenario({"name": "all_reduce"}))


def test_network_clock_needs_a_way_to_end():
    with pytest.raises(ScenarioError, match="max_time"):
        scenario({"name": "gossip"}, **{"stop.max_rounds": None})


def test_a_peer_preempted_mid_round_is_left_out_and_keeps_its_vector(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("peer,down_s,up_s\n3,0.015,10\n")
    churn = {"model": "trace", "file": str(trace)}
    protocol = {"name": "gossip", "topology": "ring", "weights": "metropolis"}
    one_round = {"stop.max_rounds": 1, "churn": churn}
    hit = sim.run(scenario(protocol, **one_round))
    calm = sim.run(scenario(protocol, **{"stop.max_rounds": 1}))
    x0 = sim.run(scenario(protocol, **{"stop.max_rounds": 0})).state.x
    np.testing.assert_array_equal(hit.state.x[3], x0[3])  # lost: kept its vector
    assert not np.array_equal(hit.state.x[2], calm.state.x[2])  # averaged without 3
    np.testing.assert_allclose(hit.state.x.mean(axis=0), x0.mean(axis=0), rtol=1e-12, atol=1e-15)
    # the flows to and from 3 failed at 0.015 s, still in their latency phase: no bytes
    assert hit.summary["bytes_sent"] == pytest.approx((16 * 2 - 4) * S_BYTES)


def test_fetch_rejoin_downloads_a_present_peers_vector(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("peer,down_s,up_s\n5,0.001,0.03\n")
    churn = {"model": "trace", "file": str(trace), "rejoin": "fetch"}
    protocol = {"name": "random_groups", "group_size": 4}
    result = sim.run(scenario(protocol, churn=churn, **{"metrics.every": 1e-3}))
    assert result.metrics["alive_fraction"].min() == 15 / 16
    assert result.metrics["alive_fraction"].iloc[-1] == 1.0
