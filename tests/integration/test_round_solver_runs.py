"""Whole barrier runs on the network clock, with and without one-shot rounds
(``sim.engine.round_solver``): the same vectors bit for bit, the same counters and
traffic table exactly, the same times to 1e-9 relative; churn, ``max_time``, stragglers,
refused messages, compression wires, shared links and ``rtt_weighted`` sharing included.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.engine import round_solver
from sim.engine.trace import TraceOptions

OneShotRounds = round_solver.OneShotRounds
LOGNORMAL = {"dist": "lognormal", "median": "20 Mbit/s", "sigma": 1.0}
SCENARIOS: dict[str, dict[str, Any]] = {
    "gossip ring, equal peers": {
        "peers": {"count": 64, "upload": "100 Mbit/s", "latency": "10 ms"},
        "vector": {"dim": 64},
        "protocol": {"name": "gossip", "topology": "ring"},
        "stop": {"max_rounds": 12, "target_var": 0},
    },
    "gossip metropolis, exponential churn, fetch, max_time, targets": {
        "peers": {"count": 48, "upload": "20 Mbit/s", "download": "50 Mbit/s", "latency": "30 ms"},
        "churn": {"model": "exponential", "mtbf": "5 s", "mttr": "1 s", "rejoin": "fetch"},
        "vector": {"dim": 4096, "dtype": "float32"},
        "protocol": {"name": "gossip", "topology": "random_regular", "weights": "metropolis"},
        "stop": {"max_time": "6 s", "max_rounds": None, "target_var": 0},
        "metrics": {"every": "0.5 s", "targets": [1.0e-2]},
    },
    "sgp push-sum, uniform8 wire, stragglers": {
        "peers": {"count": 40, "upload": "50 Mbit/s", "latency": "5 ms", "delay": "20 ms"},
        "vector": {"dim": 2048},
        "protocol": {"name": "sgp", "push_sum": True, "compression": "uniform8"},
        "stop": {"max_rounds": 10, "target_var": 0},
    },
    "sgp, bernoulli churn, fp16, two classes": {
        "peers": {
            "count": 32,
            "classes": [
                {"name": "dc", "fraction": 0.25, "upload": "1 Gbit/s", "latency": "5 ms"},
                {
                    "name": "home",
                    "fraction": 0.75,
                    "upload": "10 Mbit/s",
                    "download": "50 Mbit/s",
                    "latency": "30 ms",
                },
            ],
        },
        "churn": {"model": "bernoulli", "p": 0.1},
        "vector": {"dim": 1024},
        "protocol": {"name": "sgp", "compression": "fp16"},
        "stop": {"max_rounds": 10, "target_var": 0},
    },
    "gossip lognormal (over the budget), rtt_weighted": {
        "peers": {"count": 48, "upload": LOGNORMAL, "download": LOGNORMAL, "latency": "15 ms"},
        "network": {"sharing": "rtt_weighted"},
        "vector": {"dim": 256},
        "protocol": {"name": "gossip", "topology": "ring"},
        "stop": {"max_rounds": 8, "target_var": 0},
    },
    "random_pairs over shared site links": {
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
        "protocol": {"name": "random_pairs"},
        "stop": {"max_rounds": 6, "target_var": 0},
    },
}


def run(mapping: dict[str, Any], one_shot: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """One run with the switch set; the one-shot senders it built are in ``senders``."""
    senders: list[OneShotRounds] = []

    class Recorded(OneShotRounds):
        def __init__(self, clock: Any) -> None:
            super().__init__(clock)
            senders.append(self)

    monkeypatch.setattr(round_solver, "ENABLED", one_shot)
    monkeypatch.setattr(round_solver, "OneShotRounds", Recorded)
    scenario = sim.scenario_from_mapping({"name": "one-shot", "clock": "network", **mapping})
    result = sim.run(scenario)
    result.senders = senders
    return result


def assert_same_run(fast: Any, general: Any) -> None:
    """Vectors, counters and traffic exactly; times (and what depends on them) to 1e-9."""
    assert np.array_equal(np.asarray(fast.state.x), np.asarray(general.state.x), equal_nan=True)
    assert fast.extra_tables["traffic"].equals(general.extra_tables["traffic"])
    for key, value in general.summary.items():
        if key == "wall_time_s":
            continue
        if isinstance(value, float):
            assert fast.summary[key] == pytest.approx(value, rel=1e-9, nan_ok=True), key
        else:
            assert fast.summary[key] == value, key
    assert list(fast.metrics.columns) == list(general.metrics.columns)
    for column in general.metrics.columns:
        a, b = fast.metrics[column], general.metrics[column]
        if pd.api.types.is_float_dtype(b):
            assert np.allclose(a, b, rtol=1e-9, atol=0.0, equal_nan=True), column
        else:
            assert a.equals(b), column


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_run_is_the_same_with_one_shot_rounds(name: str, monkeypatch) -> None:
    general = run(SCENARIOS[name], False, monkeypatch)
    fast = run(SCENARIOS[name], True, monkeypatch)
    assert general.senders == []
    assert_same_run(fast, general)
    assert general.summary["messages"] > 0
    (sender,) = fast.senders
    if "lognormal" in name:  # every round over the budget: it gave up after a few
        assert sender.one_shot == 0
        assert sender.general == fast.summary["rounds"]
    else:
        assert sender.one_shot > 0


def test_a_tracer_keeps_the_general_path(monkeypatch) -> None:
    mapping = SCENARIOS["gossip ring, equal peers"]
    assert len(run(mapping, True, monkeypatch).senders) == 1
    scenario = sim.scenario_from_mapping({"name": "t", "clock": "network", **mapping})
    senders: list[Any] = []
    monkeypatch.setattr(round_solver, "OneShotRounds", lambda clock: senders.append(clock))
    traced = sim.run(scenario, trace=TraceOptions(peers=frozenset({0})))
    assert senders == []  # a traced clock records every flow: general path
    assert traced.summary["messages"] == 12 * 128


@settings(max_examples=12, deadline=None)
@given(
    protocol=st.sampled_from(
        [
            {"name": "gossip", "topology": "ring"},
            {"name": "gossip", "topology": "exponential", "compression": "quantile8"},
            {"name": "sgp"},
            {"name": "sgp", "push_sum": True},
            {"name": "random_pairs"},
        ]
    ),
    count=st.integers(3, 40),
    upload=st.sampled_from(["10 Mbit/s", "100 Mbit/s"]),
    download=st.sampled_from([None, "20 Mbit/s"]),
    latency=st.sampled_from(["1 ms", "10 ms", "40 ms"]),
    delay=st.sampled_from([None, "5 ms"]),
    churn=st.sampled_from(
        [
            {"model": "none"},
            {"model": "bernoulli", "p": 0.2},
            {"model": "exponential", "mtbf": "3 s", "mttr": "0.5 s", "rejoin": "fetch"},
        ]
    ),
    seed=st.integers(0, 5),
)
def test_random_runs_are_the_same_with_one_shot_rounds(
    protocol, count, upload, download, latency, delay, churn, seed
) -> None:
    peers: dict[str, Any] = {"count": count, "upload": upload, "latency": latency}
    if download is not None:
        peers["download"] = download
    if delay is not None:
        peers["delay"] = delay
    mapping = {
        "seed": seed,
        "peers": peers,
        "churn": churn,
        "vector": {"dim": 512},
        "protocol": protocol,
        "stop": {"max_time": "4 s", "max_rounds": 15, "target_var": 0},
    }
    with pytest.MonkeyPatch.context() as monkeypatch:
        general = run(mapping, False, monkeypatch)
        fast = run(mapping, True, monkeypatch)
    assert_same_run(fast, general)
