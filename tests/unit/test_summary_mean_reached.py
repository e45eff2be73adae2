"""summary.json's ``mean`` and ``reached``: ``mean`` holds the numeric fields only (no
``seed``, ``stop_reason`` or ``nan``: labels and places, not quantities), a target no
run reached is ``null`` there; ``reached`` counts the runs that reached each target
(``rounds_to_*``, ``time_to_*``) and nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

import sim

BASE: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 16},
    "vector": {"dim": 4},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 2, "target_var": 1e-12},
    "metrics": {"targets": [1e-30]},
}
TARGETS = {
    "rounds_to_target", "time_to_target_s", "rounds_to_1e-30", "time_to_1e-30_s",
    "rounds_to_1e-30_alive", "time_to_1e-30_alive_s",
}  # fmt: skip


def summary(tmp_path: Path, repeats: int, **changes: Any) -> dict[str, Any]:
    scenario = sim.scenario_from_mapping({**BASE, **changes})
    sim.run(scenario, repeats=repeats, out=tmp_path / "out")
    return json.loads((tmp_path / "out" / "summary.json").read_text())


def test_targets_not_reached_are_null_in_mean_and_zero_in_reached(tmp_path):
    for repeats in (1, 3):
        document = summary(tmp_path / str(repeats), repeats)
        mean, reached = document["mean"], document["reached"]
        assert "nan" not in mean
        assert "nan" not in reached
        assert not {"seed", "stop_reason"} & set(mean)
        assert set(reached) == TARGETS
        assert all(reached[key] == 0 and mean[key] is None for key in TARGETS)
        assert mean["rounds"] == 2.0


def test_a_run_stopped_by_a_nan_adds_nothing_to_reached(tmp_path):
    x = np.zeros((16, 4))
    x[3], x[5] = 1.7e308, 1.7e308  # the group's sum overflows
    np.save(tmp_path / "x.npy", x)
    document = summary(
        tmp_path, 2,
        vector={"dim": 4, "init": "file", "file": str(tmp_path / "x.npy")},
        protocol={"name": "all_reduce"},
    )  # fmt: skip
    assert [run["stop_reason"] for run in document["runs"]] == ["nan", "nan"]
    assert document["runs"][0]["nan"] is not None
    assert set(document["reached"]) == TARGETS
    assert "nan" not in document["mean"]
