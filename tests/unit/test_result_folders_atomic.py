"""Result folders are written whole or not at all.

sim.output.atomic, sim.output.run_folder.write_result: an interrupted write leaves no folder
(or the previous one) and no temporary folder."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import pandas as pd
import pytest

import sim.output.atomic
import sim.output.run_folder
from sim.core.errors import ResultExistsError
from sim.engine.result import RunResult
from sim.output.atomic import staged_folder
from sim.output.run_folder import check_folder, write_result


def fake_result(seed: int) -> RunResult:
    metrics = pd.DataFrame({"seed": [seed] * 2, "round": [0, 1], "time_s": [0.0, 1.0],
                            "var": [1.0, 0.5]})  # fmt: skip
    summary = {"seed": seed, "rounds": 1, "final_var": 0.5}
    scenario = {"name": "fake", "protocol": {"name": "random_groups"}, "stop": {"target_var": 0}}
    peers = pd.DataFrame({"peer": [0, 1], "upload_bytes_per_s": [1.0, math.inf]})
    return RunResult(metrics, summary, scenario, peers)


def seeds_in(folder: Path) -> list[int]:
    return [run["seed"] for run in json.loads((folder / "summary.json").read_text())["runs"]]


def interrupt_the_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last file of a folder fails to write, as after Ctrl-C (a KeyboardInterrupt)."""

    def interrupted(path: Path, results: object) -> None:
        path.write_bytes(b"half a png")
        raise KeyboardInterrupt

    monkeypatch.setattr(sim.output.run_folder, "_write_figure", interrupted)


def test_an_interrupted_write_leaves_no_folder_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    interrupt_the_figure(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        write_result(fake_result(0), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_overwrite_keeps_the_previous_folder_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    folder = write_result(fake_result(0), tmp_path / "out")
    before = sorted(p.name for p in folder.iterdir())
    interrupt_the_figure(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        write_result(fake_result(7), folder, force=True)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert sorted(p.name for p in folder.iterdir()) == before
    assert seeds_in(folder) == [0]


def test_a_failure_between_the_two_renames_puts_the_old_folder_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    folder = write_result(fake_result(0), tmp_path / "out")
    real_rename = os.rename

    def refuse_new(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if str(src).endswith(sim.output.atomic.STAGING_SUFFIX):
            raise KeyboardInterrupt  # after the old folder was moved aside
        real_rename(src, dst)

    monkeypatch.setattr(sim.output.atomic.os, "rename", refuse_new)
    with pytest.raises(KeyboardInterrupt):
        write_result(fake_result(7), folder, force=True)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert seeds_in(folder) == [0]


def test_force_replaces_the_whole_folder(tmp_path: Path):
    folder = write_result(fake_result(0), tmp_path / "out")
    (folder / "traffic.parquet").write_bytes(b"a table of the previous run")
    write_result(fake_result(7), folder, force=True)
    assert "traffic.parquet" not in {p.name for p in folder.iterdir()}
    assert seeds_in(folder) == [7]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_files_and_folder_get_the_usual_permissions(tmp_path: Path):
    umask = os.umask(0o022)
    os.umask(umask)
    folder = write_result(fake_result(0), tmp_path / "out")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((folder / "summary.json").stat().st_mode) == 0o666 & ~umask


def test_a_staged_folder_refuses_a_non_empty_destination_without_replace(tmp_path: Path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep me")
    with pytest.raises(FileExistsError), staged_folder(tmp_path / "out") as staging:
        (staging / "new.txt").write_text("new")
    assert (tmp_path / "out" / "mine.txt").read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_staged_folder_creates_missing_parents(tmp_path: Path):
    with staged_folder(tmp_path / "a" / "b" / "out") as staging:
        (staging / "f.txt").write_text("x")
    assert (tmp_path / "a" / "b" / "out" / "f.txt").read_text() == "x"
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == ["out"]


def test_a_folder_under_a_file_is_refused_before_the_run(tmp_path: Path):
    (tmp_path / "afile").write_text("")
    target = tmp_path / "afile" / "x" / "out"
    with pytest.raises(ResultExistsError, match=r"cannot make this folder, .*afile is a file$"):
        check_folder(target, force=False)


def test_a_staged_folder_that_cannot_be_made_names_the_destination(tmp_path: Path):
    (tmp_path / "afile").write_text("")
    target = tmp_path / "afile" / "out"
    with pytest.raises(FileExistsError) as caught, staged_folder(target):
        pass
    assert caught.value.filename == str(target)  # not the hidden staging folder's name
