"""A1 (issue 12): an asynchronous Moshpit swarm's wall time against barrier rounds'.

moshpit on the network clock, 256 peers on a 16×16 grid, dim 2^16 float32, lognormal
upload and download (median 100 Mbit/s, sigma 1), 10 ms latency, no local work
(``compute: 0``), no target: ``SECONDS`` simulated seconds under ``schedule: barrier``
and under ``schedule: async``, in the same process. Figures: wall seconds per simulated
second of each, their ratio (A1: async ≤ 1.5 × barrier), and wall seconds per completed
step (async peers do more steps per simulated second than barrier rounds: there is no
waiting).

Both schedules run once small first (the compiled kernels load then, not inside the
first measured run), then ``REPEATS`` times each, alternately; each figure is the median
over the repeats (single runs of this size gave ratios from 0.62 to 1.45 on a shared
machine, the first run also paying for the kernels). The issue's full size (1024 peers
on 32×32, 60 s) is ``python -m bench.bench_async 1024 60`` (minutes, not part of
``make bench``).
"""

from __future__ import annotations

import math
import statistics
import sys
from typing import Any

import sim
from sim.network.flows import COMPILED_MIN_PEERS

PEERS, SECONDS = 256, 10.0
#: Measured runs of each schedule (alternately); figures are their medians.
REPEATS = 3


def scenario(schedule: str, peers: int, seconds: float) -> Any:
    side = math.isqrt(peers)
    link = {"dist": "lognormal", "median": "100 Mbit/s", "sigma": 1.0}
    return sim.scenario_from_mapping(
        {
            "name": f"bench-a1-{schedule}",
            "clock": "network",
            "schedule": schedule,
            "peers": {"count": peers, "upload": link, "download": link, "latency": "10 ms",
                      "compute": 0},
            "vector": {"dim": 2**16, "dtype": "float32"},
            "protocol": {"name": "moshpit", "group_size": side, "grid_dims": 2},
            "stop": {"max_time": seconds, "target_var": 0},
            "metrics": {"every": seconds},
        }
    )  # fmt: skip


def measure(
    peers: int = PEERS, seconds: float = SECONDS, repeats: int = REPEATS
) -> dict[str, float]:
    """Wall per simulated second of both schedules, steps and groups of async:
    medians over ``repeats`` alternated runs, after a small warm-up run of each."""
    for schedule in ("barrier", "async"):  # on the compiled path too (>= 256 peers)
        sim.run(scenario(schedule, COMPILED_MIN_PEERS, 0.5), seed=0)
    runs: dict[str, list[dict[str, Any]]] = {"barrier": [], "async": []}
    for _ in range(repeats):
        for schedule in runs:
            runs[schedule].append(sim.run(scenario(schedule, peers, seconds), seed=0).summary)

    wall = {
        k: statistics.median(s["wall_time_s"] / s["sim_time_s"] for s in summaries)
        for k, summaries in runs.items()
    }
    barrier, swarm = runs["barrier"][0], runs["async"][0]  # the same in every repeat
    steps = swarm["steps_median"] * peers
    return {
        "barrier": wall["barrier"],
        "async": wall["async"],
        "ratio": wall["async"] / wall["barrier"],
        "barrier_step": wall["barrier"] * barrier["sim_time_s"] / max(1, barrier["rounds"]) / peers,
        "async_step": wall["async"] * swarm["sim_time_s"] / max(1.0, steps),
        "steps_median": swarm["steps_median"],
        "barrier_rounds": barrier["rounds"],
        "groups": swarm["groups_run"],
    }


def run(peers: int = PEERS, seconds: float = SECONDS) -> list[tuple[str, float, str, str]]:
    """The A1 figures (``python -m bench async``)."""
    m = measure(peers, seconds)
    size = f"{peers} peers, {seconds:g} s"
    return [
        ("A1 barrier wall per sim s", m["barrier"], "s/s", size),
        ("A1 async wall per sim s", m["async"], "s/s", size),
        ("A1 async/barrier", m["ratio"], "ratio", f"target ≤ 1.5; median of {REPEATS}"),
        ("A1 barrier wall per peer-round", m["barrier_step"], "s", f"{m['barrier_rounds']} rounds"),
        ("A1 async wall per peer-step", m["async_step"], "s", f"median {m['steps_median']:g}"),
        ("A1 async groups", float(m["groups"]), "groups", size),
    ]


if __name__ == "__main__":
    args = [float(a) for a in sys.argv[1:3]]
    for figure, value, unit, reference in run(int(args[0]) if args else PEERS,
                                              args[1] if len(args) > 1 else SECONDS):  # fmt: skip
        print(f"{figure:<40} {value:>14.4g}  {unit:<8} ({reference})")
