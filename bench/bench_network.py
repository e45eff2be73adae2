"""Network-model figure N1: flows per second, and the ratio to SimGrid on the same transfers.

The workload: 10^5 flows over 1024 hosts, a quarter of them datacenter peers at
1 Gbit/s both ways and the rest home peers at 50 Mbit/s down and 10 Mbit/s up
(network.md's example). Each flow goes from a random host to another, its size is
lognormal (median 256 KiB, σ = 1, whole bytes) and its start uniform over a horizon
chosen so that home uplinks are on average 70 % busy: most flows share their uploader
or downloader with others, and about 1400 are in flight on average. Route latency
20 ms everywhere (SimGrid's CM02 weights flows by 1 / latency).

avsim's time is the whole :func:`sim.network.transfer_times` call; SimGrid's is what its
runner reports (building the platform and running, without the interpreter start), with
the configuration of the cross-check (validation.md), which gives the same times. Both
are CPU times of the simulating process (SimGrid's over all its threads).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np

from sim.network import transfer_times

N_HOSTS, N_FLOWS = 1024, 100_000
LATENCY_S = 0.02
UTILISATION = 0.7
RUNNER = Path(__file__).resolve().parents[1] / "tests" / "integration" / "simgrid_runner.py"
SYSTEM_PYTHON = "/usr/bin/python3"


def workload(seed: int = 2024) -> tuple[list[list[float]], list[list[float]]]:
    """Hosts ``[up, down]`` (bytes/s) and transfers ``[src, dst, nbytes, start_s]``."""
    rng = np.random.default_rng(seed)
    home = rng.permutation(N_HOSTS) < (3 * N_HOSTS) // 4
    up = np.where(home, 1.25e6, 125e6)
    down = np.where(home, 6.25e6, 125e6)
    median_bytes, sigma = 256 * 1024, 1.0
    nbytes = np.maximum(1, np.rint(rng.lognormal(np.log(median_bytes), sigma, N_FLOWS)))
    mean_bytes = median_bytes * np.exp(sigma**2 / 2)
    horizon_s = N_FLOWS * mean_bytes / (N_HOSTS * UTILISATION * 1.25e6)
    src = rng.integers(0, N_HOSTS, N_FLOWS)
    dst = (src + rng.integers(1, N_HOSTS, N_FLOWS)) % N_HOSTS
    start_s = rng.uniform(0.0, horizon_s, N_FLOWS)
    hosts = np.column_stack([up, down]).tolist()
    transfers = [
        [int(s), int(d), float(b), float(t)]
        for s, d, b, t in zip(src, dst, nbytes, start_s, strict=True)
    ]
    return hosts, transfers


def simgrid_installed() -> bool:
    """Whether the system interpreter can import SimGrid."""
    try:
        probe = subprocess.run([SYSTEM_PYTHON, "-c", "import simgrid"], capture_output=True)
    except OSError:
        return False
    return probe.returncode == 0


def simgrid(hosts: list, transfers: list) -> tuple[list[float], float, float]:
    """SimGrid's completion times, wall seconds and CPU seconds for the same transfers."""
    problem = json.dumps({"hosts": hosts, "latency": LATENCY_S, "transfers": transfers})
    done = subprocess.run(
        [SYSTEM_PYTHON, str(RUNNER)], input=problem, capture_output=True, text=True, check=True
    )
    answer = json.loads(done.stdout)
    return answer["finish"], answer["seconds"], answer["cpu_seconds"]


def run() -> list[tuple[str, float, str, str]]:
    """N1 figures: avsim flows/s, and SimGrid's and the ratio when SimGrid is installed.

    Rates are per CPU second of the simulating process (SimGrid's includes all its
    threads), which a shared machine disturbs less than wall time; the wall-time ratio
    is reported too.
    """
    hosts, transfers = workload()
    started, started_cpu = time.perf_counter(), time.process_time()
    finish = transfer_times(hosts, LATENCY_S, transfers)
    ours_cpu_s = time.process_time() - started_cpu
    ours_s = time.perf_counter() - started
    busy_s = sum(f - t[3] for f, t in zip(finish, transfers, strict=True))
    in_flight = busy_s / (max(finish) - min(t[3] for t in transfers))
    figures = [
        (
            "N1 avsim flows/s",
            N_FLOWS / ours_cpu_s,
            "flows/CPU s",
            f"{N_FLOWS} flows, {N_HOSTS} hosts",
        ),
        ("N1 mean flows in flight", in_flight, "flows", "contention of the workload"),
    ]
    if not simgrid_installed():
        figures.append(("N1 SimGrid", float("nan"), "", "not installed: make crosscheck"))
        return figures
    their_finish, their_s, their_cpu_s = simgrid(hosts, transfers)
    difference = np.abs(np.subtract(finish, their_finish)) / np.abs(their_finish)
    figures += [
        ("N1 SimGrid flows/s", N_FLOWS / their_cpu_s, "flows/CPU s", "CM02, network/optim:Full"),
        ("N1 avsim / SimGrid", their_cpu_s / ours_cpu_s, "ratio", "CPU time; target >= 10"),
        ("N1 avsim / SimGrid (wall)", their_s / ours_s, "ratio", "wall time, noisier"),
        ("N1 max relative difference", float(difference.max()), "", "same times: <= 1e-6"),
    ]
    return figures


if __name__ == "__main__":
    for name, value, unit, reference in run():
        print(f"{name:<40} {value:>14.4g}  {unit:<10} ({reference})")
