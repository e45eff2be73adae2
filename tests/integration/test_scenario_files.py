"""Every shipped scenario validates, and every shipped sweep expands into valid runs."""

from __future__ import annotations

from pathlib import Path

import pytest

import sim
from sim.model.scenario import read_yaml
from sim.output.sweeps.plan import expand
from sim.output.sweeps.spec import load_sweep

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
FILES = sorted(SCENARIOS.rglob("*.yaml"))


def is_sweep(path: Path) -> bool:
    return bool({"cases", "grid", "base", "scenario"} & set(read_yaml(path)))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SCENARIOS)))
def test_shipped_file_is_valid(path):
    if is_sweep(path):
        assert expand(load_sweep(path))  # every run's scenario validates
    else:
        sim.load_scenario(path)
