"""A sweep's size is bounded: ``repeats`` ≤ 10 000 (as a scenario's), and a sweep of more
than ``MAX_RUNS`` runs (cases × grid cells × repeats) is refused before it is expanded,
with one line naming the key, never a hang."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sim.core.errors import ScenarioError
from sim.output.sweeps import plan, sweep_from_mapping
from sim.output.sweeps.plan import MAX_RUNS, expand

AVSIM = Path(sys.executable).with_name("avsim")
BASE: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 4},
    "vector": {"dim": 2},
    "protocol": {"name": "gossip", "topology": "ring"},
    "stop": {"max_rounds": 2},
}
#: More than the wait of any test: a command that takes this long hangs.
HANG_S = 60


def spec(**keys: Any) -> dict[str, Any]:
    return {"name": "s", "scenario": BASE, **keys}


@pytest.fixture
def never_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if any grid cell is validated (the sweep was being expanded)."""

    def refuse(*args: Any) -> Any:
        raise AssertionError("the sweep was expanded")

    monkeypatch.setattr(plan, "_with_cell", refuse)


@pytest.mark.parametrize("repeats", [10**30, 10_001])
def test_sweep_file_repeats_above_ten_thousand_are_an_error(repeats: int):
    with pytest.raises(ScenarioError) as caught:
        sweep_from_mapping(spec(repeats=repeats))
    assert caught.value.key == "repeats"
    assert "10000" in str(caught.value)


def test_repeats_argument_above_ten_thousand_is_an_error(never_expanded: None):
    with pytest.raises(ScenarioError, match="repeats: expected an integer <= 10000"):
        expand(sweep_from_mapping(spec()), None, 10**12)


def test_a_sweep_of_too_many_runs_is_refused_before_it_is_expanded(never_expanded: None):
    grid = {"stop.max_rounds": list(range(1, 1001)), "peers.count": list(range(4, 104))}
    with pytest.raises(ScenarioError) as caught:
        expand(sweep_from_mapping(spec(repeats=11, grid=grid)))
    assert caught.value.key == "repeats"
    assert caught.value.got == 1_100_000 > MAX_RUNS
    assert "1 cases × 100000 grid cells × 11 repeats" in str(caught.value)


def test_a_grid_too_large_by_itself_names_the_grid(never_expanded: None):
    grid = {f"k{i}": list(range(10)) for i in range(7)}  # 10**7 cells (never listed)
    with pytest.raises(ScenarioError) as caught:
        expand(sweep_from_mapping(spec(grid=grid)))
    assert caught.value.key == "grid"
    assert caught.value.got == 10**7


def test_repeats_of_the_cases_scenarios_count_before_the_expansion(never_expanded: None):
    cases = [{"label": "a", "repeats": 10_000}, {"label": "b", "repeats": 5_000}]
    grid = {"stop.max_rounds": list(range(1, 71))}  # 70 × 15 000 = 1 050 000 runs
    with pytest.raises(ScenarioError) as caught:
        expand(sweep_from_mapping(spec(cases=cases, grid=grid)))
    assert caught.value.key == "repeats"
    assert caught.value.got == 1_050_000
    assert "5000–10000 repeats" in str(caught.value)


def test_a_sweep_at_the_limit_is_not_refused_by_its_size():
    runs = expand(sweep_from_mapping(spec(repeats=3, grid={"stop.max_rounds": [2, 3]})))
    assert len(runs) == 6


def test_repeats_set_by_the_grid_are_counted_as_the_sweep_expands(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(plan, "MAX_RUNS", 25_000)  # the same rule, a smaller sweep
    grid = {"repeats": [10_000, 10_000, 10_000]}  # only known cell by cell
    with pytest.raises(ScenarioError) as caught:
        expand(sweep_from_mapping(spec(grid=grid)))
    assert caught.value.key == "grid.repeats"
    assert caught.value.got == 30_000
    assert "at most 25000 runs" in str(caught.value)


def avsim(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``avsim`` (a hang fails the test: TimeoutExpired after HANG_S)."""
    return subprocess.run(
        [str(AVSIM), *args], cwd=cwd, capture_output=True, text=True, timeout=HANG_S, check=False
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0]


def test_validate_refuses_huge_sweep_repeats_at_once(tmp_path: Path):
    (tmp_path / "s.yaml").write_text(
        "name: s\nscenario: {protocol: {name: gossip}, stop: {max_rounds: 2}}\n"
        "repeats: 1000000000000000000000000000000\n"
    )
    assert_one_line_error(avsim(["validate", "s.yaml"], tmp_path), "repeats", "10000")


def test_sweep_refuses_huge_command_line_repeats_at_once(tmp_path: Path):
    (tmp_path / "s.yaml").write_text(
        "name: s\nscenario: {protocol: {name: gossip}, stop: {max_rounds: 2}}\n"
    )
    result = avsim(["sweep", "s.yaml", "--repeats", "1000000000000", "-o", "out"], tmp_path)
    assert_one_line_error(result, "--repeats", "10000")
    assert not (tmp_path / "out").exists()


def test_validate_refuses_a_sweep_of_too_many_runs(tmp_path: Path):
    rounds = ", ".join(str(k) for k in range(1, 201))
    (tmp_path / "s.yaml").write_text(
        "name: s\nscenario: {protocol: {name: gossip}, stop: {max_rounds: 2}}\n"
        f"repeats: 10000\ngrid: {{stop.max_rounds: [{rounds}]}}\n"
    )
    result = avsim(["validate", "s.yaml"], tmp_path)
    assert_one_line_error(result, "repeats: expected a sweep of at most 1000000 runs", "2000000")
