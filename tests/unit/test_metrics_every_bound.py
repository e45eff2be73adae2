"""``metrics.every`` has a lower bound (1 µs, or a millionth of a round): an absurdly
small sampling interval is a one-line error naming the key, not an OverflowError
traceback from the recorder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.core.errors import ScenarioError
from sim.model.scenario import scenario_from_mapping

BASE: dict[str, Any] = {
    "peers": {"count": 4},
    "vector": {"dim": 2},
    "protocol": {"name": "gossip", "topology": "ring"},
    "stop": {"max_rounds": 3},
}
NETWORK: dict[str, Any] = {
    **BASE,
    "clock": "network",
    "protocol": {"name": "pairwise_gossip", "topology": "ring"},
    "stop": {"max_time": 2.0, "max_rounds": None},
}


@pytest.mark.parametrize("scenario", [BASE, NETWORK], ids=["rounds", "network"])
@pytest.mark.parametrize("every", [5e-324, 1e-300, 9.9e-7, "1 ns", "0.5 us"])
def test_a_sampling_interval_below_a_microsecond_is_an_error(scenario: dict, every: Any):
    with pytest.raises(ScenarioError) as caught:
        scenario_from_mapping({**scenario, "metrics": {"every": every}})
    assert caught.value.key == "metrics.every"
    assert str(caught.value).startswith("metrics.every: expected at least 1e-06")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("every", [1e-6, "1 us", 0.5, 3])
def test_a_sampling_interval_from_a_microsecond_is_accepted(every: Any):
    scenario = scenario_from_mapping({**NETWORK, "metrics": {"every": every}})
    assert scenario.metrics.every >= 1e-6


def test_run_with_a_denormal_interval_is_one_line_and_exit_2(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "peers: {count: 4}\nvector: {dim: 2}\nprotocol: {name: gossip, topology: ring}\n"
        "stop: {max_rounds: 3}\nmetrics: {every: 5.0e-324}\n"
    )
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert result.stderr.splitlines() == [
        "error: metrics.every: expected at least 1e-06 (1 µs, or a millionth of a round), "
        "got 5e-324"
    ]
    assert not (tmp_path / "out").exists()
