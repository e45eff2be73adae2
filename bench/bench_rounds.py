"""Rounds-clock figures: K1 (kernel throughput) and S1 (a million peers).

K1: a Moshpit round (32×32 grid, N = 1024, dim = 2^16, float32) moves at least the state
once in and once out; its "bytes moved per second" over numpy's copy bandwidth measured
in the same run is ``copy_time / round_time`` for the same array (target ≥ 0.5). Each
repeat times a copy and a round back to back; the figure is the median of their ratios.
With numba installed (extra ``fast``) K1 is the compiled kernel's, and a second figure
gives the numpy path's (:mod:`sim.kernels.fused`).
S1: random_groups and moshpit with N = 10^6, dim = 8, 10 rounds: wall seconds (target
≤ 60) and peak memory (target ≤ 4 GiB), each in a fresh subprocess.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from unittest import mock

import numpy as np

from protocols import get
from protocols.contract import Context, State
from sim.kernels import fused

S1_SCRIPT = """
import json, resource, sys, time
import sim
name = sys.argv[1]
params = {"name": name, "group_size": 32} if name == "random_groups" else \
    {"name": name, "group_size": 100, "grid_dims": 3}
sc = sim.scenario_from_mapping({"name": "s1", "peers": {"count": 10**6},
    "vector": {"dim": 8}, "protocol": params,
    "stop": {"max_rounds": 10, "target_var": 0}})
t = time.perf_counter(); sim.run(sc); wall = time.perf_counter() - t
try:  # this process's own peak: ru_maxrss also counts the parent's resident set at fork
    with open("/proc/self/status") as status:
        peak = next(int(r.split()[1]) for r in status if r.startswith("VmHWM:")) * 1024
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"wall": wall, "peak": peak}))
"""


def _paired_ratio(reference: Callable[[], object], fn: Callable[[], object], repeats: int) -> float:
    """Median over ``repeats`` of (time of ``reference``) / (time of ``fn``), run back to
    back so that both see the same load on a shared machine."""
    ratios = []
    for _ in range(repeats):
        started = time.perf_counter()
        reference()
        middle = time.perf_counter()
        fn()
        ratios.append((middle - started) / (time.perf_counter() - middle))
    return statistics.median(ratios)


def k1(repeats: int = 9) -> float:
    """copy time / Moshpit round time on the same (1024, 2^16) float32 state."""
    n, dim = 1024, 2**16
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    out = np.empty_like(x)
    cls = get("moshpit")
    protocol = cls(cls.Params(group_size=32, grid_dims=2), Context(n, dim, 4, rng))
    state = State(x=x)
    protocol.init_state(state)
    present = np.ones(n, dtype=bool)
    counter = iter(range(10**6))

    def round_() -> None:
        protocol.round(state, present, next(counter))

    round_()  # compiles (or loads) the fused kernel, outside the figure
    return _paired_ratio(lambda: np.copyto(out, x), round_, repeats)


def k1_numpy(repeats: int = 9) -> float:
    """K1 with the compiled kernel switched off (the numpy row loop)."""
    with mock.patch.object(fused, "jit_module", return_value=None):
        return k1(repeats)


def s1(protocol: str) -> tuple[float, float]:
    """(wall seconds, peak bytes) of 10 rounds with 10^6 peers, in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-c", S1_SCRIPT, protocol], capture_output=True, text=True, check=True
    )
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return data["wall"], data["peak"]


def run() -> list[tuple[str, float, str, str]]:
    figures = [("K1 moshpit round / numpy copy", k1(), "ratio", "target >= 0.5")]
    if fused.jit_module() is not None:
        figures.append(("K1 without numba (numpy path)", k1_numpy(), "ratio", "target >= 0.5"))
    for protocol in ("random_groups", "moshpit"):
        wall, peak = s1(protocol)
        figures.append((f"S1 {protocol} 1e6 peers 10 rounds", wall, "s", "target <= 60 s"))
        figures.append((f"S1 {protocol} peak memory", peak / 2**30, "GiB", "target <= 4 GiB"))
    return figures
