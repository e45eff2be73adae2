"""pairwise_gossip on the network clock in continuous time: sum preservation under churn
with overlapping exchanges, one exchange's closed-form timing, cancellation on a failed
flow, determinism."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

import sim
from protocols._async_net import WINDOW
from sim.engine import Run

DIM = 64
S_BYTES = DIM * 8
UP, DOWN = 12.5e6, 25e6  # bytes/s: the uplink limits


def scenario(**overrides):
    data = {
        "name": "async-net",
        "clock": "network",
        "peers": {"count": 32, "upload": UP, "download": DOWN, "latency": "10 ms"},
        "vector": {"dim": DIM},
        "protocol": {"name": "pairwise_gossip", "topology": "ring"},
        "stop": {"max_time": 20, "target_var": 0},
    }
    return sim.scenario_from_mapping(data, overrides)


def started(sc, seed=0):
    """A Run with its network process started (not yet run)."""
    run = Run(sc, seed)
    run.env.process(run.network_process(None))
    return run


def first_ring(run) -> float:
    """Time of the protocol's first ring, replayed from a copy of its generator."""
    rng = copy.deepcopy(run.protocol.ctx.rng)
    for window in range(1000):
        times, _ = run.protocol.clocks.ring(rng, WINDOW)
        if times.size:
            return window * WINDOW + float(times[0])
    raise AssertionError("no ring")


def test_global_sum_is_preserved_under_churn_with_overlapping_exchanges():
    sc = scenario(
        **{
            "peers.count": 64,
            "peers.upload": {"dist": "lognormal", "median": "1 Mbit/s", "sigma": 1.0},
            "protocol.max_concurrent": 2,
            "protocol.topology": "complete",
            "protocol.rate": 4.0,
            "churn": {"model": "exponential", "mtbf": 5, "mttr": 2},
        }
    )
    run = started(sc, seed=4)
    x0 = run.state.x.copy()
    run.env.run(until=20)
    counters = run.protocol.counters
    assert counters["completed"] > 100
    assert counters["cancelled"] > 0
    assert counters["skipped_busy"] > 0
    assert counters["skipped_absent"] > 0
    in_flight = counters["exchanges"] - counters["completed"] - counters["cancelled"]
    assert in_flight > 0
    np.testing.assert_allclose(run.state.x.sum(axis=0), x0.sum(axis=0), rtol=1e-12, atol=1e-12)
    assert np.var(run.state.x, axis=0).sum() < np.var(x0, axis=0).sum()


def test_one_exchange_completes_after_latency_plus_one_vector_over_the_bottleneck():
    sc = scenario(**{"peers.count": 2, "protocol.rate": 0.05})
    run = started(sc)
    x0 = run.state.x.copy()
    done_at = first_ring(run) + 0.020 + S_BYTES / min(UP, DOWN)
    run.env.run(until=done_at * (1 - 1e-12))
    np.testing.assert_array_equal(run.state.x, x0)
    assert run.protocol.counters["exchanges"] == 1
    run.env.run(until=done_at * (1 + 1e-12))
    np.testing.assert_allclose(run.state.x, np.tile(x0.mean(axis=0), (2, 1)), rtol=1e-12)
    assert run.protocol.counters["completed"] == 1
    assert run.clock.net.flows_completed == 2


def test_a_failed_flow_cancels_the_exchange_for_both_ends(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("peer,down_s,up_s\n1,5,6\n")
    slow = {"peers.upload": 1.0, "peers.download": 1.0}  # S bytes take 512 s
    sc = scenario(
        **slow,
        **{
            "peers.count": 2,
            "protocol.rate": 10.0,
            "churn": {"model": "trace", "file": str(trace)},
        },
    )
    run = started(sc)
    x0 = run.state.x.copy()
    assert first_ring(run) < 5
    run.env.run(until=10)
    counters = run.protocol.counters
    np.testing.assert_array_equal(run.state.x, x0)  # nothing applied to either end
    assert counters["cancelled"] == 1
    assert counters["completed"] == 0
    # both ends were freed at the preemption: a new exchange started once 1 was back
    assert counters["exchanges"] == 2
    assert counters["skipped_busy"] > 0
    assert counters["skipped_absent"] > 0
    assert run.clock.net.flows_failed == 2
    assert 0 < run.clock.net.bytes_sent_total < 4 * S_BYTES


def test_without_churn_rounds_and_whole_seconds_agree_and_metrics_are_sampled():
    result = sim.run(scenario(**{"stop.max_time": None, "stop.max_rounds": 5}))
    assert result.summary["rounds"] == 5
    assert result.summary["sim_time_s"] == pytest.approx(5.0)
    assert result.metrics["time_s"].tolist() == pytest.approx([0, 1, 2, 3, 4, 5])
    assert result.summary["messages"] % 2 == 0
    assert result.summary["final_var"] < result.metrics["var"].iloc[0]


def test_network_runs_of_pairwise_gossip_are_deterministic(tmp_path):
    overrides = {
        "peers.upload": {"dist": "lognormal", "median": "5 Mbit/s", "sigma": 1.0},
        "protocol.max_concurrent": 2,
        "churn": {"model": "exponential", "mtbf": 5, "mttr": 2},
        "metrics.every": 0.5,
    }
    a = sim.run(scenario(**overrides), seed=3)
    b = sim.run(scenario(**overrides), seed=3)
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    np.testing.assert_array_equal(a.state.x, b.state.x)
    c = sim.run(scenario(**overrides), seed=4)
    assert not a.metrics.equals(c.metrics)
