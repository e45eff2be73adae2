"""The float32 round-off drift of the global mean stays within the bound that
docs/design.md ("Float32 round-off drift of the global mean") states and
``python -m bench drift`` measures at full size: ε·√(g·U/N) + ε₆₄, for ε the float32
unit round-off (2^-24), g the peers that share one rounded result (a Moshpit group; 1
for a pairwise exchange), U the updates per peer (one a round in both workloads) and
N the peers. The workloads are the benchmark's, smaller (N = 256, dim 64, values
uniform on [0, 1)): Moshpit on a re-keyed 16 × 16 grid under bernoulli churn (groups
keep mixing unequal values), pairwise gossip on a ring (far from consensus); the drift
‖x̄_t − x̄₀‖/‖x̄₀‖ has both means exact (``math.fsum``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sim

N_PEERS = 256
DIM = 64
SEEDS = (0, 1, 2)
#: ε of float32 and of float64: the largest relative error of one rounding.
EPS32 = float(np.finfo(np.float32).eps) / 2
EPS64 = float(np.finfo(np.float64).eps) / 2
MOSHPIT: dict[str, Any] = {
    "churn": {"model": "bernoulli", "p": 0.05, "rejoin": "keep"},
    "protocol": {"name": "moshpit", "group_size": 16, "grid_dims": 2, "rekey": True},
}
GOSSIP: dict[str, Any] = {
    "protocol": {"name": "pairwise_gossip", "topology": "ring", "rate": 1.0},
}


def bound(sharing: int, updates: int) -> float:
    """ε·√(g·U/N) + ε₆₄ (docs/design.md)."""
    return EPS32 * math.sqrt(sharing * updates / N_PEERS) + EPS64


def exact_mean(x: np.ndarray) -> np.ndarray:
    """The rows' mean, correctly rounded per coordinate."""
    return np.array([math.fsum(column) for column in np.asarray(x, np.float64).T]) / len(x)


def drift(tmp_path: Path, base: dict[str, Any], rounds: int, seed: int) -> float:
    """‖x̄_t − x̄₀‖/‖x̄₀‖ of a float32 run of ``rounds`` rounds from uniform vectors."""
    x0 = np.random.default_rng(seed).random((N_PEERS, DIM)).astype(np.float32)
    path = tmp_path / f"x0_{seed}.npy"
    np.save(path, x0)
    scenario = sim.scenario_from_mapping(
        {
            **base,
            "name": "drift",
            "peers": {"count": N_PEERS},
            "vector": {"dim": DIM, "dtype": "float32", "init": "file", "file": str(path)},
            "stop": {"max_rounds": rounds, "target_var": 0},
        }
    )
    x = np.asarray(sim.run(scenario, seed=seed).state.x)
    assert x.dtype == np.float32
    mean0, mean = exact_mean(x0), exact_mean(x)
    return float(np.linalg.norm(mean - mean0) / np.linalg.norm(mean0))


@pytest.mark.parametrize(
    ("base", "sharing", "checkpoints"),
    [(MOSHPIT, 16, (1, 10, 50)), (GOSSIP, 1, (1, 10, 100))],
    ids=["moshpit", "pairwise_gossip"],
)
def test_float32_drift_of_the_mean_stays_within_the_documented_bound(
    tmp_path, base, sharing, checkpoints
):
    for seed in SEEDS:
        for rounds in checkpoints:
            value = drift(tmp_path, base, rounds, seed)
            assert 0 < value <= bound(sharing, rounds), (seed, rounds, value)
