"""Training figure T1: batched local SGD against one batched matmul (issue 14).

T1: logistic regression on the bundled digits (64 features + bias, 10 classes: 650
parameters per peer), 1024 peers, every peer reading the whole training set, batch 32.
One training step of all peers (gather the minibatches, two batched matrix products, a
softmax, the SGD update: :meth:`sim.model.training.Trainer.steps`) against one batched
numpy matmul of the forward shape, (1024, 32, 65) @ (1024, 65, 10), timed back to back
in the same run, interleaved. A figure is (gradient steps per second) ÷ (matmuls
per second) = matmul time / step time, each the fastest of its repeats (on a shared
machine the fastest is the one least disturbed); T1 is the median of
:data:`FIGURES` such figures (target ≥ 0.3: a step is at least two such products plus
the gathers and the softmax).

Also timed: ``scenarios/training_logistic.yaml`` on the rounds clock (32 peers, Moshpit
SGD, metrics every round), the median wall time of five runs after a warm-up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import sim
from sim.engine.schedules import engine_for

PEERS, BATCH = 1024, 32
#: T1 figures whose median is reported (each the fastest of ``repeats`` pairs).
FIGURES = 5
SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "training_logistic.yaml"
T1_SCENARIO = {
    "name": "t1",
    "peers": {"count": PEERS},
    "protocol": {"name": "all_reduce"},
    "workload": {"name": "logistic", "split": "shared", "batch_size": BATCH},
    "stop": {"max_rounds": 1},
}


def _fastest_ratio(reference: Callable[[], object], fn: Callable[[], object], repeats: int
                   ) -> tuple[float, float]:  # fmt: skip
    """(fastest time of ``reference`` / fastest time of ``fn``, fastest time of ``fn``)
    over ``repeats`` runs of each, interleaved."""
    ref_s, fn_s = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        reference()
        middle = time.perf_counter()
        fn()
        ref_s.append(middle - started)
        fn_s.append(time.perf_counter() - middle)
    return min(ref_s) / min(fn_s), min(fn_s)


def t1(repeats: int = 30, figures: int = FIGURES) -> tuple[float, float]:
    """(median of ``figures`` ratios matmul time / step time, the gradient steps per
    second of all peers together at the median figure's step time)."""
    engine = engine_for(sim.scenario_from_mapping(T1_SCENARIO), 0)
    trainer, state = engine.trainer, engine.state
    assert trainer is not None
    rows = np.arange(PEERS)
    features, classes = 65, 10
    rng = np.random.default_rng(0)
    a = rng.standard_normal((PEERS, BATCH, features))
    b = rng.standard_normal((PEERS, features, classes))

    def step() -> None:
        trainer.steps(state, rows, 1)

    step()  # warm caches, outside the figure
    found = sorted(_fastest_ratio(lambda: np.matmul(a, b), step, repeats) for _ in range(figures))
    ratio, step_s = found[len(found) // 2]
    return ratio, PEERS / step_s


def scenario_wall_s(runs: int = 5) -> float:
    """Median wall time of ``scenarios/training_logistic.yaml`` (after one warm-up run)."""
    scenario = sim.load_scenario(SCENARIO)
    sim.run(scenario)
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        sim.run(scenario)
        walls.append(time.perf_counter() - started)
    return float(np.median(walls))


def run() -> list[tuple[str, float, str, str]]:
    ratio, per_s = t1()
    return [
        ("T1 step / batched matmul", ratio, "ratio", "target >= 0.3"),
        ("T1 gradient steps per second", per_s, "steps/s", "1024 peers, 650 params, batch 32"),
        ("training_logistic scenario wall", scenario_wall_s(), "s", "rounds clock, 30 rounds"),
    ]


if __name__ == "__main__":
    for figure, value, unit, reference in run():
        print(f"{figure:<40} {value:>14.4g}  {unit:<16} ({reference})")
