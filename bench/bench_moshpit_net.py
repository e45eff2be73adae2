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
seconds, performance.md's measure, are reported too). Each network-clock figure pools the
rounds of ``PAIRS`` runs of each bandwidth, alternated (stop 43: one run of each read
M1 from 0.99 to 1.23 in three runs of the same code, as the machine's load moved
between the two runs). The same scenario on the rounds clock gives M2's reference, on the same
state. All runs are in this process, one after the other:

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
PAIRS = 3  # runs of each bandwidth for M1, alternated
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


def round_times(clock: str, upload: Any) -> np.ndarray:
    """(CPU seconds, wall seconds) of each of rounds 2 … 1 + ROUNDS of one run, (ROUNDS, 2)."""
    marks: list[tuple[float, float]] = []

    def mark(_: float) -> None:
        marks.append((time.process_time(), time.perf_counter()))

    result = sim.run(scenario(clock, upload, 1 + ROUNDS), progress=mark)
    assert result.summary["rounds"] == 1 + ROUNDS
    assert len(marks) == 1 + ROUNDS
    return np.diff(np.array(marks), axis=0)


def round_s(clock: str, upload: Any) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of a round: the medians over rounds 2 … 1 + ROUNDS
    (a median, so that a burst of another process's work in one round does not count)."""
    cpu, wall = np.median(round_times(clock, upload), axis=0)
    return float(cpu), float(wall)


def m1_rounds() -> tuple[tuple[float, float], tuple[float, float]]:
    """(CPU, wall) seconds of an equal and of a lognormal network round: medians over the
    rounds of ``PAIRS`` runs of each, alternated (equal first, then lognormal first, …),
    so that a change in the machine's load between two runs weighs on both sides."""
    times: dict[str, list[np.ndarray]] = {"equal": [], "lognormal": []}
    for pair in range(PAIRS):
        order = [("equal", EQUAL), ("lognormal", LOGNORMAL)]
        for key, upload in order if pair % 2 == 0 else order[::-1]:
            times[key].append(round_times("network", upload))
    equal, lognormal = (np.median(np.concatenate(times[key]), axis=0) for key in times)
    return (float(equal[0]), float(equal[1])), (float(lognormal[0]), float(lognormal[1]))


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
    (equal_s, equal_wall), (lognormal_s, lognormal_wall) = m1_rounds()
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
