"""The ``schedule`` key (barrier | async), ``peers.compute`` as a duration, and the
engine each schedule picks (issue 12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import protocols
import sim
from protocols.base import BarrierProtocol, ContinuousProtocol, GroupProtocol, MailboxProtocol
from sim.cli import app
from sim.core.errors import ScenarioError
from sim.engine.schedules import (
    AsyncEngine,
    BarrierEngine,
    CollectiveEngine,
    ContinuousEngine,
    MailboxEngine,
    engine_class,
)
from sim.model.scenario import json_schema


def scenario(name: str = "moshpit", clock: str = "network", **overrides: Any) -> Any:
    data = {
        "name": "schedule",
        "clock": clock,
        "peers": {"count": 8},
        "protocol": {"name": name},
        "stop": {"max_time": 2, "target_var": 0},
    }
    return sim.scenario_from_mapping(data, overrides)


def test_schedule_defaults_to_barrier():
    assert scenario().schedule == "barrier"
    assert scenario(clock="rounds").schedule == "barrier"
    assert scenario().model_dump(mode="json")["schedule"] == "barrier"


def test_schedule_async_needs_the_network_clock():
    with pytest.raises(ScenarioError) as caught:
        scenario(clock="rounds", schedule="async")
    assert str(caught.value) == (
        "schedule: expected barrier with clock: rounds (schedule: async runs on the network "
        "clock), got 'async'"
    )


@pytest.mark.parametrize("name", ["all_reduce", "random_pairs"])
def test_schedule_async_refuses_protocols_without_an_async_form(name):
    with pytest.raises(ScenarioError) as caught:
        scenario(name, schedule="async")
    assert str(caught.value) == (
        f"schedule: expected barrier for protocol {name} (schedule: async runs a2cid2, "
        "gossip, moshpit, pairwise_gossip, push_sum, random_groups, ring_allreduce, sgp), got "
        "'async'"
    )


def test_the_refusal_is_one_line_with_exit_2(tmp_path: Path):
    path = tmp_path / "pairs.yaml"
    path.write_text(
        "name: g\nclock: network\nschedule: async\nprotocol: {name: random_pairs}\n"
        "stop: {max_time: 2}\n"
    )
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: schedule: expected barrier for protocol random_pairs")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["moshpit", "random_groups"])
def test_matchmaking_time_must_be_positive_under_async(name):
    assert scenario(name, **{"protocol.matchmaking_time": 0}).schedule == "barrier"
    with pytest.raises(ScenarioError, match=r"^protocol\.matchmaking_time: expected > 0 with"):
        scenario(name, schedule="async", **{"protocol.matchmaking_time": 0})


def test_random_groups_min_group_size_is_at_most_group_size():
    with pytest.raises(ScenarioError, match="min_group_size must be at most group_size"):
        scenario("random_groups", **{"protocol.group_size": 3, "protocol.min_group_size": 4})


def test_compute_accepts_durations():
    sc = scenario(**{"peers.compute": "200 ms"})
    assert sc.peers.compute.get("value") == pytest.approx(0.2)
    assert scenario(**{"peers.compute": 2}).peers.compute.get("value") == 2.0
    classes = [{"fraction": 1.0, "compute": "1.5 min"}]
    assert scenario(**{"peers.classes": classes}).peers.classes[0].compute.get("value") == 90
    with pytest.raises(ScenarioError, match=r"^peers\.compute"):
        scenario(**{"peers.compute": "fast"})


def test_the_schema_describes_the_new_keys():
    schema = json_schema()
    assert "async" in schema["properties"]["schedule"]["enum"]
    assert "barrier" in schema["properties"]["schedule"]["description"]
    text = str(schema)
    assert "seconds of local work per averaging step" in text
    assert "averaging_timeout" in text
    assert "matchmaking_latency" in text


@pytest.mark.parametrize("name", sorted(protocols.REGISTRY))
def test_the_engine_follows_the_schedule(name):
    cls = protocols.get(name)
    if issubclass(cls, GroupProtocol):
        expected: type | None = AsyncEngine
    elif issubclass(cls, MailboxProtocol):
        expected = MailboxEngine
    elif issubclass(cls, BarrierProtocol) and cls.collective:
        expected = CollectiveEngine
    elif issubclass(cls, ContinuousProtocol):
        expected = ContinuousEngine
    else:
        expected = None
    if expected is None:
        with pytest.raises(ScenarioError, match=r"^schedule: expected barrier for protocol"):
            scenario(name, schedule="async")
    else:
        assert engine_class(scenario(name, schedule="async")) is expected
    if issubclass(cls, BarrierProtocol):
        assert engine_class(scenario(name)) is BarrierEngine
