"""A run's ScenarioError raised at run time (not when the sweep is validated) names
where the sweep sets the key at fault, then the run's index and seed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sim.core.errors import ScenarioError
from sim.output.sweeps import sweep, sweep_from_mapping

HUGE = 1.7976931348623157e308  # a lognormal median whose draws overflow: refused when drawn
LOGNORMAL = {"dist": "lognormal", "median": 1.0, "sigma": 1.0}
BASE: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 8, "upload": LOGNORMAL},
    "vector": {"dim": 2},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 2},
}


def spec(**changes: Any) -> dict[str, Any]:
    mapping = {"name": "s", "scenario": copy.deepcopy(BASE), "cases": [{"label": "rg"}]}
    mapping.update(changes)
    return mapping


@pytest.mark.parametrize("workers", [1, 2])
def test_a_case_that_makes_a_run_fail_is_named(workers: int):
    cases = [{"label": "ok"}, {"label": "big", "peers.upload.median": HUGE}]
    with pytest.raises(ScenarioError) as caught:
        sweep(sweep_from_mapping(spec(cases=cases)), workers=workers)
    assert caught.value.key == "cases[1].peers.upload"
    assert str(caught.value).startswith("cases[1].peers.upload: expected a distribution whose")
    assert str(caught.value).endswith("(run 1, seed 0)")


def test_a_grid_value_that_makes_a_run_fail_is_named():
    with pytest.raises(ScenarioError) as caught:
        sweep(sweep_from_mapping(spec(grid={"peers.upload.median": [1.0, HUGE]})), workers=1)
    assert caught.value.key == "grid.peers.upload"
    assert str(caught.value).endswith("(run 1, seed 0)")


def test_set_and_base_values_that_make_a_run_fail_are_named():
    with pytest.raises(ScenarioError) as caught:
        sweep(sweep_from_mapping(spec()), overrides={"peers.upload.median": HUGE}, workers=1)
    assert caught.value.key == "--set peers.upload"
    base = spec()
    base["scenario"]["peers"]["upload"]["median"] = HUGE
    with pytest.raises(ScenarioError) as caught:
        sweep(sweep_from_mapping(base), workers=1)
    assert caught.value.key == "peers.upload"
    assert str(caught.value).endswith("(run 0, seed 0)")
