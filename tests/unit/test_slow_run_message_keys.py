"""The slow-run warning (sim.engine.workload.slow_run_message) names only the keys that
are set and bound the run: ``stop.target_var`` only when the scenario sets a target,
``stop.max_rounds`` or ``stop.max_time`` by whichever bounds a continuous-time run."""

from __future__ import annotations

from typing import Any

import pytest

import sim
from sim.engine.workload import slow_run_message

GOSSIP: dict[str, Any] = {
    "name": "slow",
    "clock": "network",
    "peers": {"count": 4096},
    "vector": {"dim": 8},
    "protocol": {"name": "pairwise_gossip"},
}
MOSHPIT: dict[str, Any] = {
    **GOSSIP,
    "protocol": {"name": "moshpit", "group_size": 16},
    "stop": {"max_rounds": 1_000_000, "target_var": None},
}
INSTANT: dict[str, Any] = {
    "name": "instant",
    "clock": "network",
    "peers": {"count": 8, "upload": "inf", "download": "inf", "latency": 0},
    "protocol": {"name": "sgp"},
}


def message(mapping: dict[str, Any], **stop: Any) -> str:
    scenario = sim.scenario_from_mapping({**mapping, "stop": {**mapping.get("stop", {}), **stop}})
    text = slow_run_message(scenario)
    assert text is not None
    return text


@pytest.mark.parametrize("target", [None, 0])
def test_no_target_means_no_target_var_in_the_warning(target):
    assert "target_var" not in message(MOSHPIT, target_var=target)
    continuous = message(GOSSIP, max_rounds=None, max_time=1e6, target_var=target)
    assert "target_var" not in continuous


def test_a_set_target_is_named():
    text = message(MOSHPIT, target_var=1e-9)
    assert text.endswith("; it ends earlier once stop.target_var is reached")


def test_a_continuous_run_bounded_by_max_rounds_names_max_rounds_not_max_time():
    text = message(GOSSIP, max_rounds=1_000_000, max_time=None, target_var=None)
    assert "stop.max_rounds" in text
    assert "stop.max_time" not in text
    bounded_by_time = message(GOSSIP, max_rounds=10**7, max_time=1e6, target_var=None)
    assert "1e+06 s of stop.max_time" in bounded_by_time
    assert "stop.max_rounds" not in bounded_by_time


def test_an_endless_run_without_a_target_does_not_count_on_one():
    text = message(INSTANT, max_rounds=None, max_time=10, target_var=None)
    assert text.startswith("this run may never end")
    assert "target_var" not in text
    assert text.endswith("set stop.max_rounds")
    with_target = message(INSTANT, max_rounds=None, max_time=10, target_var=1e-9)
    assert "only stop.target_var can end it" in with_target
