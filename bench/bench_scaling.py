"""Scaling (performance.md, issue 13): wall time against N on the network clock.

Three series, each run size by size in a fresh subprocess (its own peak memory, a time
limit per size), with the exponent of a log-log least-squares fit:

- ``gossip``: pairwise_gossip on a ring, dim 64 float64, 100 Mbit/s peers, 10 ms latency,
  no target, a fixed simulated time: wall seconds per simulated second (the work, N/2
  exchanges per simulated second, grows as N) and wall per exchange. The wall time is
  measured between samples (``metrics.every``: a tenth of the time), from the second
  sample to the last: set-up, first-use compilation and warm-up are left out.
- ``barrier``: moshpit, barrier rounds, groups of 16 (``group_size: 16, grid_dims: 2``:
  16 keys, each key's peers matched into groups of 16, so every peer's round is the same
  work at every N), dim 2^16 float32, lognormal bandwidths (median 100 Mbit/s, sigma 1),
  10 ms: wall seconds per round (the median over rounds 2 … 1 + ``ROUNDS``, as M1) and
  wall per message.
- ``async``: the same swarm under ``schedule: async`` (``compute: 0``) for a fixed
  simulated time: wall seconds per simulated second (between samples, as ``gossip``) and
  wall per message.

Each fit gives three exponents: wall against N, the process's CPU time against N (less
disturbed by other processes on a shared machine), and wall against the work (exchanges
or messages run), since an async swarm's messages per peer and simulated second change
with N. The goal is linear in the work (exponent ≤ 1.1). The async series adds a fourth:
wall against all the messages the simulation runs, flows and matchmaking's control
messages (requests, replies, BEGIN, DISBANDED: one SimPy event each, no bytes). Its
matchmaking makes more requests per group as more peers share a key (each asks the
declared leaders one at a time, earliest first: at 4096 peers most of them follow
someone already and refuse), which is the swarm's own work, not the simulator's.

``make bench`` runs the small sizes (:data:`SMALL`, about a minute on 2 cores: moshpit's
small sizes, and pairwise_gossip already at the issue's);
``python -m bench.bench_scaling full`` runs the issue's table (:data:`FULL`:
pairwise_gossip at 10^3, 10^4, 10^5 peers, moshpit at 256 … 4096) and prints it as a
Markdown table. A size that the memory guard refuses, that fails or that runs past
:data:`LIMIT_S` is reported as such (NaN value, the reason in the reference), not
skipped.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

#: Seconds allowed to one size's subprocess.
LIMIT_S = 900.0
#: Timed barrier rounds after the first.
ROUNDS = 3
LOGNORMAL = {"dist": "lognormal", "median": "100 Mbit/s", "sigma": 1.0}

SCRIPT = r"""
import json, sys, time
import sim
from sim.engine.resources import estimate_memory
kind, peers, amount = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
link = json.loads(sys.argv[4])
if kind == "gossip":
    mapping = {"name": "scaling-gossip", "clock": "network",
        "peers": {"count": peers, "upload": "100 Mbit/s", "download": "100 Mbit/s",
                  "latency": "10 ms"},
        "vector": {"dim": 64, "dtype": "float64"},
        "protocol": {"name": "pairwise_gossip", "topology": "ring"},
        "stop": {"max_time": amount, "max_rounds": None, "target_var": 0},
        "metrics": {"every": amount / 10}}
else:
    mapping = {"name": f"scaling-{kind}", "clock": "network",
        "schedule": "async" if kind == "async" else "barrier",
        "peers": {"count": peers, "upload": link, "download": link, "latency": "10 ms",
                  "compute": 0},
        "vector": {"dim": 2**16, "dtype": "float32"},
        "protocol": {"name": "moshpit", "group_size": 16, "grid_dims": 2},
        "stop": ({"max_time": amount, "target_var": 0} if kind == "async"
                 else {"max_rounds": int(amount), "target_var": 0})}
    if kind == "async":
        mapping["metrics"] = {"every": amount / 10}
scenario = sim.scenario_from_mapping(mapping)
marks = []
result = sim.run(scenario, seed=0,
                 progress=lambda _: marks.append((time.perf_counter(), time.process_time())))
s = result.summary
with open("/proc/self/status") as status:
    peak = next(int(r.split()[1]) for r in status if r.startswith("VmHWM:")) * 1024
print(json.dumps({"wall": s["wall_time_s"], "sim_s": s["sim_time_s"],
    "messages": int(s["messages"]), "rounds": s.get("rounds"), "marks": marks,
    "control": int(s.get("matchmaking_messages", 0)),
    "peak": peak, "estimate": estimate_memory(scenario)}))
"""


@dataclass(frozen=True)
class Series:
    """One series: its sizes and its fixed amount (simulated seconds, or rounds)."""

    kind: str  # gossip | barrier | async
    sizes: tuple[int, ...]
    amount: float

    @property
    def unit(self) -> str:
        """What the wall time is per."""
        return "s/round" if self.kind == "barrier" else "s/sim s"


#: pairwise_gossip at the issue's sizes already (~12 s on 2 cores since stop 36);
#: moshpit at small sizes.
GOSSIP = Series("gossip", (1000, 10_000, 100_000), 100.0)
SMALL = (
    GOSSIP,
    Series("barrier", (256, 512, 1024), 1 + ROUNDS),
    Series("async", (256, 512), 5.0),
)
FULL = (
    GOSSIP,
    Series("barrier", (256, 512, 1024, 2048, 4096), 1 + ROUNDS),
    Series("async", (256, 512, 1024, 2048, 4096), 10.0),
)


@dataclass(frozen=True)
class Point:
    """One size's measurement; ``error`` set (and NaN values) when it did not run."""

    peers: int
    wall: float  # per simulated second, or per round
    per_work: float  # wall per exchange (gossip) or per message (moshpit)
    cpu: float  # CPU seconds of the process, as ``wall``
    work: float  # exchanges or messages per simulated second / per round
    peak_gib: float
    estimate_gib: float
    error: str = ""
    #: Matchmaking's control messages per unit (async: requests, replies, BEGIN,
    #: DISBANDED; each one SimPy event, no bytes), 0 where there are none.
    control: float = 0.0

    @property
    def messages(self) -> float:
        """All the messages simulated per unit: the work and the control messages."""
        return self.work + self.control


def measure(series: Series, peers: int, limit_s: float = LIMIT_S) -> Point:
    """Run one size of ``series`` in a fresh interpreter (at most ``limit_s`` seconds)."""
    args = [sys.executable, "-c", SCRIPT, series.kind, str(peers), repr(series.amount)]
    nan = math.nan
    try:
        done = subprocess.run(
            [*args, json.dumps(LOGNORMAL)], capture_output=True, text=True, timeout=limit_s
        )
    except subprocess.TimeoutExpired:
        return Point(peers, nan, nan, nan, nan, nan, nan, f"ran past {limit_s:g} s")
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        return Point(peers, nan, nan, nan, nan, nan, nan, f"failed: {lines[-1][:120]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    peak, estimate = data["peak"] / 2**30, data["estimate"] / 2**30
    marks = np.array(data["marks"])  # (wall, CPU) at each progress call
    if series.kind == "barrier":
        # one progress call after each round's sample; rounds 2 … 1 + ROUNDS
        wall, cpu = np.median(np.diff(marks, axis=0)[-ROUNDS:], axis=0).tolist()
        work = data["messages"] / data["rounds"]
    else:
        # one progress call per sample, every tenth of the time; from the second on
        # (set-up, first-use compilation and warm-up before it)
        span = data["sim_s"] * (len(marks) - 2) / len(marks)
        wall, cpu = ((marks[-1] - marks[1]) / span).tolist()
        work = data["messages"] / data["sim_s"]
    control = data.get("control", 0) / data["sim_s"] if series.kind == "async" else 0.0
    if series.kind == "gossip":
        work /= 2  # an exchange is two messages
    return Point(peers, wall, wall / work, cpu, work, peak, estimate, control=control)


def exponent(x: list[float], y: list[float]) -> float:
    """Slope of the least-squares line through (log x, log y); NaN with < 2 points."""
    ok = [(a, b) for a, b in zip(x, y, strict=True) if math.isfinite(a) and math.isfinite(b)]
    if len(ok) < 2:
        return math.nan
    lx, ly = np.log([a for a, _ in ok]), np.log([b for _, b in ok])
    return float(np.polyfit(lx, ly, 1)[0])


def measure_all(plan: tuple[Series, ...]) -> list[tuple[Series, list[Point]]]:
    """Every size of every series, in order."""
    return [(s, [measure(s, n) for n in s.sizes]) for s in plan]


def figures(measured: list[tuple[Series, list[Point]]]) -> list[tuple[str, float, str, str]]:
    """The bench lines: one per size, and the two exponents of each series."""
    out = []
    for series, points in measured:
        amount = f"{series.amount:g} sim s" if series.kind != "barrier" else "median round"
        for p in points:
            ref = p.error or f"{p.work:.4g} work/unit, peak {p.peak_gib:.2f} GiB, {amount}"
            out.append((f"scaling {series.kind} N={p.peers}", p.wall, series.unit, ref))
        n = [float(p.peers) for p in points]
        wall = [p.wall for p in points]
        work = [p.work for p in points]
        out.append(
            (f"scaling {series.kind} exponent (wall vs N)", exponent(n, wall), "", "goal <= 1.1")
        )
        out.append(
            (
                f"scaling {series.kind} exponent (CPU vs N)",
                exponent(n, [p.cpu for p in points]),
                "",
                "CPU time of the run: less disturbed by a shared machine",
            )
        )
        out.append(
            (
                f"scaling {series.kind} exponent (wall vs work)",
                exponent(work, wall),
                "",
                "work: exchanges or messages; goal <= 1.1",
            )
        )
        if any(p.control > 0 for p in points):
            out.append(
                (
                    f"scaling {series.kind} exponent (wall vs all messages)",
                    exponent([p.messages for p in points], wall),
                    "",
                    "flows and matchmaking's control messages",
                )
            )
    return out


def table(measured: list[tuple[Series, list[Point]]]) -> str:
    """The measurements as a Markdown table, one row per size, then the exponents."""
    rows = [
        "| series | N | wall | CPU | wall per exchange / message | work | control messages "
        "| peak memory (estimate) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for series, points in measured:
        for p in points:
            if p.error:
                rows.append(f"| {series.kind} | {p.peers} | {p.error} | | | | | |")
                continue
            rows.append(
                f"| {series.kind} | {p.peers} | {p.wall:.4g} {series.unit} | {p.cpu:.4g} | "
                f"{p.per_work * 1e6:.3g} µs | {p.work:.4g} | {p.control:.4g} | "
                f"{p.peak_gib:.2f} GiB ({p.estimate_gib:.2f}) |"
            )
    rows += [
        "",
        "| series | exponent: wall vs N | CPU vs N | wall vs work | wall vs all messages |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for series, points in measured:
        n = [float(p.peers) for p in points]
        wall, work = [p.wall for p in points], [p.work for p in points]
        cpu = exponent(n, [p.cpu for p in points])
        every = exponent([p.messages for p in points], wall)
        rows.append(
            f"| {series.kind} | {exponent(n, wall):.3f} | {cpu:.3f} | {exponent(work, wall):.3f} "
            f"| {every:.3f} |"
        )
    return "\n".join(rows)


def run() -> list[tuple[str, float, str, str]]:
    """The small sizes (``python -m bench scaling``)."""
    return figures(measure_all(SMALL))


if __name__ == "__main__":
    plan = FULL if sys.argv[1:2] == ["full"] else SMALL
    measured = []
    for series in plan:  # print as it goes: the full table takes a while
        points = []
        for peers in series.sizes:
            points.append(measure(series, peers))
            p = points[-1]
            print(f"{series.kind:<8} N={peers:<7} {p.wall:.4g} {series.unit} (CPU {p.cpu:.4g})  "
                  f"{p.per_work * 1e6:.3g} µs/work  peak {p.peak_gib:.2f} GiB  {p.error}",
                  flush=True)  # fmt: skip
        measured.append((series, points))
    print(table(measured))
