"""Result files get the mode any file the user writes gets: 0666 less the umask in force
when it is written (0644 with the usual 022), not ``mkstemp``'s 0600, whatever umask the
process had before."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from sim.output.run_folder import atomic_write_text, write_parquet


@pytest.fixture
def restore_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    os.umask(previous)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("restore_umask")
def test_each_write_follows_the_umask_in_force_then(tmp_path: Path):
    for umask in (0o022, 0o027, 0o002, 0o077):
        os.umask(umask)
        text = atomic_write_text(tmp_path / f"summary-{umask:o}.json", "{}")
        table = write_parquet(tmp_path / f"metrics-{umask:o}.parquet", pd.DataFrame({"a": [1]}))
        assert mode(text) == 0o666 & ~umask, f"umask {umask:o}"
        assert mode(table) == 0o666 & ~umask, f"umask {umask:o}"


@pytest.mark.usefixtures("restore_umask")
def test_the_usual_umask_gives_0644_and_no_temporary_file_is_left(tmp_path: Path):
    os.umask(0o022)
    path = atomic_write_text(tmp_path / "table.md", "| a |\n")
    assert mode(path) == 0o644
    assert path.read_text() == "| a |\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.md"]


@pytest.mark.usefixtures("restore_umask")
def test_a_failed_write_leaves_nothing_behind(tmp_path: Path):
    def fail(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("disk full")

    from sim.output.run_folder import atomic_write

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(tmp_path / "summary.json", fail)
    assert list(tmp_path.iterdir()) == []
