"""An empty cell says "never" only for a target: a field that is not a target and has no
value in any run (``final_var`` of runs stopped by a NaN) reads ``—``, as its ``null`` in
``summary.json``'s ``mean``; in the ``avsim run`` table and in a sweep's table alike."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.output.sweeps.table import NO_VALUE, is_target, mean_cell, spread_cell, sweep_table

HUGE = 1.7e308  # two of them overflow a sum: the group mean is inf at round 1


@pytest.mark.parametrize(
    ("field", "target"),
    [
        ("rounds_to_target", True),
        ("time_to_target_s", True),
        ("rounds_to_1e-04_alive", True),
        ("final_var", False),
        ("final_mean_drift", False),
        ("bytes_sent", False),
    ],
)
def test_targets_are_the_rounds_to_and_time_to_fields(field, target):
    assert is_target(field) is target


@pytest.mark.parametrize("cell", [mean_cell, spread_cell])
def test_a_field_no_run_has_is_never_reached_only_when_it_is_a_target(cell):
    empty = pd.Series([None, math.nan], dtype=object)
    assert cell(empty, target=True) == "never (0/2)"
    assert cell(empty, target=False) == NO_VALUE == "—"
    assert cell(pd.Series([2.0, None]), target=False) == "2 (1/2)"  # some have it: as before


def test_the_sweep_table_says_never_only_for_targets():
    runs = pd.DataFrame(
        {
            "case": ["a", "a", "b", "b"],
            "final_var": [math.nan, None, 0.5, 0.5],
            "rounds_to_target": [None, None, 3, 5],
        }
    )
    headers, rows = sweep_table(runs, ["case"], ["final_var", "rounds_to_target"])
    assert headers == ["case", "final_var", "rounds_to_target"]
    assert rows == [["a", "—", "never (0/2)"], ["b", "0.5", "4 [3–5]"]]


def test_the_run_table_mean_of_final_var_after_nan_stops_is_a_dash(tmp_path: Path):
    x = np.zeros((8, 2))
    x[3], x[5] = HUGE, HUGE
    np.save(tmp_path / "x.npy", x)
    scenario = tmp_path / "nan.yaml"
    scenario.write_text(
        "name: nan\npeers: {count: 8}\nvector: {dim: 2, init: file, file: x.npy}\n"
        "protocol: {name: all_reduce}\nstop: {max_rounds: 5}\n"
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["run", str(scenario), "--repeats", "2", "--out", str(out)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    rows = {
        cells[0]: cells[1:]
        for line in result.stdout.splitlines()
        if len(cells := [c.strip() for c in line.strip("│ ").split("│")]) == 4
    }
    assert rows["final_var"] == ["nan", "nan", "—"]
    assert rows["rounds_to_target"] == ["—", "—", "never (0/2)"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean"]["final_var"] is None  # what the table's "—" stands for
    assert summary["reached"] == {"rounds_to_target": 0, "time_to_target_s": 0}
