"""`avsim sweep --set/--repeats` and `sim.sweep(overrides=, repeats=)`: what wins, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

import sim
from sim.cli import app
from sim.core.errors import ScenarioError
from sim.output.sweeps import sweep, sweep_from_mapping
from sim.output.sweeps.plan import expand

BASE: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 16},
    "vector": {"dim": 2},
    "churn": {"model": "bernoulli", "p": 0.0},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 4},
}
SPEC: dict[str, Any] = {
    "name": "s",
    "scenario": BASE,
    "repeats": 2,
    "cases": [
        {"label": "ar", "protocol": {"name": "all_reduce"}, "stop.max_rounds": 1},
        {"label": "rg2", "protocol": {"name": "random_groups", "group_size": 2}},
    ],
    "grid": {"churn.p": [0.0, 0.1]},
}


def scenarios(overrides: dict[str, Any] | None = None, repeats: int | None = None) -> list[Any]:
    runs = expand(sweep_from_mapping(SPEC), overrides, repeats)
    return [sim.scenario_from_mapping(run.mapping, run.grid) for run in runs]


def test_set_reaches_every_run_and_wins_over_the_cases():
    runs = scenarios({"peers.count": 8, "stop.max_rounds": 2})
    assert {sc.peers.count for sc in runs} == {8}
    assert {sc.stop.max_rounds for sc in runs} == {2}  # case ar said 1
    assert {sc.protocol.name for sc in runs} == {"all_reduce", "random_groups"}


def test_set_on_a_key_the_grid_sweeps_is_an_error():
    for key in ("churn.p", "churn"):
        with pytest.raises(ScenarioError, match="grid") as caught:
            expand(sweep_from_mapping(SPEC), {key: 0.5})
        assert caught.value.key == f"--set {key}"


def test_set_errors_name_set_and_the_case_they_break():
    with pytest.raises(ScenarioError) as caught:
        expand(sweep_from_mapping(SPEC), {"peers.count": 0})
    assert caught.value.key == "--set peers.count"
    only_one = {**SPEC, "cases": [SPEC["cases"][1], SPEC["cases"][0]]}
    with pytest.raises(ScenarioError) as caught:
        expand(sweep_from_mapping(only_one), {"protocol.group_size": 3})
    assert caught.value.key == "cases[1] with --set protocol.group_size"  # all_reduce has none


def test_repeats_replaces_the_sweeps_repeats():
    runs = expand(sweep_from_mapping(SPEC), None, 3)
    assert len(runs) == 2 * 2 * 3
    assert [run.seed for run in runs[:3]] == [0, 1, 2]


def test_set_changes_the_runs_identity_so_resume_reruns_them():
    plain = {run.key for run in expand(sweep_from_mapping(SPEC))}
    changed = {run.key for run in expand(sweep_from_mapping(SPEC), {"peers.count": 8})}
    assert not plain & changed


def test_the_results_of_a_sweep_with_set_equal_the_runs_made_alone(tmp_path: Path):
    result = sweep(SPEC, workers=1, overrides={"peers.count": 8}, repeats=1)
    assert list(result.runs["seed"]) == [0] * 4
    for row in result.runs.to_dict("records"):
        case = SPEC["cases"][0 if row["case"] == "ar" else 1]
        overrides = {key: value for key, value in case.items() if key != "label"}
        overrides |= {"peers.count": 8, "churn.p": row["churn.p"]}
        scenario = sim.scenario_from_mapping(BASE, overrides)
        assert row["final_var"] == sim.run(scenario, seed=0).summary["final_var"]


def test_cli_sweep_takes_set_and_repeats_and_records_them(tmp_path: Path):
    (tmp_path / "base.yaml").write_text(
        "name: tiny\npeers: {count: 16}\nvector: {dim: 2}\nchurn: {model: bernoulli, p: 0}\n"
        "protocol: {name: random_groups, group_size: 4}\nstop: {max_rounds: 4}\n"
    )
    (tmp_path / "sweep.yaml").write_text(
        "name: s\nbase: base.yaml\nrepeats: 3\ncases:\n"
        "  - {label: ar, protocol: {name: all_reduce}}\n  - {label: rg, protocol.group_size: 2}\n"
        "grid:\n  churn.p: [0, 0.1]\n"
    )
    out = tmp_path / "out"
    args = ["sweep", str(tmp_path / "sweep.yaml"), "--out", str(out), "--workers", "1"]
    args += ["--set", "peers.count=8", "--repeats", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    runs = sim.sweep(tmp_path / "sweep.yaml", overrides={"peers.count": 8}, repeats=1).runs
    written = pd.read_parquet(out / "runs.parquet")
    assert len(written) == 4
    pd.testing.assert_series_equal(written["final_var"], runs["final_var"])
    assert (
        (out / "sweep.yaml").read_text().endswith("# run with: --set peers.count=8 --repeats 1\n")
    )
    bad = CliRunner().invoke(app, [*args[:6], "--set", "churn.p=0.5"])
    assert bad.exit_code == 2
    assert bad.stderr.startswith("error: --set churn.p:")
    assert len(bad.stderr.splitlines()) == 1


@pytest.mark.parametrize("repeats", [0, -1, True, 1.5])
def test_bad_repeats_are_an_error(repeats: object):
    with pytest.raises(ScenarioError) as caught:
        expand(sweep_from_mapping(SPEC), None, repeats)  # type: ignore[arg-type]
    assert caught.value.key == "repeats"


def test_validate_checks_a_sweep_with_set_like_sweep_would(tmp_path: Path):
    path = tmp_path / "grid.yaml"
    path.write_text(
        "name: g\nscenario: {peers: {count: 8}, protocol: {name: all_reduce}}\n"
        "grid:\n  vector.dim: [1, 2]\n"
    )
    runner = CliRunner()
    ok = runner.invoke(app, ["validate", str(path), "--set", "peers.count=4"])
    assert ok.stdout == "ok (sweep of 2 runs)\n"
    bad = runner.invoke(app, ["validate", str(path), "--set", "peers.count=0"])
    assert bad.exit_code == 2
    assert bad.stderr.startswith("error: --set peers.count:")
    clash = runner.invoke(app, ["validate", str(path), "--set", "vector.dim=3"])
    assert clash.exit_code == 2
    assert "grid" in clash.stderr
