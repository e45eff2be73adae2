"""``avsim run`` of a ``schedule: async`` group protocol adds the median steps per peer
and the mean group size to its summary table (the values of summary.json); a barrier run
of the same scenario prints exactly the usual rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sim.cli.app import cell
from sim.cli.run import ASYNC_COLUMNS, SUMMARY_COLUMNS

AVSIM = Path(sys.executable).with_name("avsim")
SCENARIO = """\
name: tiny-async
clock: network
schedule: {schedule}
peers: {{count: 8, compute: 100 ms}}
vector: {{dim: 4}}
protocol: {{name: moshpit, group_size: 4, matchmaking_time: 500 ms}}
stop: {{max_time: 5 s, max_rounds: null, target_var: null}}
"""


def run(tmp_path: Path, schedule: str) -> tuple[dict[str, list[str]], list[dict]]:
    """The printed table's rows by field (their cells) and summary.json's runs."""
    path = tmp_path / f"{schedule}.yaml"
    path.write_text(SCENARIO.format(schedule=schedule))
    out = tmp_path / schedule
    done = subprocess.run(
        [str(AVSIM), "run", str(path), "--repeats", "2", "--out", str(out)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {}
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0]:
            rows[cells[0]] = cells[1:]
    return rows, json.loads((out / "summary.json").read_text())["runs"]


def test_an_async_run_shows_steps_and_group_size(tmp_path):
    rows, runs = run(tmp_path, "async")
    assert list(rows)[-len(ASYNC_COLUMNS) :] == list(ASYNC_COLUMNS)
    for field in ASYNC_COLUMNS:
        assert rows[field][:2] == [cell(r[field]) for r in runs]
        assert runs[0][field] > 0


def test_a_barrier_run_prints_the_usual_rows(tmp_path):
    rows, runs = run(tmp_path, "barrier")
    assert list(rows) == list(SUMMARY_COLUMNS[1:])
    assert not any(field in runs[0] for field in ASYNC_COLUMNS)
