"""A comparison figure's note names why each run is missing from a panel, by its own
clock: a rounds-clock run has no simulated seconds, a continuous-time run on the
network clock has no rounds (``avsim plot A B --out``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sim
from sim.output.plots.folders import compare_figure

BASE: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 8},
    "vector": {"dim": 4},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 4, "target_var": 1e-9},
}
NETWORK: dict[str, Any] = {"clock": "network", "stop": {"max_time": 2.0, "max_rounds": None}}


def folder(tmp_path: Path, name: str, overrides: dict[str, Any]) -> Path:
    sim.run(sim.scenario_from_mapping(BASE, overrides), out=tmp_path / name)
    return tmp_path / name


def notes(figure: Any, xlabel_start: str) -> list[str]:
    (ax,) = [ax for ax in figure.axes if ax.get_xlabel().startswith(xlabel_start)]
    return [text.get_text() for text in ax.texts]


def test_rounds_clock_run_left_out_of_the_seconds_panel_is_named_by_its_clock(tmp_path):
    rounds = folder(tmp_path, "r", {})
    network = folder(tmp_path, "n", NETWORK)
    figure = compare_figure([rounds, network], ["r", "n"])
    assert notes(figure, "simulated time (s)") == [
        "not on this axis (rounds clock, no simulated seconds): r"
    ]
    assert not any("continuous" in text.get_text() for ax in figure.axes for text in ax.texts)


def test_each_left_out_run_gets_its_own_reason(tmp_path):
    rounds = folder(tmp_path, "r", {})
    barrier = folder(tmp_path, "n", NETWORK)
    acid = folder(tmp_path, "a", {**NETWORK, "protocol": {"name": "a2cid2", "topology": "ring"}})
    figure = compare_figure([rounds, barrier, acid], ["r", "n", "a"])
    assert notes(figure, "rounds") == ["not on this axis (continuous time, no rounds): a"]
    assert notes(figure, "simulated time (s)") == [
        "not on this axis (rounds clock, no simulated seconds): r"
    ]
    assert notes(figure, "bytes sent") == []
