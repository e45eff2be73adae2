"""The slow-run estimate of a ``schedule: async`` run (sim.engine.workload): a group
protocol's peers each step at most once per ``compute`` + matchmaking (DHT latency, then
a join request and its reply) + the shortest round, for ``stop.max_time`` seconds; a
collective's attempts wait for the slowest class's ``compute``; continuous-time
protocols are counted as under barrier."""

from __future__ import annotations

import math
from typing import Any

import pytest

import sim
from sim.engine.resources import footprint
from sim.engine.workload import FLOW_COST_S, estimate_events, shortest_round_s, slow_run_message

LATENCY = 0.01
ASYNC: dict[str, Any] = {
    "name": "async",
    "clock": "network",
    "schedule": "async",
    "peers": {"count": 4096, "latency": LATENCY, "compute": 0.5},
    "vector": {"dim": 8},
    "protocol": {"name": "moshpit", "group_size": 16, "matchmaking_time": 2},
    "stop": {"max_time": 1e6, "max_rounds": None, "target_var": None},
}


def scenario(base: dict[str, Any] = ASYNC, **changes: Any) -> Any:
    return sim.scenario_from_mapping({**base, **changes})


def expected_steps(sc: Any, computes: list[tuple[float, float]], dht_s: float) -> float:
    """Steps a peer: Σ fraction / (compute + DHT + request round trip + round)."""
    round_s = shortest_round_s(sc, footprint(sc).round_bytes_per_peer)
    return sum(f / (c + dht_s + 2 * LATENCY + round_s) for f, c in computes) * 1e6


def test_a_group_protocols_steps_follow_compute_matchmaking_and_the_round():
    sc = scenario()
    events, seconds, drivers = estimate_events(sc)
    steps = expected_steps(sc, [(1.0, 0.5)], dht_s=2 * LATENCY)  # default DHT latency
    assert events == pytest.approx(footprint(sc).flows_per_round * steps, rel=1e-12)
    assert seconds == pytest.approx(events * FLOW_COST_S)
    assert "peers.compute" in drivers
    assert "1e+06 s of stop.max_time" in drivers


def test_longer_local_work_means_fewer_events_than_barrier_rounds():
    barrier, _, _ = estimate_events(scenario(schedule="barrier"))
    fast, _, _ = estimate_events(scenario())
    slow, _, _ = estimate_events(scenario(peers={**ASYNC["peers"], "compute": 5.0}))
    assert slow < fast < barrier


def test_classes_step_at_their_own_pace_and_a_set_dht_latency_counts():
    peers = {**ASYNC["peers"], "classes": [
        {"fraction": 0.25, "compute": 0.2}, {"fraction": 0.75, "compute": 2.0}]}  # fmt: skip
    protocol = {**ASYNC["protocol"], "matchmaking_latency": 0.3}
    sc = scenario(peers=peers, protocol=protocol)
    steps = expected_steps(sc, [(0.25, 0.2), (0.75, 2.0)], dht_s=0.3)
    assert estimate_events(sc)[0] == pytest.approx(footprint(sc).flows_per_round * steps)


def test_max_rounds_bounds_an_async_run_in_seconds():
    sc = scenario(stop={"max_time": None, "max_rounds": 1000, "target_var": None})
    steps = expected_steps(sc, [(1.0, 0.5)], dht_s=2 * LATENCY) / 1000
    events, _, drivers = estimate_events(sc)
    assert events == pytest.approx(footprint(sc).flows_per_round * steps)
    assert "1000 s of stop.max_rounds" in drivers
    assert "stop.max_time" not in drivers


def test_a_collectives_attempts_wait_for_the_slowest_class():
    peers = {**ASYNC["peers"], "classes": [
        {"fraction": 0.5, "compute": 0.2}, {"fraction": 0.5, "compute": 3.0}]}  # fmt: skip
    sc = scenario(peers=peers, protocol={"name": "ring_allreduce"})
    attempts = 1e6 / (3.0 + shortest_round_s(sc, footprint(sc).round_bytes_per_peer))
    events, _, drivers = estimate_events(sc)
    assert events == pytest.approx(footprint(sc).flows_per_round * attempts)
    assert "attempts" in drivers


def test_a_continuous_protocol_is_counted_as_under_barrier():
    gossip = {**ASYNC, "protocol": {"name": "pairwise_gossip"}}
    assert estimate_events(scenario(gossip)) == estimate_events(
        scenario(gossip, schedule="barrier")
    )


def test_a_long_async_run_is_warned_about_naming_compute():
    text = slow_run_message(scenario())
    assert text is not None
    assert "steps a peer (peers.compute + ≥" in text
    assert not math.isinf(estimate_events(scenario())[0])
    assert slow_run_message(scenario(stop={**ASYNC["stop"], "max_time": 10.0})) is None
