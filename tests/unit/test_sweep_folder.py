"""The sweep folder: every run's metric rows, resume after a real kill -9, and a sweep
without a folder that writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import sim
from sim.core.errors import AvsimError
from sim.output.sweeps import sweep

BASE: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 8},
    "vector": {"dim": 2},
    "churn": {"model": "none"},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 5},
}
SPEC: dict[str, Any] = {
    "name": "s",
    "scenario": BASE,
    "repeats": 2,
    "cases": [{"label": "rg4"}, {"label": "ar", "protocol": {"name": "all_reduce"}}],
    "grid": {"churn": [{"model": "none"}, {"model": "bernoulli", "p": 0.2}]},
}
NOT_DETERMINISTIC = ["wall_time_s"]


def test_metrics_parquet_holds_every_runs_rows_tagged_like_runs_parquet(tmp_path: Path):
    result = sweep(SPEC, out=tmp_path / "out", workers=1)
    runs = pd.read_parquet(tmp_path / "out" / "runs.parquet")
    metrics = pd.read_parquet(tmp_path / "out" / "metrics.parquet")
    assert list(metrics.columns[:5]) == ["run", "case", "churn", "label", "seed"]
    assert sorted(set(metrics["run"])) == list(runs["run"])
    first = metrics[metrics["run"] == 7]
    row = runs[runs["run"] == 7].iloc[0]
    assert set(first["case"]) == {row["case"]}
    assert set(first["seed"]) == {row["seed"]}
    assert set(first["label"]) == {"ar, churn=(model=bernoulli,p=0.2)"} == {row["label"]}
    alone = sim.run(
        sim.scenario_from_mapping(
            BASE,
            {
                "protocol": {"name": "all_reduce"},
                "churn": sim.model.scenario.Replace({"model": "bernoulli", "p": 0.2}),
            },
        ),
        seed=1,
    )
    pd.testing.assert_frame_equal(
        first.drop(columns=["run", "case", "churn", "label"]).reset_index(drop=True),
        alone.metrics,
    )
    pd.testing.assert_frame_equal(result.metrics, metrics)
    assert {"clock", "protocol.name", "churn.model"} <= set(runs.columns)
    assert list(runs["protocol.name"][::2]) == ["random_groups", "all_reduce"] * 2


def test_without_out_a_sweep_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    result = sweep(SPEC, workers=1)
    assert list(tmp_path.iterdir()) == []
    assert result.out_dir is None
    assert result.markdown.startswith("# s\n")
    assert len(result.runs) == 8
    assert set(result.metrics["run"]) == set(range(8))
    with pytest.raises(AvsimError, match="keep_runs=True needs out="):
        sweep(SPEC, workers=1, keep_runs=True)


def test_figure_false_leaves_out_only_the_figure(tmp_path: Path):
    sweep(SPEC, out=tmp_path / "out", workers=1, repeats=1, figure=False)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "metrics.parquet", "runs.parquet", "sweep.yaml", "table.md",
    ]  # fmt: skip


KILLER = """
import os, signal, sys
import sim

def kill_after_three(done, total):
    if done == 3:
        os.kill(os.getpid(), signal.SIGKILL)

if __name__ == "__main__":
    sim.sweep(sys.argv[1], out=sys.argv[2], workers=2, progress=kill_after_three)
"""


def test_a_sweep_killed_with_sigkill_resumes_to_the_uninterrupted_result(tmp_path: Path):
    import yaml

    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(SPEC))
    (tmp_path / "killer.py").write_text(textwrap.dedent(KILLER))
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(tmp_path / "killer.py"), str(tmp_path / "sweep.yaml"), str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == -9, done.stderr
    assert not (out / "runs.parquet").exists()
    assert len((out / "runs.partial.jsonl").read_text().splitlines()) >= 3
    starts: list[int] = []
    resumed = sweep(tmp_path / "sweep.yaml", out=out, workers=1, resume=True,
                    progress=lambda d, t: starts.append(d))  # fmt: skip
    assert starts[0] >= 3
    fresh = sweep(tmp_path / "sweep.yaml", out=tmp_path / "fresh", workers=1)
    pd.testing.assert_frame_equal(
        resumed.runs.drop(columns=NOT_DETERMINISTIC), fresh.runs.drop(columns=NOT_DETERMINISTIC)
    )
    assert resumed.table == fresh.table
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "metrics.parquet"),
        pd.read_parquet(tmp_path / "fresh" / "metrics.parquet"),
    )
    assert sorted(os.listdir(out)) == sorted(os.listdir(tmp_path / "fresh"))


def test_the_journal_gives_back_each_runs_rows_exactly_and_skips_a_torn_line(tmp_path: Path):
    from sim.output.sweeps.journal import Journal

    frame = sim.run(sim.scenario_from_mapping(BASE), seed=0).metrics
    frame.loc[1, "var"] = float("nan")
    frame.loc[2, "var_alive"] = float("inf")
    journal = Journal(tmp_path)
    journal.append("a", 0, {"rounds": 5}, frame)
    journal.append("b", 1, {"rounds": 6}, frame.iloc[:2])
    with journal.path.open("a") as handle:
        handle.write('{"key": "c", "run": 2, "summ')  # cut short by a kill
    again = Journal(tmp_path)
    assert again.read() == {"a": {"rounds": 5}, "b": {"rounds": 6}}
    pd.testing.assert_frame_equal(again.metrics("a"), frame)
    pd.testing.assert_frame_equal(again.metrics("b"), frame.iloc[:2])
