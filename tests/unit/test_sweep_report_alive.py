"""A sweep may report every target field a run has, on var and on var_alive."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

AVSIM = Path(sys.executable).with_name("avsim")

SWEEP = """\
name: alive
scenario:
  name: alive
  peers: {{count: 8}}
  vector: {{dim: 2}}
  protocol: {{name: random_groups, group_size: 4}}
  metrics: {{targets: [1e-2]}}
cases: [{{label: a}}]
report: [{field}]
"""


@pytest.mark.parametrize(
    "field",
    ["time_to_1e-02_s", "rounds_to_1e-02", "time_to_1e-02_alive_s", "rounds_to_1e-02_alive"],
)
def test_a_sweep_reports_targets_on_var_and_on_var_alive(tmp_path: Path, field: str):
    path = tmp_path / "s.yaml"
    path.write_text(SWEEP.format(field=field))
    done = subprocess.run(
        [str(AVSIM), "validate", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_an_unknown_report_field_is_still_refused(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(SWEEP.format(field="time_to_1e-03_alive_s"))
    done = subprocess.run(
        [str(AVSIM), "validate", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: report[0]")
