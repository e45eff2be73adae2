"""Sweep figures: W1 (1 vs 2 local workers, and a Dask LocalCluster) and P1 (paper table).

W1: a sweep of 16 runs (Moshpit, N = 1024, dim = 256, 50 rounds, bernoulli churn) run
with 1 worker, 2 workers and a 2-worker Dask LocalCluster, alternated; speed-up is the
ratio of the medians (target ≥ 1.7). The process pool's fork server and the
LocalCluster are started once and reused (as in a notebook session); the LocalCluster's
cold start (first sweep, cluster start-up included) is reported on its own. P1: the
whole Moshpit paper averaging table (`scenarios/paper/moshpit_averaging.yaml`, 960
runs) with 2 workers (target ≤ 60 s).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sim.output.sweeps import sweep
from sim.output.sweeps.executors import close_local_clusters

ROOT = Path(__file__).resolve().parents[1]


def _w1_spec() -> dict[str, Any]:
    return {
        "name": "w1",
        "repeats": 16,
        "scenario": {
            "name": "w1",
            "peers": {"count": 1024},
            "vector": {"dim": 256},
            "churn": {"model": "bernoulli", "p": 0.01},
            "protocol": {"name": "moshpit", "group_size": 32, "grid_dims": 2},
            "stop": {"max_rounds": 50, "target_var": 0},
        },
    }


def _timed(spec: Any, **options: Any) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        sweep(spec, out=Path(tmp) / "out", figure=False, **options)  # the sweep, not matplotlib
        return time.perf_counter() - started


def w1(repeats: int = 3) -> tuple[float, float, float]:
    """Speed-ups over 1 worker: 2 local workers, a warm 2-worker Dask LocalCluster, and
    the LocalCluster's first sweep (start-up included)."""
    spec = _w1_spec()
    _timed({**spec, "repeats": 2}, workers=2)  # start the fork server once
    cold = _timed(spec, workers=2, scheduler="local")  # starts the LocalCluster
    one, two, dask = [], [], []
    for _ in range(repeats):
        one.append(_timed(spec, workers=1))
        two.append(_timed(spec, workers=2))
        dask.append(_timed(spec, workers=2, scheduler="local"))
    base = statistics.median(one)
    close_local_clusters()
    return base / statistics.median(two), base / statistics.median(dask), base / cold


def p1() -> float:
    """Wall seconds of the paper's whole averaging table with 2 workers."""
    return _timed(ROOT / "scenarios" / "paper" / "moshpit_averaging.yaml", workers=2)


def run() -> list[tuple[str, float, str, str]]:
    local, dask, cold = w1()
    return [
        ("W1 sweep 16 runs, 2 workers / 1", local, "speed-up", "target >= 1.7"),
        ("W1 sweep 16 runs, Dask LocalCluster(2) / 1", dask, "speed-up", "warm; target >= 1.7"),
        ("W1 Dask LocalCluster(2) first sweep / 1", cold, "speed-up", "start-up included"),
        ("P1 Moshpit paper table, 2 workers", p1(), "s", "target <= 60 s"),
    ]


if __name__ == "__main__":
    for figure in run():
        print(figure)
