"""Moshpit on the network clock (issue 4, figures M1 and M2 of performance.md).

The workload: a 32×32 grid of 1024 peers, dim 2^16 float32, 10 ms latency, 100 Mbit/s
for every peer (*equal*) or lognormal bandwidths (median 100 Mbit/s, σ = 1: every group
solves its own load-balancing LP). A round is matchmaking, the load-balanced butterflies
as flows, the round's arithmetic and the sample after it, its row recorded after every
round on both clocks (``metrics.every`` 1 µs on the network clock: a round of equal
bandwidths lasts less than the default second, and a sample no row needs computes no
statistics, which would compare rounds that do different work).

Seconds per round are the intervals between the engine's progress calls (one after
each round's sample), median over rounds 2 … ``1 + ROUNDS``: no set-up (drawing 2^26
coordinates) and no first-round warm-up (numba's compilation) to subtract. They are CPU
seconds of this process, which a shared machine disturbs less than wall time (wall
seconds, performance.md's measure, are reported too). The same scenario on the rounds clock
gives M2's reference, on the same state. All three runs are in this process, one after
the other:

- M1 = wall per round with lognormal ÷ with equal bandwidths (target ≤ 1.3);
- M2 = wall per network-clock round ÷ rounds-clock round, equal bandwidths (target ≤ 5).

SimPy events per round (every ``Environment.schedule`` call) are counted in separate
one-round runs, so that the counting does not slow the timed ones.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import simpy

import sim

ROUNDS = 5  # timed rounds after the first (a full 32×32 grid is exact after 2)
EQUAL = "100 Mbit/s"
LOGNORMAL = {"dist": "lognormal", "median": "100 Mbit/s", "sigma": 1.0}


def scenario(clock: str, upload: Any, rounds: int) -> Any:
    """The benchmark's scenario on ``clock`` with ``upload`` (= download) bandwidths."""
    return sim.scenario_from_mapping(
        {
            "name": "moshpit-net-bench",
            "clock": clock,
            "peers": {"count": 1024, "upload": upload, "download": upload, "latency": "10 ms"},
            "vector": {"dim": 2**16, "dtype": "float32"},
            "protocol": {"name": "moshpit", "group_size": 32, "grid_dims": 2},
            "stop": {"max_rounds": rounds, "target_var": 0},
            # a row after every round on both clocks (the rounds clock's default): each
            # round then ends with its full sample, whatever simulated time it took (a
            # sample no row needs only checks that var is finite)
            "metrics": {"every": 1 if clock == "rounds" else 1e-6},
        }
    )


def round_s(clock: str, upload: Any) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of a round: the medians over rounds 2 … 1 + ROUNDS
    (a median, so that a burst of another process's work in one round does not count)."""
    marks: list[tuple[float, float]] = []

    def mark(_: float) -> None:
        marks.append((time.process_time(), time.perf_counter()))

    result = sim.run(scenario(clock, upload, 1 + ROUNDS), progress=mark)
    assert result.summary["rounds"] == 1 + ROUNDS
    assert len(marks) == 1 + ROUNDS
    cpu, wall = np.diff(np.array(marks), axis=0).T
    return float(np.median(cpu)), float(np.median(wall))


def events_per_round(upload: Any) -> tuple[float, float]:
    """(SimPy events, flows) of one network-clock round, set-up events subtracted."""
    counts = []
    schedule = simpy.Environment.schedule
    events = [0]

    def counting(self: simpy.Environment, event: Any, priority: int = 1, delay: Any = 0) -> None:
        events[0] += 1
        schedule(self, event, priority, delay)

    for rounds in (0, 1):
        events[0] = 0
        simpy.Environment.schedule = counting  # type: ignore[method-assign]
        try:
            result = sim.run(scenario("network", upload, rounds))
        finally:
            simpy.Environment.schedule = schedule  # type: ignore[method-assign]
        counts.append((events[0], result.summary["messages"]))
    return counts[1][0] - counts[0][0], counts[1][1] - counts[0][1]


def run() -> list[tuple[str, float, str, str]]:
    reference = "N=1024 32x32 dim 2^16 f32"
    rounds_s, rounds_wall = round_s("rounds", EQUAL)
    equal_s, equal_wall = round_s("network", EQUAL)
    lognormal_s, lognormal_wall = round_s("network", LOGNORMAL)
    figures = [
        ("moshpit rounds-clock round CPU s", rounds_s, "s/round", f"{reference}, equal"),
        ("moshpit net round CPU s (equal bandwidths)", equal_s, "s/round", reference),
        ("moshpit net round CPU s (lognormal bandwidths)", lognormal_s, "s/round", reference),
        ("M1 lognormal / equal (CPU time)", lognormal_s / equal_s, "ratio", "target <= 1.3"),
        ("M2 network / rounds clock (CPU time)", equal_s / rounds_s, "ratio", "target <= 5"),
        ("M1 lognormal / equal (wall time)", lognormal_wall / equal_wall, "ratio", "noisier"),
        ("M2 network / rounds clock (wall time)", equal_wall / rounds_wall, "ratio", "noisier"),
    ]
    for label, upload in (("equal bandwidths", EQUAL), ("lognormal bandwidths", LOGNORMAL)):
        events, flows = events_per_round(upload)
        figures += [
            (f"moshpit net events per round ({label})", events, "1/round", reference),
            (f"moshpit net flows per round ({label})", flows, "1/round", reference),
        ]
    return figures
