"""random_groups on the network clock runs moshpit's butterfly (one planner,
``protocols._moshpit_net.plan_groups``): with the same group the two take the same
seconds and bytes; parts stream in pieces of moshpit's default ``part_bytes``; a group
starts when its last member arrives; the arithmetic stays the rounds clock's."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from protocols import get
from protocols._butterfly import PART_BYTES
from protocols.contract import Context
from protocols.moshpit import MoshpitParams
from sim.kernels.compression import wire_bytes

UP = 12.5e6  # 100 Mbit/s
LAT = 0.005  # one-way per peer: a route takes 10 ms
CLASSES = [
    {"name": "datacenter", "fraction": 0.25, "upload": 8 * UP, "download": 8 * UP},
    {"name": "home", "fraction": 0.5, "upload": UP, "download": 4 * UP, "delay": "30 ms"},
    {"name": "slow", "fraction": 0.25, "upload": UP / 4, "download": UP, "delay": "70 ms"},
]


def scenario(protocol, clock="network", count=8, dim=4096, dtype="float64", **overrides):
    data = {
        "name": "rg-net",
        "clock": clock,
        "peers": {"count": count, "upload": UP, "download": UP, "latency": LAT},
        "vector": {"dim": dim, "dtype": dtype},
        "protocol": protocol,
        "stop": {"max_rounds": 2, "target_var": 0},
    }
    return sim.scenario_from_mapping(data, overrides)


def test_pieces_are_moshpits_default_part_bytes():
    assert PART_BYTES == MoshpitParams().part_bytes == 512 * 1024


def test_with_the_same_group_random_groups_takes_moshpits_seconds_and_bytes():
    """One group of 8 heterogeneous peers with straggler delays, parts of 150 000 float32
    coordinates (600 kB: two pieces of 512 KiB each), equal shares: moshpit (one key,
    equal shares) and random_groups plan the same butterfly, so only the member order
    differs, and with equal parts the times do not depend on it."""
    dim = 8 * 150_000
    shared = {"count": 8, "dim": dim, "dtype": "float32", "peers.classes": CLASSES}
    rg = sim.run(scenario({"name": "random_groups", "group_size": 8}, **shared))
    mp = sim.run(
        scenario(
            {"name": "moshpit", "group_size": 8, "grid_dims": 1, "load_balance": False},
            **shared,
        )
    )
    assert rg.summary["sim_time_s"] == pytest.approx(mp.summary["sim_time_s"], rel=1e-12)
    assert rg.summary["bytes_sent"] == pytest.approx(mp.summary["bytes_sent"], rel=1e-12)
    # 2 rounds · 8 parts · 2 pieces · 7 requests and 7 replies
    assert rg.summary["messages"] == mp.summary["messages"] == 2 * 8 * 2 * 7 * 2
    assert rg.summary["bytes_sent"] == pytest.approx(2 * 2 * 7 * dim * 4)
    x = rg.state.x
    np.testing.assert_allclose(x, np.broadcast_to(x.mean(axis=0), x.shape), rtol=0, atol=1e-6)


def test_a_group_starts_when_its_last_member_arrives():
    """16 equal peers in groups of 4, one of them 50 ms late: its group starts 50 ms
    late and then takes the time of an on-time group (two phases of a route latency
    plus 3 parts of S/4 over the uplink); the other groups finish earlier."""
    s_bytes = 4096 * 8
    per_round = 2 * (2 * LAT + 3 * s_bytes / 4 / UP)
    late = [
        {"name": "late", "fraction": 1 / 16, "delay": "50 ms"},
        {"name": "on_time", "fraction": 15 / 16},
    ]
    protocol = {"name": "random_groups", "group_size": 4}
    plain = sim.run(scenario(protocol, count=16))
    slow = sim.run(scenario(protocol, count=16, **{"peers.classes": late}))
    assert plain.summary["sim_time_s"] == pytest.approx(2 * per_round, rel=1e-12)
    assert slow.summary["sim_time_s"] == pytest.approx(2 * (0.050 + per_round), rel=1e-12)


@pytest.mark.parametrize("compression", ["none", "fp16", "uniform8"])
def test_ragged_groups_give_the_rounds_clock_vectors(compression):
    """19 peers in groups of 4 (sizes 5, 5, 5, 4), dim 1001 (parts of 200 or 201, 250 or
    251 coordinates): without churn the network clock's vectors are the rounds clock's."""
    protocol = {"name": "random_groups", "group_size": 4, "compression": compression}
    shared = {"count": 19, "dim": 1001, "peers.classes": CLASSES}
    on_net = sim.run(scenario(protocol, **shared))
    on_rounds = sim.run(scenario(protocol, clock="rounds", **shared))
    np.testing.assert_array_equal(on_net.state.x, on_rounds.state.x)
    assert on_net.summary["bytes_sent"] == pytest.approx(on_rounds.summary["bytes_sent"])


def test_a_lossy_wire_sends_pieces_but_quantizes_whole_parts():
    """Parts over 512 KiB travel in pieces, each a message with its own header; the
    arithmetic quantizes each part as one message on both clocks (as ring_allreduce's
    ``pipeline_chunks``), so the vectors agree and only the network's bytes count the
    pieces."""
    dim = 2 * 150_000  # one group of 2: parts of 150 000 float32, pieces of 131 072 + 18 928
    protocol = {"name": "random_groups", "group_size": 2, "compression": "uniform8"}
    shared = {"count": 2, "dim": dim, "dtype": "float32", "stop.max_rounds": 1}
    on_net = sim.run(scenario(protocol, **shared))
    on_rounds = sim.run(scenario(protocol, clock="rounds", **shared))
    np.testing.assert_array_equal(on_net.state.x, on_rounds.state.x)
    pieces = wire_bytes("uniform8", 131_072, 4) + wire_bytes("uniform8", 18_928, 4)
    assert on_net.summary["bytes_sent"] == pytest.approx(2 * 2 * pieces)
    assert on_net.summary["messages"] == 2 * 2 * 2
    assert on_rounds.summary["bytes_sent"] == pytest.approx(
        2 * 2 * wire_bytes("uniform8", 150_000, 4)
    )


@pytest.mark.parametrize("dim", [1, 5, 8, 1001, 8 * 131_072 + 3])
def test_the_footprint_counts_the_planners_flows(dim):
    """The memory and workload estimates count the flows the planner sends: 2·(g−1) per
    piece of a part, an empty part (dim < g) sending nothing, a part over 512 KiB
    several pieces."""
    cls = get("random_groups")
    params = cls.Params(group_size=8)
    protocol = cls(params, Context(32, dim, 4, np.random.default_rng(0)))
    flows = protocol.plan(np.ones(32, dtype=bool), 0).flows()
    footprint = cls.footprint(params, 32, dim, 4, "network")
    assert flows.src.size == footprint.flows_per_round
