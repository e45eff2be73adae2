"""`sim.run`: one run as before, repeats, overrides, scenario files and mappings, `out`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import sim
from sim.core.errors import ResultExistsError, ScenarioError
from sim.engine import run as engine_run

TINY: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 8},
    "vector": {"dim": 2},
    "churn": {"model": "bernoulli", "p": 0.1},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 4},
}


def scenario() -> Any:
    return sim.scenario_from_mapping(TINY)


def same_run(a: Any, b: Any) -> None:
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    assert {k: v for k, v in a.summary.items() if k != "wall_time_s"} == {
        k: v for k, v in b.summary.items() if k != "wall_time_s"
    }


def test_one_run_is_a_run_result_equal_to_the_engines():
    result = sim.run(scenario(), seed=3)
    assert isinstance(result, sim.RunResult)
    same_run(result, engine_run(scenario(), seed=3))
    same_run(sim.run(scenario()), engine_run(scenario(), seed=0))


def test_repeats_give_a_list_in_seed_order():
    results = sim.run(scenario(), seed=5, repeats=3)
    assert isinstance(results, list)
    assert [r.summary["seed"] for r in results] == [5, 6, 7]
    for k, result in enumerate(results):
        same_run(result, engine_run(scenario(), seed=5 + k))
    assert len(sim.run(scenario(), repeats=1)) == 1


def test_overrides_apply_to_a_scenario_a_mapping_and_a_file(tmp_path: Path):
    path = tmp_path / "tiny.yaml"
    path.write_text("name: tiny\npeers: {count: 8}\nprotocol: {name: all_reduce}\n")
    for source in (scenario(), TINY, path, str(path)):
        result = sim.run(source, overrides={"peers.count": 16, "stop.max_rounds": 2})
        assert result.scenario["peers"]["count"] == 16
        assert result.summary["rounds"] <= 2


def test_progress_reports_the_fraction_of_all_runs():
    seen: list[float] = []
    sim.run(scenario(), repeats=2, progress=seen.append)
    assert seen == sorted(seen)
    assert seen[-1] == pytest.approx(1.0)
    assert any(0.4 < f <= 0.5 for f in seen)


def test_out_writes_the_result_folder_and_refuses_to_overwrite_before_running(tmp_path: Path):
    results = sim.run(scenario(), repeats=2, out=tmp_path / "out")
    assert (tmp_path / "out" / "summary.json").is_file()
    written = pd.read_parquet(tmp_path / "out" / "metrics.parquet")
    assert sorted(set(written["seed"])) == [0, 1]
    assert len(written) == sum(len(r.metrics) for r in results)
    calls: list[float] = []
    with pytest.raises(ResultExistsError, match="--force"):
        sim.run(scenario(), out=tmp_path / "out", progress=calls.append)
    assert calls == []
    sim.run(scenario(), out=tmp_path / "out", force=True)


def test_nothing_is_written_without_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    sim.run(scenario(), repeats=2)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"repeats": 0}, "repeats"),
        ({"repeats": True}, "repeats"),
        ({"seed": -1}, "seed"),
        ({"overrides": {"peers.count": 0}}, "peers.count"),
    ],
)
def test_bad_options_are_scenario_errors_naming_them(options: dict[str, Any], key: str):
    with pytest.raises(ScenarioError) as caught:
        sim.run(scenario(), **options)
    assert caught.value.key == key
