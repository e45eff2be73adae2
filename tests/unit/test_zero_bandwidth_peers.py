"""A peer with 0 upload or download bandwidth on the network clock would never finish a
transfer: the run is refused in one line naming the key that gave the value (the
peers' value, or a class's override) and the first such peer, not the flow network's
internal array name."""

from __future__ import annotations

from typing import Any

import pytest

import sim
from sim.core.errors import ScenarioError


def mapping(**peers: Any) -> dict[str, Any]:
    return {
        "name": "zero-bandwidth",
        "clock": "network",
        "peers": {"count": 8, "upload": "10 Mbit/s", "download": "10 Mbit/s", **peers},
        "protocol": {"name": "pairwise_gossip"},
        "stop": {"max_time": 2},
    }


@pytest.mark.parametrize("field", ["upload", "download"])
def test_a_zero_bandwidth_is_refused_naming_the_peers_key(field: str):
    sc = sim.scenario_from_mapping(mapping(**{field: "0 bit/s"}))
    expected = rf"^peers\.{field}: expected a bandwidth > 0 on the network clock \(peer 0 and 7"
    with pytest.raises(ScenarioError, match=expected):
        sim.run(sc)


def test_a_class_override_is_named():
    classes = [
        {"name": "fast", "fraction": 0.5},
        {"name": "dead", "fraction": 0.5, "download": 0},
    ]
    sc = sim.scenario_from_mapping(mapping(classes=classes))
    with pytest.raises(ScenarioError, match=r"^peers\.classes\.1\.download: expected a bandwidth"):
        sim.run(sc)


def test_the_rounds_clock_does_not_use_bandwidths():
    sc = sim.scenario_from_mapping(
        {**mapping(upload=0), "clock": "rounds", "stop": {"max_rounds": 2}}
    )
    assert sim.run(sc).summary["rounds"] == 2
