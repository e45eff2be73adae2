"""Honest stop rules: defaults per clock, bounds the user set, and ``stop_reason``."""

from __future__ import annotations

import threading

import pytest
import yaml

import sim
import sim.engine
from sim.core.errors import ScenarioError
from sim.output.run_folder import write_result

GOSSIP = {"name": "gossip", "topology": "ring"}


def scenario(clock: str = "rounds", protocol: dict | None = None, **stop):
    return sim.scenario_from_mapping(
        {
            "name": "stop",
            "clock": clock,
            "peers": {"count": 8},
            "vector": {"dim": 2},
            "protocol": protocol or GOSSIP,
            "stop": stop,
        }
    )


def test_rounds_clock_without_a_bound_gets_50_rounds_recorded_in_the_scenario():
    sc = scenario()
    assert sc.stop.max_rounds == 50
    assert sc.model_dump(mode="json")["stop"]["max_rounds"] == 50
    result = sim.run(scenario(target_var=0))
    assert result.summary["rounds"] == 50
    assert result.summary["stop_reason"] == "max_rounds"


def test_a_max_time_the_user_set_is_not_cut_by_a_default_round_bound():
    """The issue's case: a network-clock run with max_time used to stop at 50 rounds."""
    sc = scenario("network", max_time="10 min", target_var=0)
    assert sc.stop.max_rounds is None
    result = sim.run(sc)
    assert result.summary["rounds"] > 50
    assert result.summary["sim_time_s"] == pytest.approx(600.0)
    assert result.summary["stop_reason"] == "max_time"


def test_max_time_alone_bounds_the_rounds_clock():
    result = sim.run(scenario(max_time=7, target_var=0))
    assert result.summary["rounds"] == 7
    assert result.summary["stop_reason"] == "max_time"
    assert result.scenario["stop"]["max_rounds"] is None


def test_an_explicit_null_max_rounds_with_a_target_runs_until_the_target():
    result = sim.run(scenario(max_rounds=None, target_var=1e-13))
    assert result.summary["stop_reason"] == "target"
    assert result.summary["rounds"] > 50  # ring gossip of 8 peers needs more


@pytest.mark.parametrize(
    ("clock", "stop", "expected"),
    [
        ("network", {}, "stop.max_time or stop.max_rounds with clock: network"),
        ("network", {"max_rounds": None}, "stop.max_time or stop.max_rounds"),
        ("rounds", {"max_rounds": None, "target_var": 0}, "a run must end"),
    ],
)
def test_a_run_that_could_not_end_is_refused_naming_the_key(clock, stop, expected):
    with pytest.raises(ScenarioError, match=expected) as info:
        scenario(clock, **stop)
    assert str(info.value).startswith("stop.max_time:")


def test_stop_reason_target_and_max_rounds():
    assert sim.run(scenario(max_rounds=500)).summary["stop_reason"] == "target"
    assert sim.run(scenario(max_rounds=3)).summary["stop_reason"] == "max_rounds"


def test_target_on_var_alive_stops_on_the_present_peers():
    mapping = {
        "name": "alive",
        "peers": {"count": 16},
        "vector": {"dim": 2},
        "protocol": {"name": "random_groups", "group_size": 16},  # one group of the present
        "churn": {"model": "bernoulli", "p": 0.3, "rejoin": "keep"},
        "stop": {"max_rounds": 20, "target_var": 1e-12, "target_on": "var_alive"},
        "metrics": {"targets": [1e-12]},
    }
    on_alive = sim.run(sim.scenario_from_mapping(mapping)).summary
    on_all = sim.run(
        sim.scenario_from_mapping({**mapping, "stop": {**mapping["stop"], "target_on": "var"}})
    ).summary
    # one group mean of the present peers: var_alive is 0, var is not (stale absent peers)
    assert on_alive["stop_reason"] == "target"
    assert on_alive["rounds"] == 1
    assert on_alive["time_to_target_s"] == on_alive["time_to_1e-12_alive_s"] == 1.0
    assert on_all["rounds"] > 1
    assert on_all["time_to_target_s"] == on_all["time_to_1e-12_s"]
    assert on_all["time_to_1e-12_alive_s"] == 1.0


def test_target_on_rejects_other_metrics():
    with pytest.raises(ScenarioError, match=r"stop\.target_on"):
        scenario(target_on="err_init")


def test_summary_and_scenario_files_state_the_stop(tmp_path):
    result = sim.run(scenario(max_rounds=3))
    folder = write_result(result, tmp_path / "out")
    written = yaml.safe_load((folder / "scenario.yaml").read_text())
    assert written["stop"] == {"max_rounds": 3, "max_time": None, "target_var": 1e-9,
                               "target_on": "var"}  # fmt: skip
    summary = yaml.safe_load((folder / "summary.json").read_text())
    assert summary["runs"][0]["stop_reason"] == "max_rounds"
    assert summary["runs"][0]["nan"] is None


@pytest.mark.parametrize("clock", ["rounds", "network"])
def test_an_interrupt_already_set_ends_the_run_at_its_first_sample(clock):
    stop = threading.Event()
    stop.set()
    result = sim.engine.run(scenario(clock, max_rounds=100, target_var=0), interrupt=stop)
    assert result.summary["stop_reason"] == "interrupted"
    assert result.summary["rounds"] == 0
    assert len(result.metrics) == 1


def test_an_interrupt_set_mid_run_ends_it_at_the_next_sample_with_a_full_result():
    stop = threading.Event()
    seen = []

    def progress(fraction: float) -> None:
        seen.append(fraction)
        if len(seen) == 5:
            stop.set()

    result = sim.engine.run(scenario(max_rounds=100, target_var=0), progress=progress,
                            interrupt=stop)  # fmt: skip
    assert result.summary["stop_reason"] == "interrupted"
    assert result.summary["rounds"] == 6  # the sample after the 5th round's progress
    assert result.metrics["round"].iloc[-1] == 6
    assert result.state is not None
