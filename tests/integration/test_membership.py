"""Joins and permanent leaves (``churn.joins`` / ``churn.leaves``) on both clocks."""

from __future__ import annotations

from itertools import takewhile

import numpy as np
import pytest

import sim
import sim.core.seeding
from sim.model.churn.membership import MembershipSchedule
from sim.model.churn.schedule import ChurnSchedule
from sim.model.scenario.churn import PopulationChange
from sim.model.vectors import initial_vectors


def test_joiners_come_up_and_leavers_go_down_for_good():
    rng = np.random.default_rng(0)
    joins, leaves = PopulationChange(count=3, rate=1.0), PopulationChange(count=2, rate=0.5)
    schedule = MembershipSchedule(ChurnSchedule(8), 5, joins, leaves, rng)
    assert schedule.present.sum() == 5
    changes = list(takewhile(lambda change: change.time_s <= 100.0, schedule))
    joined = np.concatenate([c.joined for c in changes])
    left = np.concatenate([c.left for c in changes])
    assert joined.tolist() == [5, 6, 7]  # in order
    assert left.size == 2
    for change in changes:
        assert set(change.joined) <= set(change.up)  # the base model keeps everyone up
        assert set(change.left) <= set(change.down)
    assert schedule.exists.sum() == 8 - 2
    assert not schedule.present[left].any()


def scenario(clock, **churn):
    data = {
        "name": "members",
        "clock": clock,
        "peers": {"count": 16, "upload": "100 Mbit/s", "latency": "5 ms"},
        "churn": {"model": "none", **churn},
        "vector": {"dim": 8},
        "protocol": {"name": "random_groups", "group_size": 4},
        "stop": {"max_rounds": 30, "target_var": 0},
        "metrics": {"every": 1e-3},
    }
    return sim.scenario_from_mapping(data)


@pytest.mark.parametrize("clock", ["rounds", "network"])
def test_metrics_are_taken_over_the_peers_that_exist(clock):
    sc = scenario(clock, joins={"count": 8, "rate": 20.0})
    result = sim.run(sc, seed=1)
    x0 = initial_vectors(sc.vector, 24, sim.core.seeding.component_rng(1, "init"))
    first = result.metrics.iloc[0]
    assert first["var"] == pytest.approx(np.mean((x0[:16] - x0[:16].mean(axis=0)) ** 2))
    assert result.metrics["alive_fraction"].max() == 1.0
    assert result.state.x.shape == (24, 8)
    assert result.summary["final_var"] < first["var"]


@pytest.mark.parametrize("clock", ["rounds", "network"])
def test_leavers_stop_counting_and_keep_their_vector(clock):
    sc = scenario(clock, leaves={"count": 4, "rate": 50.0})
    result = sim.run(sc, seed=2)
    assert result.metrics["alive_fraction"].min() == 1.0  # over the peers that exist
    # the leavers' vectors froze when they left, so the population does not reach one value
    x = result.state.x
    assert np.unique(np.round(x[:, 0], 12)).size > 1


def test_a_joiner_fetches_a_present_peers_vector_on_the_network_clock():
    sc = scenario("network", joins={"count": 1, "rate": 100.0}, rejoin="fetch")
    result = sim.run(sc, seed=3)
    x = result.state.x
    np.testing.assert_allclose(x[16], x[:16].mean(axis=0), rtol=1e-9)
