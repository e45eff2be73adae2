"""Whole runs whose parts stream in many pieces give the same results whether the network
clock runs each stream as one flow (:attr:`sim.engine.netclock.NetworkClock.streams`,
the default) or piece by piece, one flow per piece: summaries and metrics to 1e-9
relative, counts and final vectors exactly; and the same bit for bit on both network
paths (general, compiled)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import sim
from sim.engine.netclock import NetworkClock
from sim.network import compiled, flows

LOGNORMAL = {"dist": "lognormal", "median": "20 Mbit/s", "sigma": 1.0}
#: An async swarm streaming a 4 MB wire under exponential churn.
ASYNC: dict[str, Any] = {
    "schedule": "async",
    "peers": {"count": 16, "upload": LOGNORMAL, "download": LOGNORMAL, "latency": "10 ms",
              "compute": "200 ms"},
    "churn": {"model": "exponential", "mtbf": "6 s", "mttr": "2 s"},
    "vector": {"dim": 256, "dtype": "float32", "wire_bytes": "4 MB"},
    "stop": {"max_time": "12 s", "max_rounds": None, "target_var": 0},
}  # fmt: skip
MOSHPIT = {"name": "moshpit", "grid_dims": 2}
SCENARIOS: dict[str, dict[str, Any]] = {
    # 22 ms (the route latency is 20 ms) cancels about 90 requests, first pieces mostly
    "moshpit barrier rounds, pieces, timeouts, waves with fetch": {
        "peers": {"count": 24, "upload": LOGNORMAL, "download": LOGNORMAL, "latency": "10 ms"},
        "churn": {"model": "waves", "rate": 0.5, "fraction": 0.2, "duration": "2 s",
                  "rejoin": "fetch"},
        "vector": {"dim": 4096, "dtype": "float32"},
        "protocol": {**MOSHPIT, "group_size": 6, "part_bytes": "512 B",
                     "sender_timeout": "22 ms"},
        "stop": {"max_rounds": 5, "target_var": 0},
    },
    "async moshpit, wire bytes, exponential churn": {
        **ASYNC,
        "protocol": {**MOSHPIT, "group_size": 4, "matchmaking_time": "0.5 s",
                     "part_bytes": "256 KiB", "sender_timeout": "2 s"},
    },
    # no timeout: the requests run in chunks (sim.engine.netclock.chains), cut back at frontiers
    "async moshpit, chunks, exponential churn": {
        **ASYNC,
        "protocol": {**MOSHPIT, "group_size": 4, "matchmaking_time": "0.5 s",
                     "part_bytes": "128 KiB"},
        "metrics": {"every": "1 s"},
    },
    "moshpit barrier rounds, chunks, waves": {
        "peers": {"count": 24, "upload": LOGNORMAL, "download": LOGNORMAL, "latency": "10 ms"},
        "churn": {"model": "waves", "rate": 0.5, "fraction": 0.2, "duration": "2 s"},
        "vector": {"dim": 1024, "dtype": "float32", "wire_bytes": "2 MB"},
        "protocol": {**MOSHPIT, "group_size": 6, "part_bytes": "64 KiB"},
        "stop": {"max_rounds": 4, "target_var": 0},
    },
    "random_groups, 512 KiB pieces of a 4 MB wire": {
        "peers": {"count": 12, "upload": LOGNORMAL, "download": LOGNORMAL, "latency": "5 ms"},
        "vector": {"dim": 512, "wire_bytes": "4 MB"},
        "protocol": {"name": "random_groups", "group_size": 4},
        "stop": {"max_rounds": 3, "target_var": 0},
    },
}  # fmt: skip


def run(name: str, streams: bool, min_peers: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(NetworkClock, "streams", streams)
    monkeypatch.setattr(flows, "COMPILED_MIN_PEERS", min_peers)
    mapping = {"name": "streams", "clock": "network", **SCENARIOS[name]}
    return sim.run(sim.scenario_from_mapping(mapping), seed=5)


def same_numbers(a: Any, b: Any) -> None:
    if isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-300, nan_ok=True)
    else:
        assert a == b


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_streams_as_one_flow_give_the_piece_by_piece_run(name, monkeypatch):
    piece = run(name, False, 10**9, monkeypatch)
    stream = run(name, True, 10**9, monkeypatch)
    assert piece.summary.keys() == stream.summary.keys()
    for key, value in piece.summary.items():
        if key != "wall_time_s":
            same_numbers(stream.summary[key], value)
    pd.testing.assert_frame_equal(stream.metrics, piece.metrics, check_exact=False, rtol=1e-9)
    np.testing.assert_array_equal(np.asarray(stream.state.x), np.asarray(piece.state.x))


@pytest.mark.skipif(not compiled.available(), reason="numba not installed")
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_streams_are_the_same_on_both_paths(name, monkeypatch):
    general = run(name, True, 10**9, monkeypatch)
    fast = run(name, True, 0, monkeypatch)
    drop = {"wall_time_s"}
    assert {k: v for k, v in fast.summary.items() if k not in drop} == {
        k: v for k, v in general.summary.items() if k not in drop
    }
    assert fast.metrics.equals(general.metrics)
    assert np.array_equal(np.asarray(fast.state.x), np.asarray(general.state.x), equal_nan=True)
