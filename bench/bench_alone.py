"""A group's flows alone on their links (:func:`sim.engine.netclock.alone.run_alone`)
against the network clock, on R1's groups (issue 13).

The R1 workload (:mod:`bench.bench_r1`) runs at ``PEERS`` peers for ``SECONDS``; every
group it ran to its end is run again twice, each in an environment of its own: by the
network clock (its default: streams, chunks, quiet ends) and by the loop. The figures
are wall time per message of each and their ratio, for the first round's large groups
(started before ``FIRST_S``) and for the late phase's pairs and triples (started after
``LATE_S``). ``python -m bench.bench_alone [PEERS SECONDS]``.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import simpy

import sim
from bench import bench_r1
from sim.engine.netclock.alone import run_alone
from sim.engine.netclock.replay import on_the_clock, recorded_groups
from sim.network import FlowNetwork

PEERS, SECONDS = 256, 600.0
FIRST_S, LATE_S = 100.0, 300.0


def groups(peers: int, seconds: float) -> tuple[tuple[Any, ...], list[dict[str, Any]]]:
    """The run's links and every group it ran to its end (start, flows, presence)."""
    return recorded_groups(lambda: sim.run(bench_r1.scenario(peers, seconds), seed=0))


def per_message(links: tuple[Any, ...], chosen: list[dict[str, Any]]) -> tuple[float, float]:
    """Wall seconds per message of the network clock and of the loop over ``chosen``."""
    net = FlowNetwork(simpy.Environment(), *links)
    run_alone(chosen[0]["flows"], net, chosen[0]["present"], chosen[0]["t0"])  # compiled
    start, messages = time.perf_counter(), 0
    for group in chosen:
        messages += run_alone(group["flows"], net, group["present"], group["t0"]).messages
    alone = (time.perf_counter() - start) / messages
    start, messages = time.perf_counter(), 0
    for group in chosen:
        ran = on_the_clock(links, group["flows"], group["t0"], group["present"], pieces=False)
        messages += ran["messages"]
    return (time.perf_counter() - start) / messages, alone


def run(peers: int = PEERS, seconds: float = SECONDS) -> list[tuple[str, float, str, str]]:
    links, found = groups(peers, seconds)
    first = [g for g in found if g["t0"] < FIRST_S]
    late = [g for g in found if g["t0"] > LATE_S]
    size = f"R1 at {peers} peers, {seconds:g} s"
    rows = []
    for label, chosen in (("first round", first), ("late phase", late)):
        if not chosen:
            continue
        clock, alone = per_message(links, chosen)
        where = f"{size}: {len(chosen)} groups"
        rows += [
            (f"alone {label}: clock us per message", clock * 1e6, "us", where),
            (f"alone {label}: loop us per message", alone * 1e6, "us", where),
            (f"alone {label}: clock / loop", clock / alone, "x", where),
        ]
    return rows


if __name__ == "__main__":
    args = [float(a) for a in sys.argv[1:3]]
    for row in run(*([int(args[0]), args[1]] if args else [])):
        print(*row)
