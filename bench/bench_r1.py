"""R1 (issue 13 part 5): simulated seconds per wall second of a sampled async swarm.

moshpit under ``schedule: async`` on the network clock, 1024 peers on a 32×32 grid,
``vector.dim`` 4096 simulated coordinates carrying ``vector.wire_bytes: 1 GB`` on the
wire, lognormal upload and download (median 100 Mbit/s, sigma 1), 10 ms latency,
exponential churn (mtbf 2 h, mttr 10 min). The issue's figure is one simulated hour
(target ≥ 100 simulated s per wall s); ``make bench`` runs ``SECONDS`` of it, and
``python -m bench.bench_r1 PEERS SECONDS`` any size (the hour is
``python -m bench.bench_r1 1024 3600``).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import sim

PEERS, SECONDS = 1024, 120.0


def scenario(peers: int, seconds: float) -> Any:
    side = math.isqrt(peers)
    link = {"dist": "lognormal", "median": "100 Mbit/s", "sigma": 1.0}
    return sim.scenario_from_mapping(
        {
            "name": "bench-r1",
            "clock": "network",
            "schedule": "async",
            "peers": {"count": peers, "upload": link, "download": link, "latency": "10 ms",
                      "compute": "1 s"},
            "churn": {"model": "exponential", "mtbf": "2 h", "mttr": "10 min"},
            "vector": {"dim": 4096, "dtype": "float32", "wire_bytes": "1 GB"},
            "protocol": {"name": "moshpit", "group_size": side, "grid_dims": 2},
            "stop": {"max_time": seconds, "target_var": 0},
            "metrics": {"every": seconds},
        }
    )  # fmt: skip


def run(peers: int = PEERS, seconds: float = SECONDS) -> list[tuple[str, float, str, str]]:
    """The R1 figure (``python -m bench r1``)."""
    summary = sim.run(scenario(peers, seconds), seed=0).summary
    rate = summary["sim_time_s"] / summary["wall_time_s"]
    size = f"{peers} peers, {seconds:g} s, 1 GB wire"
    return [
        ("R1 simulated s per wall s", rate, "s/s", f"{size}; target >= 100"),
        ("R1 messages", float(summary["messages"]), "flows", size),
        ("R1 steps median", float(summary["steps_median"]), "steps", size),
    ]


if __name__ == "__main__":
    args = [float(a) for a in sys.argv[1:3]]
    for figure, value, unit, reference in run(int(args[0]) if args else PEERS,
                                              args[1] if len(args) > 1 else SECONDS):  # fmt: skip
        print(f"{figure:<40} {value:>14.4g}  {unit:<8} ({reference})")
