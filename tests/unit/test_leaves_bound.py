"""More permanent leaves than peers can ever exist is a one-line error naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sim.core.errors import ScenarioError
from sim.model.scenario import scenario_from_mapping

BASE = {
    "name": "leaves",
    "peers": {"count": 8},
    "vector": {"dim": 2},
    "protocol": {"name": "random_groups"},
}


def churn(**changes):
    return {**BASE, "churn": {"model": "none", **changes}}


def test_leaves_beyond_the_population_name_the_key_and_the_bound():
    with pytest.raises(ScenarioError) as err:
        scenario_from_mapping(churn(leaves={"count": 10**30, "rate": 1}))
    assert err.value.key == "churn.leaves.count"
    assert "at most peers.count + churn.joins.count = 8" in str(err.value)


def test_joins_raise_the_bound_and_every_peer_may_leave():
    scenario_from_mapping(churn(leaves={"count": 8, "rate": 1}))
    scenario_from_mapping(churn(joins={"count": 4, "rate": 1}, leaves={"count": 12, "rate": 1}))
    with pytest.raises(ScenarioError):
        scenario_from_mapping(churn(joins={"count": 4, "rate": 1}, leaves={"count": 13, "rate": 1}))


def test_the_cli_says_it_in_one_line_with_exit_2(tmp_path: Path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: s\npeers: {count: 8}\nvector: {dim: 2}\nprotocol: {name: random_groups}\n"
        "churn: {model: none, leaves: {count: 1000000000000000000000000000000, rate: 1}}\n"
    )
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("avsim")),
            "run",
            str(scenario),
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: churn.leaves.count")
