"""pairwise_gossip, push_sum and a2cid2 on the network clock in continuous time:
conservation under churn with overlapping exchanges, closed-form timing of one exchange or
push, cancellation on a failed flow, agreement with the rounds clock on a near-instant
network, determinism."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

import sim
from protocols._async_net import WINDOW
from sim.engine.schedules import ContinuousEngine, engine_for

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
    """The run's engine (continuous time) with its process started (not yet run)."""
    run = engine_for(sc, seed)
    assert isinstance(run, ContinuousEngine)
    run.env.process(run.process(None))
    return run


def first_ring_and_clock(run) -> tuple[float, int]:
    """Time and clock of the protocol's first ring, replayed from a copy of its generator."""
    rng = copy.deepcopy(run.protocol.ctx.rng)
    for window in range(1000):
        times, picked = run.protocol.clocks.ring(rng, WINDOW)
        if times.size:
            return window * WINDOW + float(times[0]), int(picked[0])
    raise AssertionError("no ring")


def slow_pair_preempted(build, tmp_path, trace_rows: str):
    """Two peers on 1 byte/s links, rings at rate 10, preempted as ``trace_rows`` says;
    started, with the first ring checked to come before the preemption at 5 s."""
    trace = tmp_path / "trace.csv"
    trace.write_text("peer,down_s,up_s\n" + trace_rows)
    sc = build(
        **{
            "peers.upload": 1.0,
            "peers.download": 1.0,
            "peers.count": 2,
            "protocol.rate": 10.0,
            "churn": {"model": "trace", "file": str(trace)},
        }
    )
    run = started(sc)
    assert first_ring(run) < 5
    return run


def first_ring(run) -> float:
    """Time of the protocol's first ring."""
    return first_ring_and_clock(run)[0]


CHURNED = {
    "peers.count": 64,
    "peers.upload": {"dist": "lognormal", "median": "1 Mbit/s", "sigma": 1.0},
    "protocol.rate": 4.0,
    "churn": {"model": "exponential", "mtbf": 5, "mttr": 2},
}


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
    run = slow_pair_preempted(scenario, tmp_path, "1,5,6\n")  # S bytes take 512 s
    x0 = run.state.x.copy()
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


@pytest.mark.parametrize(
    "protocol",
    [
        {"name": "pairwise_gossip", "topology": "ring", "max_concurrent": 2},
        {"name": "push_sum", "topology": "ring"},
        {"name": "a2cid2", "topology": "ring", "max_concurrent": 2},
    ],
)
def test_network_runs_are_deterministic(protocol):
    overrides = {
        "peers.upload": {"dist": "lognormal", "median": "5 Mbit/s", "sigma": 1.0},
        "protocol": protocol,
        "churn": {"model": "exponential", "mtbf": 5, "mttr": 2},
        "metrics.every": 0.5,
    }
    a = sim.run(scenario(**overrides), seed=3)
    b = sim.run(scenario(**overrides), seed=3)
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    np.testing.assert_array_equal(a.state.x, b.state.x)
    c = sim.run(scenario(**overrides), seed=4)
    assert not a.metrics.equals(c.metrics)


# --- push_sum --------------------------------------------------------------------------


def push_sum(**overrides):
    return scenario(**{"protocol": {"name": "push_sum", "topology": "ring"}, **overrides})


def test_push_sum_keeps_sum_and_weight_under_churn_with_overlapping_pushes():
    sc = push_sum(**CHURNED, **{"protocol.topology": "complete"})
    run = started(sc, seed=4)
    x0 = run.state.x.copy()
    run.env.run(until=20)
    counters, w = run.protocol.counters, run.state.extra["w"]
    assert counters["completed"] > 100
    assert counters["cancelled"] > 0
    assert counters["skipped_busy"] > 0
    assert counters["skipped_absent"] > 0
    assert counters["pushes"] - counters["completed"] - counters["cancelled"] > 0  # in flight
    np.testing.assert_allclose(run.state.x.sum(axis=0), x0.sum(axis=0), rtol=1e-12, atol=1e-12)
    assert w.sum() == pytest.approx(sc.peers.count, rel=1e-14)
    assert np.all(w > 0)
    estimate = run.protocol.estimate(run.state)
    assert np.var(estimate, axis=0).sum() < np.var(x0, axis=0).sum()


def test_one_push_is_delivered_after_latency_plus_its_bytes_over_the_bottleneck():
    sc = push_sum(**{"peers.count": 2, "protocol.rate": 0.05})
    run = started(sc)
    x0 = run.state.x.copy()
    at, sender = first_ring_and_clock(run)
    target = 1 - sender
    done_at = at + 0.020 + (S_BYTES + 8) / min(UP, DOWN)
    run.env.run(until=done_at * (1 - 1e-12))
    np.testing.assert_array_equal(run.state.x, x0)  # the half leaves only on delivery
    assert run.protocol.counters["pushes"] == 1
    run.env.run(until=done_at * (1 + 1e-12))
    x, w = run.state.x, run.state.extra["w"][:, 0]
    np.testing.assert_array_equal(x[sender], x0[sender] / 2)
    np.testing.assert_allclose(x[target], x0[target] + x0[sender] / 2, rtol=1e-15)
    assert (w[sender], w[target]) == (0.5, 1.5)
    assert run.protocol.counters["completed"] == 1
    assert run.clock.net.bytes_sent_total == S_BYTES + 8


def test_a_failed_push_delivers_nothing_and_the_sender_keeps_everything(tmp_path):
    run = slow_pair_preempted(push_sum, tmp_path, "0,5,6\n1,5,6\n")  # S + 8 bytes: 520 s
    x0 = run.state.x.copy()
    run.env.run(until=5.5)
    counters = run.protocol.counters
    np.testing.assert_array_equal(run.state.x, x0)
    np.testing.assert_array_equal(run.state.extra["w"], np.ones((2, 1)))
    assert counters["cancelled"] == 2  # both peers' pushes were in flight at 5 s
    assert counters["completed"] == 0
    assert counters["skipped_busy"] > 0
    assert run.clock.net.flows_failed == 2


# --- a2cid2 ----------------------------------------------------------------------------


def a2cid2(**overrides):
    return scenario(**{"protocol": {"name": "a2cid2", "topology": "ring"}, **overrides})


def test_a2cid2_keeps_the_mean_of_x_under_churn_with_overlapping_exchanges():
    sc = a2cid2(**CHURNED, **{"protocol.max_concurrent": 2})
    run = started(sc, seed=4)
    x0 = run.state.x.copy()
    run.env.run(until=20)
    protocol, state = run.protocol, run.state
    counters = protocol.counters
    assert counters["completed"] > 100
    assert counters["cancelled"] > 0
    assert counters["skipped_busy"] > 0
    assert counters["skipped_absent"] > 0
    assert counters["exchanges"] - counters["completed"] - counters["cancelled"] > 0
    assert protocol.eta > 0
    both = state.x + state.extra["x_tilde"]  # kept at any time, peers at their own times
    np.testing.assert_allclose(both.sum(axis=0), 2 * x0.sum(axis=0), rtol=1e-12, atol=1e-11)
    protocol.sync(state, run.env.now)
    assert np.all(protocol.last == run.env.now)
    np.testing.assert_allclose(state.x.sum(axis=0), x0.sum(axis=0), rtol=1e-12, atol=1e-11)


def mixed(x, x_tilde, elapsed, eta):
    c = -0.5 * np.expm1(-2 * eta * elapsed)
    return x + c * (x_tilde - x), x_tilde - c * (x_tilde - x)


def test_a2cid2_applies_the_values_sent_at_the_start_mixed_to_the_completion():
    eta, alpha = 0.7, 2.0
    sc = a2cid2(
        **{
            "peers.count": 2,
            "protocol.rate": 0.05,
            "protocol.eta": eta,
            "protocol.alpha_tilde": alpha,
        }
    )
    run = started(sc)
    x0 = run.state.x.copy()
    t0 = x0[::-1] * 3.0  # x̃ ≠ x so the mixing shows
    run.state.extra["x_tilde"] = t0.copy()
    ring = first_ring(run)
    done_at = ring + 0.020 + S_BYTES / min(UP, DOWN)
    run.env.run(until=done_at * (1 + 1e-12))
    protocol = run.protocol
    assert protocol.counters["completed"] == 1
    np.testing.assert_array_equal(protocol.last, [done_at, done_at])  # touched at completion
    x, xt = mixed(x0, t0, ring, eta)
    m = x[0] - x[1]  # sent at the ring
    x, xt = mixed(x, xt, done_at - ring, eta)
    x[0] -= m / 2
    x[1] += m / 2
    xt[0] -= alpha * m
    xt[1] += alpha * m
    np.testing.assert_allclose(run.state.x, x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(run.state.extra["x_tilde"], xt, rtol=1e-12, atol=1e-12)


def test_a_failed_flow_cancels_an_a2cid2_exchange_for_both_ends(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("peer,down_s,up_s\n1,5,6\n")
    sc = a2cid2(
        **{
            "peers.upload": 1.0,
            "peers.download": 1.0,
            "peers.count": 2,
            "protocol.rate": 10.0,
            "protocol.eta": 0.5,
            "churn": {"model": "trace", "file": str(trace)},
        }
    )
    run = started(sc)
    x0 = run.state.x.copy()
    run.env.run(until=10)
    run.protocol.sync(run.state, run.env.now)
    counters = run.protocol.counters
    # x̃ = x throughout, so only an exchange could have moved anything
    np.testing.assert_array_equal(run.state.x, x0)
    np.testing.assert_array_equal(run.state.extra["x_tilde"], x0)
    assert counters["cancelled"] == 1
    assert counters["completed"] == 0
    assert counters["exchanges"] == 2


def test_a2cid2_on_a_near_instant_network_samples_the_rounds_clock_trajectory():
    fast = {"peers.upload": 1e15, "peers.download": 1e15, "peers.latency": 0.0}
    stop = {"stop.max_time": None, "stop.max_rounds": 10}
    network = sim.run(a2cid2(**fast, **stop), seed=2)
    rounds = sim.run(a2cid2(**fast, **stop, clock="rounds"), seed=2)
    assert network.metrics["time_s"].tolist() == pytest.approx(list(range(11)))
    np.testing.assert_allclose(network.metrics["var"], rounds.metrics["var"], rtol=1e-6)


def test_the_summary_reports_the_exchange_counters():
    result = sim.run(scenario(**{**CHURNED, "stop.max_time": 5}), seed=1)
    summary = result.summary
    for name in ("rings", "exchanges", "completed", "cancelled", "skipped_absent"):
        assert isinstance(summary[name], int)
    assert summary["completed"] > 0
    assert summary["exchanges"] >= summary["completed"] + summary["cancelled"]
    assert summary["messages"] == 2 * summary["exchanges"]
