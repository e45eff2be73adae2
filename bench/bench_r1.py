"""R1 (issue 13 part 5): simulated seconds per wall second of a sampled async swarm.

moshpit under ``schedule: async`` on the network clock, 1024 peers on a 32×32 grid,
``vector.dim`` 4096 simulated coordinates carrying ``vector.wire_bytes: 1 GB`` on the
wire, lognormal upload and download (median 100 Mbit/s, sigma 1), 10 ms latency,
exponential churn (mtbf 2 h, mttr 10 min), for one simulated hour (target ≥ 100
simulated s per wall s): ``make bench`` and ``python -m bench report`` run the hour,
``python -m bench.bench_r1 PEERS SECONDS`` any size.

Every group runs alone (:mod:`sim.engine.netclock.alone_groups`): its flows are timed in
one call of a compiled loop when it starts, with its members' churn read ahead. So a
window early in the run is no measure of the rate: the first round's groups of 32 are
timed to their end (~400 simulated s later) within the first seconds. The late-phase
figure times the regime where most groups are pairs and triples: the second half of
``LATE_SECONDS`` at ``LATE_PEERS`` peers. The last figure is what the network clock's
streams (a stream's pieces as one flow) gain over one flow per piece, with the groups on
the clock's events (``network.groups_alone: false``), where streams apply.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import sim
from sim.engine.netclock import NetworkClock

PEERS, SECONDS = 1024, 3600.0


def scenario(peers: int, seconds: float, alone: bool = True) -> Any:
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
            "network": {"groups_alone": alone},
        }
    )  # fmt: skip


#: The same-run A/B of streams (one flow per stream vs one flow per piece), smaller.
AB_PEERS, AB_SECONDS = 256, 30.0
#: The late phase: the second half of this run (the swarm averages in pairs by then).
LATE_PEERS, LATE_SECONDS = 256, 1200.0


def late_phase(peers: int = LATE_PEERS, seconds: float = LATE_SECONDS) -> float:
    """Simulated s per wall s of the R1 workload over the second half of ``seconds``
    (wall time between the samples at half time and at the end)."""
    base = scenario(peers, seconds)
    half = base.model_copy(
        update={"metrics": base.metrics.model_copy(update={"every": seconds / 2})}
    )
    marks: list[tuple[float, float]] = []  # (fraction of the run done, wall clock)

    def progress(fraction: float) -> None:
        marks.append((fraction, time.perf_counter()))

    sim.run(half, seed=0, progress=progress)
    start = next(t for f, t in marks if f >= 0.5 - 1e-9)
    return (seconds / 2) / (marks[-1][1] - start)


def wall_per_sim_s(
    peers: int, seconds: float, streams: bool, alone: bool = True
) -> tuple[float, dict]:
    """Wall seconds per simulated second of the R1 workload, with the network clock's
    streams on (one flow per stream) or off (piece by piece), its groups alone or on the
    clock's events; and the run's summary."""
    default = NetworkClock.streams
    NetworkClock.streams = streams
    try:
        summary = sim.run(scenario(peers, seconds, alone), seed=0).summary
    finally:
        NetworkClock.streams = default
    return summary["wall_time_s"] / summary["sim_time_s"], summary


def run(peers: int = PEERS, seconds: float = SECONDS) -> list[tuple[str, float, str, str]]:
    """The R1 figure (``python -m bench r1``), and what streams as one flow gain over
    piece by piece on a smaller swarm, in the same run (identical results, tested)."""
    wall, summary = wall_per_sim_s(peers, seconds, True)
    size = f"{peers} peers, {seconds:g} s, 1 GB wire"
    piece, _ = wall_per_sim_s(AB_PEERS, AB_SECONDS, False, alone=False)
    stream, _ = wall_per_sim_s(AB_PEERS, AB_SECONDS, True, alone=False)
    ab = f"{AB_PEERS} peers, {AB_SECONDS:g} s, same run, groups on the clock's events"
    late = late_phase()
    late_size = f"{LATE_PEERS} peers, {LATE_SECONDS / 2:g} -> {LATE_SECONDS:g} s, 1 GB wire"
    return [
        ("R1 simulated s per wall s", 1.0 / wall, "s/s", f"{size}; target >= 100"),
        ("R1 late phase simulated s per wall s", late, "s/s", late_size),
        ("R1 messages", float(summary["messages"]), "flows", size),
        ("R1 steps median", float(summary["steps_median"]), "steps", size),
        ("R1 streams: piece-by-piece / one flow", piece / stream, "x", ab),
    ]


if __name__ == "__main__":
    args = [float(a) for a in sys.argv[1:3]]
    for figure, value, unit, reference in run(int(args[0]) if args else PEERS,
                                              args[1] if len(args) > 1 else SECONDS):  # fmt: skip
        print(f"{figure:<40} {value:>14.4g}  {unit:<8} ({reference})")
