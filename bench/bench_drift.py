"""Round-off drift of the global mean over long runs, float32 against float64.

Every protocol that promises to keep the global sum keeps it only to round-off: each
group mean, pairwise exchange or push rounds its results to the state's dtype, and the
rounding errors add up. This benchmark measures how far the mean of all peers' vectors
(computed in float64 from the state, as the recorder does) moves from the initial mean
over

- 1,000 Moshpit rounds on the rounds clock: N = 1024 peers on a 32 × 32 grid with
  re-keying, under ``bernoulli`` churn (p = 5 %, absent peers keep their vectors), so
  that groups keep mixing unequal values instead of reaching exact consensus in two
  rounds;
- 10^6 pairwise gossip exchanges: N = 1024 peers on a ring, rate 1 (512 exchanges per
  unit of time, 1954 rounds), far from consensus all along (the ring mixes slowly).

Vectors start uniform on [0, 1) (mean about 1/2 per coordinate), dim 64. The figure is
the relative drift ‖x̄_t − x̄₀‖ / ‖x̄₀‖ over all coordinates (the recorder's
``mean_drift``, RMS per coordinate, over the RMS of x̄₀), with both means computed
exactly (``math.fsum``): the recorder's float64 ``np.mean`` over 1024 peers errs by up
to ~1e-14 relative, which would hide the drift of a float64 state.

The bound it is compared with: every update rounds a peer's new value once, with a
relative error of at most ε (the dtype's unit round-off: 2^-24 for float32, 2^-53 for
float64), and the g peers that receive one rounded result (a Moshpit group; one end of
a pairwise exchange, g = 1) share its error. Errors of round-to-nearest have no
preferred sign, so after U updates per peer the sum's error is a random walk of
N·U/g steps of size g·ε·|x|, and the relative drift of the mean is about
ε·√(g·U/N) — while values still differ: a group of equal values averages to exactly
the same values (means are taken over deviations), so the drift stops once the peers
agree. The bound adds the resolution of a mean held in float64 (ε of float64, the
floor of any measurement here). ``python -m bench drift`` prints the drift at each
checkpoint, the bound and their ratio.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import sim

N_PEERS = 1024
DIM = 64
CHECKPOINTS = (1, 10, 100, 1000)
MOSHPIT: dict[str, Any] = {
    "peers": {"count": N_PEERS},
    "churn": {"model": "bernoulli", "p": 0.05, "rejoin": "keep"},
    "protocol": {"name": "moshpit", "group_size": 32, "grid_dims": 2, "rekey": True},
}
#: 10^6 exchanges: rate·N/2 = 512 per unit of time.
GOSSIP_ROUNDS = math.ceil(1e6 / (N_PEERS / 2))
GOSSIP: dict[str, Any] = {
    "peers": {"count": N_PEERS},
    "protocol": {"name": "pairwise_gossip", "topology": "ring", "rate": 1.0},
}


def unit_roundoff(dtype: str) -> float:
    """ε = 2^-(mantissa bits + 1): the largest relative error of one rounding."""
    return float(np.finfo(dtype).eps) / 2


def exact_mean(x: np.ndarray) -> np.ndarray:
    """The mean of the rows, correctly rounded (``math.fsum`` per coordinate): a float64
    ``np.mean`` over 1024 rows errs by up to ~1e-14 relative, more than the drift of a
    float64 state."""
    columns = np.asarray(x, dtype=np.float64).T
    return np.array([math.fsum(column) for column in columns]) / x.shape[0]


def drift_at(base: dict[str, Any], dtype: str, rounds: int) -> float:
    """‖x̄_t − x̄₀‖ / ‖x̄₀‖ after ``rounds`` rounds (a run stopped there: the same draws
    as a longer run up to that round), both means exact."""
    vector = {"dim": DIM, "dtype": dtype, "init": "uniform"}
    stop = {"max_rounds": rounds, "target_var": 0}
    mapping = {**base, "name": "drift", "vector": vector, "stop": stop}
    scenario = sim.scenario_from_mapping(mapping)
    result = sim.run(scenario, seed=0)
    mean0 = exact_mean(_initial_vectors(scenario))
    mean = exact_mean(np.asarray(result.state.x))
    return float(np.linalg.norm(mean - mean0) / np.linalg.norm(mean0))


def _initial_vectors(scenario: Any) -> np.ndarray:
    """The run's initial state (drawn as the engine draws it, in the state's dtype)."""
    from sim.core.seeding import component_rng
    from sim.model.vectors import initial_vectors

    x0 = initial_vectors(scenario.vector, N_PEERS, component_rng(0, "init"))
    return np.asarray(x0, dtype=scenario.vector.dtype)


def figures(name: str, base: dict[str, Any], sharing: int, checkpoints: Any) -> list:
    """(figure, value, unit, reference) rows: the drift at each checkpoint, for both
    dtypes, and its ratio to ε·√(g·U/N) + ε₆₄ (U = rounds: every peer updates about once
    a round in both benchmarks; g = ``sharing``)."""
    rows = []
    for dtype in ("float32", "float64"):
        eps = unit_roundoff(dtype)
        for t in checkpoints:
            value = drift_at(base, dtype, t)
            bound = eps * math.sqrt(sharing * t / N_PEERS) + unit_roundoff("float64")
            label = f"{name} {dtype} @{t}"
            rows.append((f"{label}: drift", value, "relative", f"bound = {bound:.2g}"))
            rows.append((f"{label}: drift / bound", value / bound, "ratio", "≲ 1"))
    return rows


def run() -> list[tuple[str, float, str, str]]:
    moshpit = figures("moshpit rounds", MOSHPIT, 32, CHECKPOINTS)
    gossip = figures("gossip rounds (512 exchanges each)", GOSSIP, 1, (1, 10, 100, GOSSIP_ROUNDS))
    return moshpit + gossip
