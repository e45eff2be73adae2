"""Moshpit on the network clock (issue 4): a 32×32 grid of 1024 peers, dim 2^16 float32.

Wall seconds per simulated round (matchmaking, load-balanced butterflies as flows, the
round's arithmetic and the sample after it) and SimPy events per round (every
``Environment.schedule`` call, counted by wrapping it in this process), for a
homogeneous network and for lognormal bandwidths (every group solves its own
load-balancing LP). Set-up (drawing 2^26 initial coordinates, the first sample) is
measured by a run of 0 rounds and subtracted.
"""

from __future__ import annotations

import time
from typing import Any

import simpy

import sim

ROUNDS = 2  # a full 32×32 grid is exact after 2 rounds


def moshpit_round(upload: Any) -> tuple[float, float, float]:
    """(wall s per round, events per round, flows per round)."""
    setup_wall, setup_events, _ = _timed(upload, 0)
    wall, events, result = _timed(upload, ROUNDS)
    rounds = result.summary["rounds"]
    return (
        (wall - setup_wall) / rounds,
        (events - setup_events) / rounds,
        result.summary["messages"] / rounds,
    )


def _timed(upload: Any, rounds: int) -> tuple[float, int, Any]:
    sc = sim.scenario_from_mapping(
        {
            "name": "moshpit-net-bench",
            "clock": "network",
            "peers": {"count": 1024, "upload": upload, "download": upload, "latency": "10 ms"},
            "vector": {"dim": 2**16, "dtype": "float32"},
            "protocol": {"name": "moshpit", "group_size": 32, "grid_dims": 2},
            "stop": {"max_rounds": rounds, "target_var": 0},
        }
    )
    events = [0]
    schedule = simpy.Environment.schedule

    def counting(self: simpy.Environment, event: Any, priority: int = 1, delay: Any = 0) -> None:
        events[0] += 1
        schedule(self, event, priority, delay)

    simpy.Environment.schedule = counting  # type: ignore[method-assign]
    try:
        started = time.perf_counter()
        result = sim.run(sc)
        wall = time.perf_counter() - started
    finally:
        simpy.Environment.schedule = schedule  # type: ignore[method-assign]
    return wall, events[0], result


def run() -> list[tuple[str, float, str, str]]:
    figures = []
    for label, upload in [
        ("equal bandwidths", "100 Mbit/s"),
        ("lognormal bandwidths", {"dist": "lognormal", "median": "100 Mbit/s", "sigma": 1.0}),
    ]:
        wall, events, flows = moshpit_round(upload)
        reference = f"N=1024 32x32 dim 2^16 f32, {label}"
        figures += [
            (f"moshpit net round wall s ({label})", wall, "s/round", reference),
            (f"moshpit net events per round ({label})", events, "1/round", reference),
            (f"moshpit net flows per round ({label})", flows, "1/round", reference),
        ]
    return figures
