"""``avsim sweep --max-memory`` / ``sim.sweep(max_memory=)``: the limit reaches every run
in every worker, and a sweep whose largest run would not fit is refused before any run
starts, naming the sweep key that drives it."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sim.output.sweeps.runner
from sim.cli import app
from sim.core.errors import AvsimError
from sim.engine.resources import LIMIT_ENV, ResourceError, memory_limit
from sim.output.sweeps import sweep
from sim.output.sweeps.executors import Task, run_task

BASE: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 8},
    "vector": {"dim": 4},
    "protocol": {"name": "moshpit", "group_size": 4},
    "stop": {"max_rounds": 2},
}
SPEC: dict[str, Any] = {"name": "s", "scenario": BASE, "repeats": 2}
HUGE_GRID: dict[str, Any] = {**SPEC, "grid": {"peers.count": [8, 10**9]}}


@pytest.fixture
def tasks(monkeypatch: pytest.MonkeyPatch) -> list[Task]:
    """The tasks the sweep hands to its executor (which still runs them)."""
    seen: list[Task] = []
    execute = sim.output.sweeps.runner.execute

    def recording(todo: Sequence[Task], *args: Any) -> Iterator[Any]:
        seen.extend(todo)
        return execute(todo, *args)

    monkeypatch.setattr(sim.output.sweeps.runner, "execute", recording)
    return seen


def test_a_sweep_whose_largest_run_does_not_fit_is_refused_before_any_run(
    tmp_path: Path, tasks: list[Task]
):
    with pytest.raises(ResourceError) as raised:
        sweep(HUGE_GRID, out=tmp_path / "out", workers=1)
    assert str(raised.value).startswith("grid.peers.count: 1000000000 needs about ")
    assert tasks == []
    assert not (tmp_path / "out").exists()


def test_the_refusal_names_the_case_that_sets_the_key(tasks: list[Task]):
    spec = {
        **SPEC,
        "scenario": {**BASE, "clock": "network", "stop": {"max_time": 5.0}},
        "cases": [{"label": "ok"}, {"label": "tiny-parts", "protocol.part_bytes": 1}],
        "grid": {"vector.dim": [4, 10**6]},
    }
    with pytest.raises(ResourceError) as raised:
        sweep(spec, workers=1, max_memory="2 GiB")
    assert str(raised.value).startswith("cases[1].protocol.part_bytes: 1 needs about ")
    assert "limit set by --max-memory" in str(raised.value)
    assert tasks == []


def test_max_memory_reaches_every_task(tasks: list[Task]):
    result = sweep(SPEC, workers=1, max_memory="64 MiB")
    assert len(result.runs) == 2
    assert [task.max_memory for task in tasks] == [64 * 2**20] * 2


def test_a_memory_limit_around_the_call_reaches_every_task(tasks: list[Task]):
    with memory_limit("none"):
        sweep(SPEC, workers=1)
    assert [task.max_memory for task in tasks] == [float("inf")] * 2


def test_without_a_limit_each_worker_keeps_its_default(tasks: list[Task]):
    sweep(SPEC, workers=1)
    assert [task.max_memory for task in tasks] == [None, None]


def test_a_task_runs_under_its_limit():
    task = Task(0, copy.deepcopy(BASE), {}, Path.cwd(), 0, None, max_memory=1024.0)
    with pytest.raises(AvsimError, match=r"^run 0 \(seed 0\): peers\.count: 8 needs about "):
        run_task(task)
    summary, _ = run_task(Task(0, copy.deepcopy(BASE), {}, Path.cwd(), 0, None, float("inf")))
    assert summary["rounds"] == 2


def test_an_explicit_limit_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(LIMIT_ENV, "1 KiB")
    with pytest.raises(ResourceError, match=f"limit set by {LIMIT_ENV}"):
        sweep(SPEC, workers=1)
    assert len(sweep(SPEC, workers=1, max_memory="none").runs) == 2


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_cli_sweep_refuses_with_max_memory_before_writing(tmp_path: Path):
    (tmp_path / "s.yaml").write_text(
        "name: s\nscenario: {peers: {count: 8}, vector: {dim: 4}, "
        "protocol: {name: moshpit, group_size: 4}, stop: {max_rounds: 2}}\n"
        "grid: {vector.dim: [4, 100000]}\n"
    )
    result = invoke("sweep", tmp_path / "s.yaml", "-o", tmp_path / "out", "--max-memory", "1MiB")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: grid.vector.dim: 100000 needs about ")
    assert lines[0].endswith("limit set by --max-memory; lower vector.dim, or raise the limit "
                             "with --max-memory")  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_cli_sweep_runs_under_a_limit_that_fits(tmp_path: Path):
    (tmp_path / "s.yaml").write_text(
        "name: s\nscenario: {peers: {count: 8}, vector: {dim: 4}, "
        "protocol: {name: moshpit, group_size: 4}, stop: {max_rounds: 2}}\n"
    )
    args = ["sweep", tmp_path / "s.yaml", "-o", tmp_path / "out", "--max-memory", "4GiB"]
    result = invoke(*args, "--workers", "1")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "out" / "runs.parquet").is_file()


def test_cli_sweep_rejects_a_bad_size(tmp_path: Path):
    (tmp_path / "s.yaml").write_text("name: s\nscenario: {protocol: {name: gossip}}\n")
    result = invoke("sweep", tmp_path / "s.yaml", "--max-memory", "lots")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --max-memory: expected a size like '32GiB' or 'none', got 'lots'\n"
    )
