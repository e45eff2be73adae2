"""The sweep benchmark times the sweep, not matplotlib: it asks for no ``sweep.png``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

import sim.output.sweeps.runner

ROOT = Path(__file__).resolve().parents[2]
TINY = {
    "name": "tiny",
    "repeats": 2,
    "scenario": {
        "name": "tiny",
        "peers": {"count": 4},
        "vector": {"dim": 2},
        "protocol": {"name": "gossip", "topology": "ring"},
        "stop": {"max_rounds": 2},
    },
}


def bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_sweep", ROOT / "bench" / "bench_sweep.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_timed_sweep_draws_no_figure(monkeypatch: pytest.MonkeyPatch):
    drawn: list[Path] = []
    monkeypatch.setattr(sim.output.sweeps.runner, "_write_figure", drawn.append)
    seconds = bench_module()._timed(TINY, workers=1)
    assert seconds > 0
    assert drawn == []
