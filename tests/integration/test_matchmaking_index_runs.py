"""Whole ``schedule: async`` runs with and without the matchmaking board's index
(``sim.engine.matchmaking.ENABLED``): the same vectors, summary, metrics and tables bit
for bit. Moshpit and random_groups, churn (exponential with every rejoin mode, and a
trace), client-mode peers, ``min_group_size``, matchmaking latencies and deadlines,
lognormal bandwidths.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sim
from sim.engine import matchmaking

LOGNORMAL = {"dist": "lognormal", "median": "50 Mbit/s", "sigma": 1.0}
CLASSES = [
    {"name": "server", "fraction": 0.75},
    {"name": "client", "fraction": 0.25, "client": True},
]
SCENARIOS: dict[str, dict[str, Any]] = {
    "moshpit, exponential churn (fetch), lognormal": {
        "peers": {"count": 48, "upload": LOGNORMAL, "download": LOGNORMAL, "latency": "10 ms",
                  "compute": "50 ms"},
        "churn": {"model": "exponential", "mtbf": "3 s", "mttr": "0.5 s", "rejoin": "fetch"},
        "vector": {"dim": 1024, "dtype": "float32"},
        "protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 2,
                     "matchmaking_time": 0.3, "averaging_timeout": 1.0},
    },
    "moshpit, exponential churn (keep), client peers, min_group_size": {
        "peers": {"count": 40, "upload": "20 Mbit/s", "latency": "20 ms", "compute": "80 ms",
                  "classes": CLASSES},
        "churn": {"model": "exponential", "mtbf": "2 s", "mttr": "1 s", "rejoin": "keep"},
        "vector": {"dim": 512},
        "protocol": {"name": "moshpit", "group_size": 5, "grid_dims": 2, "min_group_size": 3,
                     "matchmaking_time": 0.2, "matchmaking_latency": 0.05},
    },
    "random_groups, exponential churn (reset), one key": {
        "peers": {"count": 36, "upload": LOGNORMAL, "latency": "5 ms", "compute": "30 ms"},
        "churn": {"model": "exponential", "mtbf": "4 s", "mttr": "0.3 s", "rejoin": "reset"},
        "vector": {"dim": 256},
        "protocol": {"name": "random_groups", "group_size": 4, "min_group_size": 2,
                     "matchmaking_time": 0.5},
    },
    "random_groups, no churn, zero latencies (ties at one instant)": {
        "peers": {"count": 30, "upload": "100 Mbit/s", "latency": 0, "compute": "50 ms"},
        "vector": {"dim": 128},
        "protocol": {"name": "random_groups", "group_size": 3, "matchmaking_time": 0.1,
                     "matchmaking_latency": 0.0},
    },
}  # fmt: skip


def run(mapping: dict[str, Any], indexed: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """One run with the switch set; ``scans``: how many times the reference scan ran."""
    scans = [0]
    candidates = matchmaking.Matchmaker._candidates

    def counted(self: Any, s: Any) -> Any:
        scans[0] += 1
        return candidates(self, s)

    monkeypatch.setattr(matchmaking, "ENABLED", indexed)
    monkeypatch.setattr(matchmaking.Matchmaker, "_candidates", counted)
    data = {
        "name": "index",
        "clock": "network",
        "schedule": "async",
        "stop": {"max_time": "6 s", "target_var": 0},
        "metrics": {"every": "0.5 s"},
        **mapping,
    }
    result = sim.run(sim.scenario_from_mapping(data), seed=3)
    result.scans = scans[0]
    return result


def assert_identical(a: Any, b: Any) -> None:
    """Vectors, summary (but the wall time), metrics and every extra table, exactly."""
    assert np.array_equal(np.asarray(a.state.x), np.asarray(b.state.x), equal_nan=True)
    assert a.summary.keys() == b.summary.keys()
    for key, value in b.summary.items():
        if key != "wall_time_s":
            assert a.summary[key] == value or (
                value != value and a.summary[key] != a.summary[key]
            ), key
    assert a.metrics.equals(b.metrics)
    assert a.extra_tables.keys() == b.extra_tables.keys()
    for name, table in b.extra_tables.items():
        assert a.extra_tables[name].equals(table), name


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_an_async_run_is_the_same_with_the_board_index(name, monkeypatch):
    scanned = run(SCENARIOS[name], False, monkeypatch)
    indexed = run(SCENARIOS[name], True, monkeypatch)
    assert scanned.scans > 0
    assert indexed.scans == 0
    assert_identical(indexed, scanned)
    groups = scanned.extra_tables["groups"]
    assert len(groups) > 0
    assert scanned.summary["messages"] > 0
