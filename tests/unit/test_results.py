"""Result folders: files written, atomic writes, refusal to overwrite, null-aware means."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

import sim
from sim.core.errors import ResultExistsError
from sim.engine.result import RunResult
from sim.output.run_folder import atomic_write, atomic_write_text, summarize_runs, write_result

TINY = {
    "name": "tiny",
    "peers": {"count": 16},
    "vector": {"dim": 4},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 5},
}


def tiny_runs(seeds: tuple[int, ...] = (0, 1)) -> list[RunResult]:
    scenario = sim.scenario_from_mapping(TINY)
    return [sim.run(scenario, seed=seed) for seed in seeds]


def fake_result(seed: int, rounds_to_target: int | None, final_var: float = 1e-3) -> RunResult:
    """A hand-made result, for the cases a real run cannot produce on demand."""
    metrics = pd.DataFrame(
        {"seed": [seed] * 2, "round": [0, 1], "time_s": [0.0, 0.0], "var": [1.0, 0.5]}
    )
    summary = {
        "seed": seed,
        "rounds": 1,
        "final_var": final_var,
        "rounds_to_target": rounds_to_target,
    }
    scenario = {"name": "fake", "protocol": {"name": "random_groups"}, "stop": {"target_var": 1e-9}}
    peers = pd.DataFrame({"peer": [0, 1], "upload_bytes_per_s": [1.0, math.inf]})
    return RunResult(metrics, summary, scenario, peers)


def test_summary_mean_ignores_runs_that_never_reached_the_target():
    summaries = [
        {"seed": 0, "rounds": 4, "rounds_to_target": 3, "time_to_target_s": None},
        {"seed": 1, "rounds": 8, "rounds_to_target": None, "time_to_target_s": None},
        {"seed": 2, "rounds": 6, "rounds_to_target": 5, "time_to_target_s": None},
    ]
    mean = summarize_runs(summaries)
    assert mean == {"rounds": 6.0, "rounds_to_target": 4.0, "time_to_target_s": None}


def test_summary_mean_skips_labels_and_text():
    mean = summarize_runs([{"seed": 3, "protocol": "x", "flag": True, "bytes_sent": 2}])
    assert mean == {"bytes_sent": 2.0}


def test_write_result_writes_every_file_of_the_contract(tmp_path: Path):
    runs = tiny_runs()
    folder = write_result(runs, tmp_path / "out")
    names = {p.name for p in folder.iterdir()}
    assert names == {
        "metrics.parquet",
        "summary.json",
        "scenario.yaml",
        "peers.parquet",
        "convergence.png",
    }
    metrics = pd.read_parquet(folder / "metrics.parquet")
    assert sorted(metrics["seed"].unique()) == [0, 1]
    assert {
        "seed",
        "round",
        "time_s",
        "var",
        "err_init",
        "alive_fraction",
        "bytes_sent",
        "messages",
    } <= set(metrics)
    assert sorted(pd.read_parquet(folder / "peers.parquet")["seed"].unique()) == [0, 1]


def test_summary_json_holds_runs_mean_and_provenance(tmp_path: Path):
    runs = tiny_runs()
    summary = json.loads((write_result(runs, tmp_path / "out") / "summary.json").read_text())
    assert summary["scenario"] == "tiny"
    assert summary["protocol"] == "random_groups"
    assert [run["seed"] for run in summary["runs"]] == [0, 1]
    assert summary["mean"]["rounds"] == pytest.approx(sum(r.summary["rounds"] for r in runs) / 2)
    assert summary["version"] == "0.1.0" or summary["version"] is None
    assert "git_sha" in summary


def test_scenario_yaml_is_the_resolved_scenario(tmp_path: Path):
    runs = tiny_runs((0,))
    folder = write_result(runs[0], tmp_path / "out")
    assert yaml.safe_load((folder / "scenario.yaml").read_text()) == runs[0].scenario


def test_summary_json_mean_is_null_when_no_run_reached(tmp_path: Path):
    folder = write_result([fake_result(0, None), fake_result(1, None)], tmp_path / "out")
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["mean"]["rounds_to_target"] is None
    assert summary["reached"] == {"rounds_to_target": 0}
    both = json.loads(
        (write_result(fake_result(0, 2), tmp_path / "one") / "summary.json").read_text()
    )
    assert both["reached"] == {"rounds_to_target": 1}


def test_summary_json_is_standard_json_even_with_infinite_values(tmp_path: Path):
    folder = write_result(fake_result(0, 1, final_var=math.inf), tmp_path / "out")
    text = (folder / "summary.json").read_text()
    assert "Infinity" not in text
    assert json.loads(text)["runs"][0]["final_var"] is None


def test_extra_tables_are_written_with_a_seed_column(tmp_path: Path):
    result = fake_result(4, 1)
    result.extra_tables["events"] = pd.DataFrame({"t": [0.5], "what": ["x"]})
    folder = write_result(result, tmp_path / "out")
    assert pd.read_parquet(folder / "events.parquet").to_dict("list") == {
        "seed": [4],
        "t": [0.5],
        "what": ["x"],
    }


def test_existing_folder_is_not_overwritten_without_force(tmp_path: Path):
    folder = write_result(fake_result(0, 1), tmp_path / "out")
    before = (folder / "summary.json").read_text()
    with pytest.raises(ResultExistsError, match="--force"):
        write_result(fake_result(1, 2), folder)
    assert (folder / "summary.json").read_text() == before


def test_force_overwrites_an_existing_folder(tmp_path: Path):
    folder = write_result(fake_result(0, 1), tmp_path / "out")
    write_result(fake_result(7, 2), folder, force=True)
    assert json.loads((folder / "summary.json").read_text())["runs"][0]["seed"] == 7


def test_an_empty_existing_folder_is_used(tmp_path: Path):
    (tmp_path / "out").mkdir()
    assert (write_result(fake_result(0, 1), tmp_path / "out") / "summary.json").is_file()


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path):
    path = atomic_write_text(tmp_path / "f.txt", "old")

    def broken(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(path, broken)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_write_result_leaves_no_temporary_files(tmp_path: Path):
    folder = write_result(fake_result(0, 1), tmp_path / "out")
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]
