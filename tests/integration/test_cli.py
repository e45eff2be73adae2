"""The ``avsim`` command line on tiny scenarios: outputs, files, and every bad input path.

Bad input must give exit code 2 and exactly one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sim.cli import app

TINY = """\
name: tiny
peers: {count: 16}
vector: {dim: 4}
protocol: {name: random_groups, group_size: 4}
stop: {max_rounds: 5}
"""
SWEEP = """\
name: tiny-sweep
base: tiny.yaml
repeats: 2
cases:
  - {protocol: {name: all_reduce}}
  - {protocol: {name: random_groups, group_size: 2}}
grid:
  peers.count: [8, 16]
report: [rounds_to_target, final_var]
"""
AVSIM = Path(sys.executable).with_name("avsim")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


def invoke(runner: CliRunner, *args: str | Path):
    return runner.invoke(app, [str(a) for a in args])


def assert_user_error(result, *needles: str) -> None:
    """Exit 2, one line on stderr that contains every needle, no traceback anywhere."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_run_writes_the_result_folder_and_prints_a_summary(runner, tiny, tmp_path):
    result = invoke(runner, "run", tiny, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"metrics.parquet", "summary.json", "scenario.yaml", "convergence.png"} <= names
    assert "rounds_to_target" in result.stdout
    assert "wrote" in result.stdout


def test_run_repeats_use_consecutive_seeds_and_set_overrides(runner, tiny, tmp_path):
    args = [
        "run",
        tiny,
        "--out",
        tmp_path / "out",
        "--seed",
        "5",
        "--repeats",
        "2",
        "--set",
        "peers.count=8",
    ]
    assert invoke(runner, *args).exit_code == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [run["seed"] for run in summary["runs"]] == [5, 6]
    assert len(pd.read_parquet(tmp_path / "out" / "peers.parquet").query("seed == 5")) == 8


def test_run_defaults_to_results_slash_scenario_name(runner, tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert invoke(runner, "run", tiny).exit_code == 0
    assert (tmp_path / "results" / "tiny" / "summary.json").is_file()


def test_run_refuses_an_existing_folder_without_force(runner, tiny, tmp_path):
    assert invoke(runner, "run", tiny, "--out", tmp_path / "out").exit_code == 0
    assert_user_error(invoke(runner, "run", tiny, "--out", tmp_path / "out"), "--force")
    assert invoke(runner, "run", tiny, "--out", tmp_path / "out", "--force").exit_code == 0


def test_validate_says_ok(runner, tiny):
    result = invoke(runner, "validate", tiny)
    assert result.exit_code == 0
    assert result.stdout == "ok\n"


def test_validate_checks_every_run_of_a_sweep(runner, tiny, tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(SWEEP)
    result = invoke(runner, "validate", sweep)
    assert result.exit_code == 0
    assert result.stdout == "ok (sweep of 8 runs)\n"
    sweep.write_text(SWEEP.replace("group_size: 2", "group_size: -2"))
    assert_user_error(invoke(runner, "validate", sweep), "group_size")
    sweep.write_text(SWEEP)
    assert invoke(runner, "validate", sweep, "--set", "seed=1").stdout == "ok (sweep of 8 runs)\n"
    assert_user_error(invoke(runner, "validate", sweep, "--set", "peers.count=4"), "--set", "grid")


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("name: [unclosed\n", ["YAML"]),
        (TINY + "colour: red\n", ["colour"]),
        (
            TINY.replace("random_groups", "no_such_protocol"),
            ["protocol.name", "no_such_protocol", "random_groups", "moshpit"],
        ),
        (
            TINY.replace("peers: {count: 16}", "peers: {count: 16, upload: -3 Mbit/s}"),
            ["peers.upload", "-3"],
        ),
        (TINY.replace("count: 16", "count: sixteen"), ["peers.count", "sixteen"]),
        ("- just\n- a list\n", ["mapping"]),
        ("", ["mapping"]),
    ],
)
def test_bad_scenarios_give_one_line_and_exit_2(runner, tmp_path, text, needles):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert_user_error(invoke(runner, "validate", path), *needles)
    assert_user_error(invoke(runner, "run", path, "--out", tmp_path / "out"), *needles)


def test_missing_scenario_file(runner, tmp_path):
    assert_user_error(invoke(runner, "validate", tmp_path / "nope.yaml"), "nope.yaml")
    assert_user_error(invoke(runner, "run", tmp_path / "nope.yaml"), "nope.yaml")


@pytest.mark.parametrize(
    ("option", "needles"),
    [
        ("nokey", ["--set", "nokey"]),
        ("peers.count=-4", ["peers.count"]),
        ("peers.colour=1", ["colour"]),
        ("protocol.group_size=[1", ["protocol.group_size"]),
    ],
)
def test_bad_set_options(runner, tiny, tmp_path, option, needles):
    assert_user_error(
        invoke(runner, "run", tiny, "--out", tmp_path / "o", "--set", option), *needles
    )
    assert not (tmp_path / "o").exists()


def test_list_shows_protocols_with_descriptions_and_parameter_defaults(runner):
    result = invoke(runner, "list")
    assert result.exit_code == 0
    assert "random_groups:" in result.stdout
    assert "group_size:" in result.stdout


def test_schema_is_json_with_the_scenario_keys(runner):
    result = invoke(runner, "schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert {"peers", "protocol", "stop"} <= set(schema["properties"])


def test_plot_redraws_and_compares_result_folders(runner, tiny, tmp_path):
    for name in ("a", "b"):
        assert invoke(runner, "run", tiny, "--out", tmp_path / name).exit_code == 0
    (tmp_path / "a" / "convergence.png").unlink()
    assert invoke(runner, "plot", tmp_path / "a").exit_code == 0
    assert (tmp_path / "a" / "convergence.png").stat().st_size > 0
    result = invoke(runner, "plot", tmp_path / "a", tmp_path / "b", "--out", tmp_path / "cmp.png")
    assert result.exit_code == 0
    assert (tmp_path / "cmp.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_of_a_folder_without_results(runner, tmp_path):
    assert_user_error(invoke(runner, "plot", tmp_path), "metrics.parquet")


def test_sweep_writes_its_folder_and_prints_the_table(runner, tiny, tmp_path):
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    result = invoke(
        runner, "sweep", tmp_path / "sweep.yaml", "--out", tmp_path / "out", "--workers", "2"
    )
    assert result.exit_code == 0, result.stderr
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "runs.parquet",
        "metrics.parquet",
        "table.md",
        "sweep.yaml",
        "sweep.png",
    }
    assert len(pd.read_parquet(tmp_path / "out" / "runs.parquet")) == 2 * 2 * 2
    assert "all_reduce" in result.stdout
    assert (
        "| peers.count | case | rounds_to_target | final_var |"
        in (tmp_path / "out" / "table.md").read_text()
    )
    again = invoke(runner, "sweep", tmp_path / "sweep.yaml", "--out", tmp_path / "out")
    assert_user_error(again, "--force")


def test_sweep_keep_runs_writes_one_result_folder_per_run(runner, tiny, tmp_path):
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    out = tmp_path / "out"
    options = ["--out", out, "--workers", "1", "--keep-runs"]
    assert invoke(runner, "sweep", tmp_path / "sweep.yaml", *options).exit_code == 0
    names = [
        f"{case}__peers.count={n}__seed={seed}"
        for case in ("all_reduce", "random_groups-group_size=2")
        for n in (8, 16)
        for seed in (0, 1)
    ]
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(names)
    assert (out / "runs" / "all_reduce__peers.count=16__seed=1" / "summary.json").is_file()


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (SWEEP.replace("[8, 16]", "[8, -1]"), ["grid.peers.count"]),
        (SWEEP.replace("base: tiny.yaml", "base: missing.yaml"), ["base", "missing.yaml"]),
        (SWEEP + "colour: red\n", ["colour"]),
        (SWEEP.replace("name: all_reduce", "name: nope"), ["cases[0].protocol.name", "nope"]),
        ("name: [x\n", ["YAML"]),
    ],
)
def test_bad_sweeps_give_one_line_and_exit_2(runner, tiny, tmp_path, text, needles):
    (tmp_path / "sweep.yaml").write_text(text)
    result = invoke(runner, "sweep", tmp_path / "sweep.yaml", "--out", tmp_path / "out")
    assert_user_error(result, *needles)
    assert not (tmp_path / "out").exists()


def test_console_script_turns_user_and_usage_errors_into_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("peers: {count: 16, upload: -3 Mbit/s}\n")
    for args in (
        ["validate", str(bad)],
        ["run"],
        ["run", str(bad), "--repeats", "zero"],
        ["frobnicate"],
    ):
        done = subprocess.run(
            [str(AVSIM), *args], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.splitlines()) == 1, (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_info_shows_the_derived_a2cid2_constants(runner, tiny):
    result = invoke(runner, "info", tiny, "--set", "protocol={name: a2cid2, topology: ring}")
    assert result.exit_code == 0, result.stderr
    for key in ("chi1", "chi2", "eta", "alpha_tilde", "gain"):
        assert key in result.stdout


def test_info_on_a_bad_scenario_is_one_line(runner, tiny):
    assert_user_error(invoke(runner, "info", tiny, "--set", "peers.count=-1"), "peers.count")
