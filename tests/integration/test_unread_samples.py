"""A sample that nothing reads (no row due, no threshold, no workload) only checks that
``var`` is finite: runs give the same results as measuring every sample in full, the
numerical-health stop included."""

from __future__ import annotations

import json

import numpy as np
import pytest

import sim
from sim.engine.observe import observer

SCENARIOS = {
    "gossip ring": {"protocol": {"name": "gossip", "topology": "ring"}},
    "a2cid2 ring": {"protocol": {"name": "a2cid2", "topology": "ring"}},
    "push_sum churn": {
        "protocol": {"name": "push_sum", "topology": "exponential"},
        "churn": {"model": "bernoulli", "p": 0.2},
    },
    "moshpit churn": {
        "protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 2},
        "churn": {"model": "bernoulli", "p": 0.2},
    },
    "pairwise network": {
        "clock": "network",
        "protocol": {"name": "pairwise_gossip", "topology": "ring"},
        "stop": {"max_time": 12, "max_rounds": None, "target_var": 0},
    },
}


def _run(mapping: dict, monkeypatch: pytest.MonkeyPatch, full: bool) -> sim.RunResult:
    base = {
        "name": "unread",
        "peers": {"count": 16},
        "vector": {"dim": 3},
        "stop": {"max_rounds": 12, "target_var": 0},
        "metrics": {"every": 5},
    }
    scenario = sim.scenario_from_mapping({**base, **mapping})
    if full:  # every sample measured in full, as before
        monkeypatch.setattr(observer, "variance_is_finite", lambda estimate: False)
    result = sim.run(scenario, seed=3)
    monkeypatch.undo()
    return result


def _same(a: sim.RunResult, b: sim.RunResult) -> None:
    drop = [c for c in a.metrics.columns if "wall" in c]
    assert a.metrics.drop(columns=drop).equals(b.metrics.drop(columns=drop))
    summary_a = {k: v for k, v in a.summary.items() if "wall" not in k}
    summary_b = {k: v for k, v in b.summary.items() if "wall" not in k}
    # through JSON: NaN equals NaN there, and the summary is what summary.json holds
    assert json.dumps(summary_a, sort_keys=True, default=str) == json.dumps(
        summary_b, sort_keys=True, default=str
    )
    assert np.array_equal(np.asarray(a.state.x), np.asarray(b.state.x), equal_nan=True)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_unread_samples_change_no_result(name, monkeypatch):
    fast = _run(SCENARIOS[name], monkeypatch, full=False)
    full = _run(SCENARIOS[name], monkeypatch, full=True)
    _same(fast, full)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_nan_between_rows_stops_the_run_where_it_appeared(tmp_path, monkeypatch):
    x = np.zeros((16, 3))
    x[3], x[5] = 1.7e308, 1.7e308  # their group's sum overflows
    path = tmp_path / "x.npy"
    np.save(path, x)
    mapping = {
        "vector": {"dim": 3, "init": "file", "file": str(path)},
        "protocol": {"name": "all_reduce"},
    }
    fast = _run(mapping, monkeypatch, full=False)
    assert fast.summary["stop_reason"] == "nan"
    assert fast.summary["rounds"] == 1  # not at the next row (round 5)
    _same(fast, _run(mapping, monkeypatch, full=True))


def test_estimates_bound_the_variance_only_when_they_are_moderate():
    assert observer.variance_is_finite(np.array([[1.0, -1e100]]))
    assert not observer.variance_is_finite(np.array([[1.0, 2e100]]))
    assert not observer.variance_is_finite(np.array([[np.nan, 0.0]]))
    assert not observer.variance_is_finite(np.array([[np.inf, 0.0]]))
    assert not observer.variance_is_finite(np.zeros((0, 3)))


def test_the_bound_reads_array_api_arrays_too():
    xp = pytest.importorskip("array_api_strict")
    assert observer.variance_is_finite(xp.asarray([[1.0, -3.0]]))
    assert not observer.variance_is_finite(xp.asarray([[1.0, float("nan")]]))
    assert not observer.variance_is_finite(xp.asarray([[1.0, 1e200]]))
