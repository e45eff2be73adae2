"""``peers.compute_jitter``: each step's compute time varies (``sim/model/jitter.py``).

A lognormal factor of mean 1 and the given coefficient of variation multiplies every
step's compute, drawn from each peer's own stream; 0 (the default) draws nothing.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from typer.testing import CliRunner

import sim
from sim.cli import app
from sim.engine.trace import TraceOptions
from sim.model.jitter import LognormalJitter, NoJitter, jitter_for


def test_the_factors_have_mean_one_and_the_given_coefficient_of_variation():
    jitter = LognormalJitter(0.2, seed=7, n_peers=3)
    draws = np.array([jitter.compute_s(1, 2.0) for _ in range(40_000)]) / 2.0
    assert abs(draws.mean() - 1.0) < 4 * 0.2 / math.sqrt(draws.size)  # 4 standard errors
    assert draws.std() / draws.mean() == pytest.approx(0.2, rel=0.05)
    assert draws.min() > 0


def test_each_peer_draws_from_its_own_stream_whatever_the_order():
    a, b = LognormalJitter(0.5, 3, 4), LognormalJitter(0.5, 3, 4)
    first = [a.compute_s(0, 1.0) for _ in range(100)] + [a.compute_s(2, 1.0) for _ in range(100)]
    second = [b.compute_s(2, 1.0) for _ in range(100)] + [b.compute_s(0, 1.0) for _ in range(100)]
    assert first == second[100:] + second[:100]
    assert first[:100] != first[100:]


def test_no_jitter_returns_compute_exactly():
    assert isinstance(jitter_for(0.0, 1, 4), NoJitter)
    assert NoJitter().compute_s(3, 0.1 + 0.2) == 0.1 + 0.2


def training(jitter: float, protocol: str = "pairwise_gossip") -> dict:
    return {
        "name": "jitter", "seed": 2, "clock": "network", "schedule": "async",
        "peers": {"count": 4, "compute": "0.1 s", "compute_jitter": jitter,
                  "upload": "1 Gbit/s", "download": "1 Gbit/s", "latency": "1 ms"},
        "churn": {"model": "none"},
        "protocol": {"name": protocol},
        "workload": {"name": "logistic", "split": "iid", "batch_size": 8},
        "stop": {"max_time": "20 s", "max_rounds": None, "target_var": None},
    }  # fmt: skip


def test_gradient_steps_take_jittered_compute_slots():
    run = sim.run(training(0.3), trace=TraceOptions())
    steps = [e for e in run.trace if e.get("cat") == "step" and e["ph"] == "X"]
    durations = np.array([e["dur"] for e in steps]) / 1e5  # in units of compute (0.1 s)
    assert durations.size > 600
    assert abs(durations.mean() - 1.0) < 0.05
    assert durations.std() / durations.mean() == pytest.approx(0.3, rel=0.15)
    taken = run.extra_tables["training"]["grad_steps"].to_numpy()
    assert taken.sum() == durations.size
    assert len(set(taken.tolist())) > 1  # the peers no longer step in lock-step


def test_without_jitter_every_step_takes_compute():
    run = sim.run(training(0.0), trace=TraceOptions())
    durations = {e["dur"] for e in run.trace if e.get("cat") == "step" and e["ph"] == "X"}
    assert durations == {100_000}
    assert set(run.extra_tables["training"]["grad_steps"]) == {199}


def test_a_collective_waits_for_the_slowest_jittered_compute():
    def run(jitter: float) -> float:
        mapping = {
            "name": "c", "seed": 1, "clock": "network", "schedule": "async",
            "peers": {"count": 4, "compute": "1 s", "compute_jitter": jitter,
                      "upload": "1 Gbit/s", "download": "1 Gbit/s", "latency": "1 ms"},
            "churn": {"model": "none"}, "vector": {"dim": 8},
            "protocol": {"name": "ring_allreduce"},
            "stop": {"max_time": "200 s", "max_rounds": None, "target_var": None},
        }  # fmt: skip
        return float(sim.run(mapping).summary["rounds"])

    exact, jittered = run(0.0), run(0.5)
    assert exact > jittered  # each round waits for the largest of 4 factors of mean 1
    assert jittered > exact / 3


@pytest.mark.parametrize("value", ["-0.1", "11", "abc"])
def test_a_bad_jitter_is_a_one_line_error(tmp_path, value):
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\npeers: {{count: 4, compute_jitter: {value}}}\n")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: peers.compute_jitter: ")
    assert len(result.stderr.splitlines()) == 1
