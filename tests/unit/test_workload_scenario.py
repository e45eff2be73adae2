"""The ``workload`` section: defaults, what it derives, and one-line errors naming the key."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.core.errors import ScenarioError
from sim.model.scenario import json_schema, load_scenario, scenario_from_mapping

BASE = {"name": "t", "peers": {"count": 8}, "protocol": {"name": "gossip"}}


def make(workload: dict | None = None, **overrides: object):
    data = dict(BASE) if workload is None else {**BASE, "workload": workload}
    return scenario_from_mapping(data, overrides)


def test_without_a_workload_the_scenario_is_pure_averaging():
    sc = make()
    assert sc.workload.name == "none"
    assert sc.stop.target_var == 1e-9
    assert sc.vector.dim == 1
    assert "workload" in json_schema()["properties"]


def test_a_logistic_workload_derives_vector_dim_and_drops_the_variance_target():
    sc = make({"name": "logistic"})
    assert sc.vector.dim == (64 + 1) * 10
    assert sc.stop.target_var is None
    assert sc.stop.max_rounds == 50
    generated = make({"name": "logistic", "data": "classification", "features": 5, "classes": 3})
    assert generated.vector.dim == 18
    assert make({"name": "logistic"}, **{"vector.dim": 650}).vector.dim == 650
    assert make({"name": "quadratic"}, **{"vector.dim": 7}).vector.dim == 7
    kept = make({"name": "quadratic"}, **{"stop.target_var": 1e-6})
    assert kept.stop.target_var == 1e-6  # a target the scenario sets stays


def test_a_decaying_schedule_spans_the_run_unless_told_otherwise():
    sc = make({"name": "quadratic", "local_steps": 3, "optimizer": {"schedule": "cosine"}},
              **{"stop.max_rounds": 40})  # fmt: skip
    assert sc.workload.optimizer.total_steps == 120
    fixed = make({"name": "quadratic", "optimizer": {"schedule": "step", "total_steps": 7}})
    assert fixed.workload.optimizer.total_steps == 7


def test_the_resolved_scenario_round_trips_through_its_dump():
    sc = make({"name": "logistic", "split": "dirichlet", "alpha": 0.3},
              **{"metrics.targets": [1e-3, {"loss": 0.5}]})  # fmt: skip
    assert scenario_from_mapping(sc.model_dump(mode="json")) == sc


@pytest.mark.parametrize(
    ("workload", "overrides", "message"),
    [
        ({"name": "logistic"}, {"vector.dim": 64},
         "vector.dim: expected 650, the logistic model's parameters ((features 64 + 1) × "
         "classes 10), or no vector.dim, got 64"),
        ({"name": "logistic", "overlap": True}, {"clock": "network", "stop.max_time": 5},
         "workload.overlap: expected false with clock: network"),
        ({"name": "quadratic"}, {"vector.dtype": "float16"},
         "vector.dtype: expected float64 or float32 with a workload, got 'float16'"),
        ({"name": "logistic"}, {"peers.count": 2000},
         "workload.split: expected shared with more peers (2000) than training samples (1437)"),
        ({"name": "quadratic", "optimizer": {"nesterov": True}}, {},
         "workload.optimizer.momentum: expected momentum > 0 with nesterov: true, got 0.0"),
        ({"name": "logistic", "samples": 50}, {},
         "workload.samples: expected no samples with data: digits"),
        ({"name": "logistic", "data": "file"}, {},
         "workload.file: expected the path of an .npz with X and y with data: file, got None"),
        ({"name": "logistic", "data": "classification", "features": 2, "classes": 3}, {},
         "workload.classes: expected at most 2**(features − 1) = 2 classes, got 3"),
        ({"name": "logistic", "data": "classification", "samples": 10**7, "features": 100}, {},
         "workload.samples: expected samples × (features + 1) ≤ 134217728"),
        ({"name": "sgd"}, {}, "workload.name: expected one of: none, quadratic, logistic"),
        ({"name": "quadratic", "lr": 0.1}, {}, "workload.lr: unknown key; known keys here:"),
        ({"name": "quadratic", "optimizer": {"lr": 0}}, {},
         "workload.optimizer.lr: expected greater than 0"),
        ({"name": "quadratic", "local_steps": 10**5}, {}, "workload.local_steps: expected"),
        ({"name": "quadratic", "optimizer": {"schedule": "cosine"}},
         {"stop.max_rounds": None, "stop.max_time": 30},
         "workload.optimizer.total_steps: expected a number of steps for schedule: cosine"),
        ({"name": "quadratic"}, {"stop.max_rounds": None},
         "stop.max_rounds: expected stop.max_rounds or stop.max_time with a workload"),
        (None, {"metrics.targets": [{"loss": 0.3}]},
         "metrics.targets.0: expected a variance threshold (loss targets need a workload)"),
        ({"name": "quadratic"}, {"metrics.targets": [1e-4, -1]},
         "metrics.targets.1: expected a number > 0 (a variance) or {loss: value}, got -1"),
        ({"name": "quadratic"}, {"metrics.targets": [{"los": 1}]},
         "metrics.targets.0.los: unknown key; known keys here: loss"),
        ({"name": "quadratic"}, {"metrics.targets": [{"loss": "x"}]},
         "metrics.targets.0.loss: expected a loss > 0, got 'x'"),
    ],
)  # fmt: skip
def test_a_bad_workload_is_one_error_naming_the_key(workload, overrides, message):
    with pytest.raises(ScenarioError) as info:
        make(workload, **overrides)
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


def test_a_data_file_is_found_beside_the_scenario_and_sized_before_the_run(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", X=rng.standard_normal((30, 3)), y=np.arange(30) % 4)
    (tmp_path / "s.yaml").write_text(
        "peers: {count: 4}\nprotocol: {name: all_reduce}\n"
        "workload: {name: logistic, data: file, file: d.npz, batch_size: 4}\n"
        "stop: {max_rounds: 3}\n"
    )
    sc = load_scenario(tmp_path / "s.yaml")
    assert sc.vector.dim == (3 + 1) * 4
    assert sc.workload.file == str(tmp_path / "d.npz")


def test_the_cli_says_a_bad_workload_in_one_line_and_runs_a_good_one(tmp_path):
    runner = CliRunner()
    bad = tmp_path / "bad.yaml"
    bad.write_text("protocol: {name: gossip}\nworkload: {name: logistic}\nvector: {dim: 3}\n")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: vector.dim: expected 650")
    assert len(result.stderr.splitlines()) == 1
    good = tmp_path / "good.yaml"
    good.write_text(
        "name: good\npeers: {count: 4}\nprotocol: {name: gossip}\n"
        "workload: {name: quadratic, local_steps: 2}\nvector: {dim: 3}\n"
        "stop: {max_rounds: 4}\nmetrics: {targets: [{loss: 100}]}\n"
    )
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(good), "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    import json

    import pandas as pd

    summary = json.loads((out / "summary.json").read_text())["runs"][0]
    assert summary["grad_steps"] == 4 * 4 * 2
    assert summary["rounds_to_loss_100"] == 0
    assert "final_excess_loss" in summary
    assert (pd.read_parquet(out / "training.parquet")["grad_steps"] == 8).all()
    assert "loss" in pd.read_parquet(out / "metrics.parquet").columns


def test_a_sweep_may_report_the_training_fields(tmp_path):
    from sim.output.sweeps.plan import expand
    from sim.output.sweeps.spec import load_sweep

    path = tmp_path / "sweep.yaml"
    path.write_text(
        "name: s\nscenario:\n  peers: {count: 4}\n  vector: {dim: 2}\n"
        "  protocol: {name: gossip}\n  workload: {name: quadratic}\n"
        "  metrics: {targets: [{loss: 0.5}]}\n"
        "cases: [{label: a}]\n"
        "report: [final_loss, final_excess_loss, grad_steps_max, time_to_loss_0.5_s]\n"
    )
    assert len(expand(load_sweep(path))) == 1
    path.write_text(path.read_text().replace("final_excess_loss", "final_accuracy"))
    with pytest.raises(ScenarioError, match="final_accuracy"):
        expand(load_sweep(path))
