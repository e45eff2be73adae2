"""Whole runs on the network clock give the same summary, metrics and final vectors, bit
for bit, whichever path computes the bandwidth phase (compiled or general)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sim
from sim.network import compiled, flows

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba not installed")

LOGNORMAL = {"dist": "lognormal", "median": "20 Mbit/s", "sigma": 1.0}
SCENARIOS: dict[str, dict[str, Any]] = {
    "moshpit lognormal, waves, timeouts, fetch": {
        "peers": {"count": 32, "upload": LOGNORMAL, "download": LOGNORMAL, "latency": "10 ms"},
        "churn": {
            "model": "waves",
            "rate": 0.5,
            "fraction": 0.2,
            "duration": "2 s",
            "rejoin": "fetch",
        },
        "vector": {"dim": 4096, "dtype": "float32"},
        "protocol": {"name": "moshpit", "group_size": 8, "grid_dims": 2, "sender_timeout": "1 s"},
        "stop": {"max_rounds": 6, "target_var": 0},
    },
    "random_groups with shared site links": {
        "peers": {
            "count": 24,
            "classes": [
                {"name": "a", "fraction": 0.5, "upload": "50 Mbit/s", "latency": "5 ms"},
                {"name": "b", "fraction": 0.5, "upload": "10 Mbit/s", "latency": "20 ms"},
            ],
        },
        "network": {
            "sites": {"a": "A", "b": "B"},
            "links": [{"a": "A", "b": "B", "capacity": "40 Mbit/s", "latency": "5 ms"}],
        },
        "vector": {"dim": 2048},
        "protocol": {"name": "random_groups", "group_size": 6},
        "stop": {"max_rounds": 4, "target_var": 0},
    },
    "pairwise gossip, continuous time, rtt_weighted": {
        "peers": {"count": 16, "upload": LOGNORMAL, "download": LOGNORMAL, "latency": "15 ms"},
        "network": {"sharing": "rtt_weighted"},
        "vector": {"dim": 256},
        "protocol": {"name": "pairwise_gossip"},
        "stop": {"max_time": "3 s", "max_rounds": None, "target_var": 0},
    },
    "async moshpit swarm with churn": {
        "schedule": "async",
        "peers": {
            "count": 32,
            "upload": LOGNORMAL,
            "download": LOGNORMAL,
            "latency": "10 ms",
            "compute": "200 ms",
        },
        "churn": {"model": "exponential", "mtbf": "20 s", "mttr": "3 s"},
        "vector": {"dim": 1024},
        "protocol": {
            "name": "moshpit",
            "group_size": 8,
            "grid_dims": 2,
            "matchmaking_time": "0.5 s",
        },
        "stop": {"max_time": "8 s", "max_rounds": None, "target_var": 0},
    },
}


def run(mapping: dict[str, Any], min_peers: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(flows, "COMPILED_MIN_PEERS", min_peers)
    scenario = sim.scenario_from_mapping({"name": "paths", "clock": "network", **mapping})
    return sim.run(scenario)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_run_is_the_same_on_both_paths(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    general = run(SCENARIOS[name], 10**9, monkeypatch)
    fast = run(SCENARIOS[name], 0, monkeypatch)
    drop = {"wall_time_s"}
    assert {k: v for k, v in fast.summary.items() if k not in drop} == {
        k: v for k, v in general.summary.items() if k not in drop
    }
    assert fast.metrics.equals(general.metrics)
    assert np.array_equal(np.asarray(fast.state.x), np.asarray(general.state.x), equal_nan=True)
    assert fast.extra_tables["traffic"].equals(general.extra_tables["traffic"])
    assert general.summary["messages"] > 0
