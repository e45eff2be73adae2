"""``avsim validate`` tells a sweep file from a scenario exactly as ``avsim run`` and
``avsim info`` do (:func:`sim.model.scenario.loader.is_sweep_mapping`): the same file gets the
same verdict from every command."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sim.cli import app

#: ``cases`` beside a scenario section: a scenario with an unknown key, not a sweep.
MIXED = "name: x\ncases: [{label: a}]\nprotocol: {name: gossip}\nstop: {max_rounds: 2}\n"
#: A sweep file: sweep keys only.
SWEEP = (
    "name: s\nscenario: {peers: {count: 4}, protocol: {name: gossip}, stop: {max_rounds: 2}}\n"
    "cases: [{label: a}, {label: b, peers.count: 6}]\n"
)


def invoke(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("command", ["run", "info"])
def test_validate_gives_a_mixed_file_the_error_other_commands_give(tmp_path: Path, command: str):
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED)
    checked = invoke("validate", path)
    other = invoke(command, path)
    assert checked.exit_code == other.exit_code == 2
    assert checked.stderr.splitlines() == other.stderr.splitlines()
    assert checked.stderr.startswith("error: cases: unknown key")


def test_validate_still_expands_a_sweep_file(tmp_path: Path):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    assert invoke("validate", path).stdout == "ok (sweep of 2 runs)\n"
    assert "use `avsim sweep" in invoke("run", path).stderr
