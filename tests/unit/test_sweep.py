"""Sweeps: expansion and its order, labels, errors, the table, resume, determinism."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import sim
from sim.core.errors import AvsimError, ResultExistsError, ScenarioError
from sim.output.sweeps import sweep, sweep_from_mapping
from sim.output.sweeps.plan import case_label, expand
from sim.output.sweeps.spec import load_sweep
from sim.output.sweeps.table import markdown, mean_cell, sweep_table

BASE: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 16},
    "vector": {"dim": 4},
    "churn": {"model": "bernoulli", "p": 0.0},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 5},
}
CASES = [
    {"protocol": {"name": "all_reduce"}},
    {"protocol": {"name": "random_groups", "group_size": 2}},
]


def spec(**changes: Any) -> dict[str, Any]:
    data = {"name": "s", "scenario": BASE, "repeats": 2, "cases": CASES,
            "grid": {"peers.count": [8, 16], "churn.p": [0, 0.1]}}  # fmt: skip
    data.update(changes)
    return data


def test_expansion_is_grid_cells_then_cases_then_repeats():
    runs = expand(sweep_from_mapping(spec()))
    assert len(runs) == 4 * 2 * 2
    assert [r.index for r in runs] == list(range(16))
    assert [(r.cell, r.case, r.seed) for r in runs[:5]] == [
        (0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (1, 0, 0),
    ]  # fmt: skip
    assert [r.grid for r in runs[::4]] == [
        {"peers.count": 8, "churn.p": 0}, {"peers.count": 8, "churn.p": 0.1},
        {"peers.count": 16, "churn.p": 0}, {"peers.count": 16, "churn.p": 0.1},
    ]  # fmt: skip


def test_seeds_start_at_the_scenario_seed_and_repeats_default_to_the_scenario():
    data = spec(scenario={**BASE, "seed": 10, "repeats": 3}, grid={})
    del data["repeats"]
    assert [r.seed for r in expand(sweep_from_mapping(data))] == [10, 11, 12] * 2


@pytest.mark.parametrize(
    ("changes", "key"),
    [({"grid": {"seed": [1, 2]}}, "grid.seed"),
     ({"cases": [{"label": "a"}, {"seed": True}]}, "cases[1].seed")],
)  # fmt: skip
def test_a_case_or_the_grid_may_not_set_the_seed(changes: dict[str, Any], key: str):
    # the runs table's seed column is the run's seed (a second one made the table fail
    # after every run had run); every case and cell runs on the same seeds
    with pytest.raises(ScenarioError) as caught:
        sweep_from_mapping(spec(**changes))
    assert caught.value.key == key
    assert "seed, seed + 1" in str(caught.value)


def test_no_cases_and_no_grid_is_the_base_alone():
    runs = expand(sweep_from_mapping({"name": "s", "scenario": BASE}))
    assert [(r.label, r.seed, r.columns) for r in runs] == [("base", 0, {})]


def test_grid_values_apply_after_the_case_so_they_reach_its_protocol():
    data = spec(
        cases=[{"protocol": {"name": "random_groups", "group_size": 2}}],
        grid={"protocol.group_size": [8]},
    )
    run = expand(sweep_from_mapping(data))[0]
    scenario = sim.scenario_from_mapping(run.mapping, run.grid)
    assert scenario.protocol.group_size == 8


def test_case_labels_name_the_protocol_and_its_parameters():
    case = {"protocol": {"name": "moshpit", "group_size": 32, "grid_dims": 2, "rekey": False}}
    assert case_label(case) == "moshpit(group_size=32,grid_dims=2,rekey=false)"
    assert (
        case_label({"protocol": {"name": "all_reduce"}, "churn.p": 0.01})
        == "all_reduce, churn.p=0.01"
    )
    assert case_label({}) == "base"


def test_equal_runs_have_equal_keys_and_different_seeds_do_not():
    runs = expand(sweep_from_mapping(spec(cases=[{}, {}], grid={})))
    assert runs[0].key == runs[2].key
    assert runs[0].key != runs[1].key


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"grid": {"peers.count": [8, -1]}}, "grid.peers.count"),
        ({"grid": {"peers.count": []}}, "grid.peers.count"),
        (
            {"cases": [{}, {"protocol": {"name": "random_groups", "group_size": 0}}]},
            "cases[1].protocol.group_size",
        ),
        ({"cases": [{"protocol": {"name": "nope"}}]}, "cases[0].protocol.name"),
        ({"repeats": "3"}, "repeats"),
        ({"colour": "red"}, "colour"),
        ({"base": "x.yaml"}, "base"),
        ({"report": ["rounds_to_target", "speed"]}, "report[1]"),
    ],
)
def test_sweep_errors_name_the_sweep_key(changes: dict[str, Any], key: str):
    with pytest.raises(ScenarioError) as caught:
        expand(sweep_from_mapping(spec(**changes)))
    assert caught.value.key == key
    assert str(caught.value).startswith(key)


def test_report_accepts_the_fields_of_extra_targets():
    data = spec(
        scenario={**BASE, "metrics": {"targets": [1e-4]}},
        report=["rounds_to_1e-04", "time_to_1e-04_s"],
    )
    assert len(expand(sweep_from_mapping(data))) == 16


def test_base_file_resolves_relative_to_the_sweep_file(tmp_path: Path):
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "base.yaml").write_text(
        "name: from-file\nprotocol: {name: all_reduce}\n"
    )
    (tmp_path / "sweep.yaml").write_text("name: s\nbase: scenarios/base.yaml\n")
    runs = expand(load_sweep(tmp_path / "sweep.yaml"))
    assert runs[0].mapping["name"] == "from-file"


def test_mean_cell_marks_repeats_that_never_reached():
    assert mean_cell(pd.Series([3, None, 5])) == "4 (2/3)"
    assert mean_cell(pd.Series([None, None])) == "never (0/2)"
    assert mean_cell(pd.Series([1.5, 2.5])) == "2"
    assert mean_cell(pd.Series([1e-10, 3e-10])) == "2e-10"


def test_table_has_one_row_per_cell_and_case_in_sweep_order():
    runs = pd.DataFrame(
        {
            "peers.count": [8, 8, 8, 16],
            "case": ["a", "a", "b", "a"],
            "rounds_to_target": [2, None, 3, 4],
        },
        dtype=object,
    )
    headers, rows = sweep_table(runs, ["peers.count", "case"], ["rounds_to_target"])
    assert headers == ["peers.count", "case", "rounds_to_target"]
    assert rows == [["8", "a", "2 (1/2)"], ["8", "b", "3"], ["16", "a", "4"]]
    assert "| 8 | a | 2 (1/2) |" in markdown((headers, rows), "t")


def test_sweep_writes_runs_table_and_a_copy_of_the_sweep(tmp_path: Path):
    (tmp_path / "sweep.yaml").write_text(
        "name: s\nscenario: {protocol: {name: all_reduce}, peers: {count: 4}}\n"
    )
    result = sweep(tmp_path / "sweep.yaml", out=tmp_path / "out", workers=1)
    assert {p.name for p in result.out_dir.iterdir()} == {
        "runs.parquet", "metrics.parquet", "table.md", "sweep.yaml", "sweep.png",
    }  # fmt: skip
    assert (result.out_dir / "sweep.yaml").read_text() == (tmp_path / "sweep.yaml").read_text()
    assert list(pd.read_parquet(result.out_dir / "runs.parquet")["seed"]) == [0]


def test_runs_parquet_has_overrides_case_seed_and_every_summary_field(tmp_path: Path):
    runs = pd.read_parquet(sweep(spec(), out=tmp_path / "out", workers=2).out_dir / "runs.parquet")
    assert list(runs["run"]) == list(range(16))
    assert list(runs.columns[:6]) == [
        "run",
        "case",
        "protocol.name",
        "protocol.group_size",
        "peers.count",
        "churn.p",
    ]
    summary_fields = ["seed", "rounds", "sim_time_s", "final_var", "rounds_to_target",
                      "time_to_target_s", "bytes_sent", "wall_time_s"]  # fmt: skip
    assert set(summary_fields) <= set(runs.columns)
    assert list(runs["case"][1:3]) == ["all_reduce", "random_groups(group_size=2)"]


def test_runs_in_a_parallel_sweep_equal_the_same_runs_made_alone(tmp_path: Path):
    data = spec(grid={"peers.count": [8, 16], "churn.p": [0.1]})
    result = sweep(data, out=tmp_path / "out", workers=2, keep_runs=True)
    runs = pd.read_parquet(result.out_dir / "runs.parquet")
    names = [run.dirname for run in expand(sweep_from_mapping(data))]
    for row in runs.to_dict("records"):
        overrides = {"peers.count": row["peers.count"], "churn.p": row["churn.p"]}
        case = CASES[0] if row["case"] == "all_reduce" else CASES[1]
        scenario = sim.scenario_from_mapping(BASE, {**case, **overrides})
        alone = sim.run(scenario, seed=row["seed"])
        kept = pd.read_parquet(result.out_dir / "runs" / names[row["run"]] / "metrics.parquet")
        pd.testing.assert_frame_equal(kept, alone.metrics)
        assert row["final_var"] == alone.summary["final_var"]
        assert row["bytes_sent"] == alone.summary["bytes_sent"]


def test_one_worker_and_two_workers_give_the_same_table(tmp_path: Path):
    one = sweep(spec(), out=tmp_path / "one", workers=1)
    two = sweep(spec(), out=tmp_path / "two", workers=2)
    assert one.table == two.table
    drop = ["wall_time_s"]
    pd.testing.assert_frame_equal(one.runs.drop(columns=drop), two.runs.drop(columns=drop))


def test_an_existing_sweep_folder_needs_force(tmp_path: Path):
    sweep(spec(grid={}), out=tmp_path / "out", workers=1)
    with pytest.raises(ResultExistsError, match="--force"):
        sweep(spec(grid={}), out=tmp_path / "out", workers=1)
    with pytest.raises(ResultExistsError, match="complete"):
        sweep(spec(grid={}), out=tmp_path / "out", workers=1, resume=True)
    sweep(spec(grid={}), out=tmp_path / "out", workers=1, force=True)


def test_resume_runs_only_what_the_interrupted_sweep_did_not_finish(tmp_path: Path):
    class Interrupt(Exception):
        pass

    def stop_after_five(done: int, total: int) -> None:
        if done == 5:
            raise Interrupt

    with pytest.raises(Interrupt):
        sweep(spec(), out=tmp_path / "out", workers=1, progress=stop_after_five)
    assert not (tmp_path / "out" / "runs.parquet").exists()
    with pytest.raises(ResultExistsError, match="--resume"):
        sweep(spec(), out=tmp_path / "out", workers=1)
    starts: list[int] = []
    result = sweep(spec(), out=tmp_path / "out", workers=1, resume=True,
                   progress=lambda done, total: starts.append(done))  # fmt: skip
    assert starts[0] == 5
    assert len(starts) == 16 - 5 + 1
    fresh = sweep(spec(), out=tmp_path / "fresh", workers=1)
    assert result.table == fresh.table
    assert not (tmp_path / "out" / "runs.partial.jsonl").exists()


@pytest.mark.slow
def test_runs_on_a_dask_local_cluster_equal_the_local_runs(tmp_path: Path):
    pytest.importorskip("dask.distributed")
    local = sweep(spec(grid={"peers.count": [8, 16]}), out=tmp_path / "local", workers=1)
    dask = sweep(
        spec(grid={"peers.count": [8, 16]}), out=tmp_path / "dask", workers=2, scheduler="local"
    )
    drop = ["wall_time_s"]
    pd.testing.assert_frame_equal(local.runs.drop(columns=drop), dask.runs.drop(columns=drop))
    from sim.output.sweeps import executors

    address = executors.local_cluster(2)  # the cluster of the sweep above, kept
    again = sweep(
        spec(grid={"peers.count": [8, 16]}), out=tmp_path / "again", workers=2, scheduler="local"
    )
    assert executors.local_cluster(2) == address
    pd.testing.assert_frame_equal(local.runs.drop(columns=drop), again.runs.drop(columns=drop))
    executors.close_local_clusters()


def test_an_unreachable_dask_scheduler_is_a_one_line_error(tmp_path: Path, monkeypatch):
    pytest.importorskip("dask.distributed")
    from sim.output.sweeps import executors

    monkeypatch.setattr(executors, "DASK_CONNECT_TIMEOUT", "1s")
    with pytest.raises(AvsimError, match="--scheduler"):
        sweep(spec(grid={}), out=tmp_path / "out", scheduler="tcp://127.0.0.1:9")


def test_baseline_adds_speed_up_columns_per_grid_cell():
    runs = pd.DataFrame(
        {
            "peers.count": [8, 8, 8, 8, 16, 16],
            "case": ["slow", "slow", "fast", "fast", "slow", "fast"],
            "rounds_to_target": [10.0, 14.0, 4.0, None, 30.0, 10.0],
        }
    )
    headers, rows = sweep_table(runs, ["peers.count", "case"], ["rounds_to_target"], "slow")
    assert headers[-1] == "rounds_to_target speed-up"
    speedups = {(row[0], row[1]): row[-1] for row in rows}
    assert speedups == {
        ("8", "slow"): "1",
        ("8", "fast"): "3",
        ("16", "slow"): "1",
        ("16", "fast"): "3",
    }


def test_baseline_must_index_a_case(tmp_path):
    data = {"name": "s", "scenario": {"protocol": {"name": "all_reduce"}}, "baseline": 2}
    with pytest.raises(ScenarioError, match="baseline"):
        sweep_from_mapping(data)


def test_a_protocol_counter_is_a_reportable_summary_field():
    moshpit = [*CASES, {"protocol": {"name": "moshpit", "group_size": 4}}]
    assert len(expand(sweep_from_mapping(spec(cases=moshpit, report=["groups_formed"])))) == 24
    with pytest.raises(ScenarioError, match="report"):
        expand(sweep_from_mapping(spec(report=["groups_formed"])))  # no case counts groups


def test_a_zero_mean_gives_no_speed_up_instead_of_an_error():
    runs = pd.DataFrame({"case": ["a", "b"], "groups_aborted": [3, 0]})
    _, rows = sweep_table(runs, ["case"], ["groups_aborted"], "a")
    assert {row[0]: row[-1] for row in rows} == {"a": "1", "b": "—"}
