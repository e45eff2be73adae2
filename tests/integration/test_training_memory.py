"""A training run's memory on the rounds clock: its data and optimizer state are in the
estimate (:func:`sim.engine.resources.memory_parts`, part ``training``), so the estimate
bounds the measured peak (tracemalloc, as ``test_resources.py`` measures), and a data set
too large for ``--max-memory`` is refused before it is made, in one line naming its key.
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest
from typer.testing import CliRunner

import sim
from sim import engine
from sim.cli import app
from sim.engine.resources import memory_parts

MIB = 2**20


def training(peers: int, workload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": "training_memory", "peers": {"count": peers},
            "protocol": {"name": "gossip"}, "workload": workload,
            "stop": {"max_rounds": 2}, **extra}  # fmt: skip


CASES = {
    "generated data, float32 state, momentum": training(
        4,
        {
            "name": "logistic",
            "data": "classification",
            "samples": 50_000,
            "features": 63,
            "optimizer": {"momentum": 0.9},
        },
        vector={"dtype": "float32"},
    ),
    "many peers, momentum and weight decay": training(
        1024,
        {
            "name": "logistic",
            "split": "iid",
            "local_steps": 2,
            "optimizer": {"momentum": 0.9, "nesterov": True, "weight_decay": 1e-4},
        },
    ),
    "quadratic's H": training(8, {"name": "quadratic", "noise": 1.0}, vector={"dim": 512}),
}


def traced_peak(mapping: dict[str, Any]) -> int:
    sc = sim.scenario_from_mapping(mapping)
    gc.collect()
    tracemalloc.start()
    try:
        engine.run(sc)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("mapping", CASES.values(), ids=CASES.keys())
def test_the_estimate_bounds_a_training_runs_peak(mapping):
    estimate = memory_parts(sim.scenario_from_mapping(mapping))
    measured = traced_peak(mapping)
    parts = {k: f"{v / MIB:.1f} MiB" for k, v in estimate.parts.items()}
    report = f"estimate {parts}, measured {measured / MIB:.1f} MiB"
    variable = estimate.nbytes - estimate.parts["runtime"]
    assert estimate.parts["training"] >= variable / 2, report  # the case is about training
    assert measured <= estimate.nbytes, report


def refusal(tmp_path, scenario: str, limit: str) -> str:
    """``avsim run`` of ``scenario`` under ``--max-memory limit``: refused before anything
    is written, in one line (returned)."""
    path = tmp_path / "big.yaml"
    path.write_text(scenario)
    result = CliRunner().invoke(app, ["run", str(path), "--max-memory", limit,
                                      "--out", str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "out").exists()
    return result.stderr


def test_data_beyond_max_memory_is_refused_in_one_line_naming_workload_samples(tmp_path):
    stderr = refusal(
        tmp_path,
        "name: big\npeers: {count: 8}\nprotocol: {name: all_reduce}\n"
        "workload: {name: logistic, data: classification, samples: 2000000, features: 63}\n"
        "stop: {max_rounds: 2}\n",
        "512MiB",
    )
    assert stderr.startswith("error: workload.samples: 2000000 needs about ")
    assert "512 MiB limit set by --max-memory" in stderr


def test_a_quadratic_too_large_for_max_memory_is_blamed_on_vector_dim(tmp_path):
    # its dim × dim Hessian is most of the estimate: vector.dim, not peers.count, is the key
    stderr = refusal(
        tmp_path,
        "name: big\npeers: {count: 4}\nprotocol: {name: all_reduce}\n"
        "vector: {dim: 20000}\nworkload: {name: quadratic}\nstop: {max_rounds: 2}\n",
        "1GiB",
    )
    assert stderr.startswith("error: vector.dim: 20000 needs about ")
    assert "lower vector.dim" in stderr
