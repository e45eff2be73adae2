"""Cross-check of the network model against SimGrid's flow model (validation.md §3).

SimGrid (Debian's ``python3-simgrid``) lives in the system interpreter, not the
project's virtualenv, so it runs in a subprocess: ``simgrid_runner.py`` next to this
file. ``make crosscheck`` installs it; without it these tests skip.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sim.network import transfer_times

pytestmark = pytest.mark.crosscheck

SYSTEM_PYTHON = "/usr/bin/python3"
RUNNER = Path(__file__).with_name("simgrid_runner.py")
REL = 1e-6


def simgrid_available() -> str | None:
    """None when SimGrid can be used, else why not."""
    try:
        probe = subprocess.run(
            [SYSTEM_PYTHON, "-c", "import simgrid"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{SYSTEM_PYTHON} cannot run: {error}"
    if probe.returncode != 0:
        return f"SimGrid is not installed for {SYSTEM_PYTHON} (`make crosscheck` installs it)"
    return None


@pytest.fixture(scope="module")
def simgrid() -> None:
    reason = simgrid_available()
    if reason is not None:
        pytest.skip(reason)


def simgrid_times(hosts: list, latency_s: float, transfers: list) -> list[float]:
    """Completion times from SimGrid (CM02, no TCP corrections, full updates)."""
    problem = {"hosts": hosts, "latency": latency_s, "transfers": transfers}
    done = subprocess.run(
        [SYSTEM_PYTHON, str(RUNNER)],
        input=json.dumps(problem),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(done.stdout)["finish"]


def random_problem(seed: int, n_hosts: int, n_transfers: int, horizon_s: float) -> tuple:
    """Heterogeneous hosts, integer sizes, overlapping starts (some at equal instants)."""
    rng = np.random.default_rng(seed)
    up = rng.choice([1.25e6, 6.25e6, 12.5e6, 125e6], n_hosts)
    down = up * rng.choice([1, 2, 4], n_hosts)
    src = rng.integers(0, n_hosts, n_transfers)
    dst = (src + rng.integers(1, n_hosts, n_transfers)) % n_hosts
    nbytes = np.rint(rng.lognormal(np.log(5e5), 1.0, n_transfers)).astype(int)
    start_s = np.round(rng.uniform(0, horizon_s, n_transfers), 2)
    hosts = [[float(u), float(d)] for u, d in zip(up, down, strict=True)]
    transfers = [
        [int(s), int(d), int(b), float(t)]
        for s, d, b, t in zip(src, dst, nbytes, start_s, strict=True)
    ]
    return hosts, transfers


def assert_same(ours: list[float], theirs: list[float]) -> None:
    relative = np.abs(np.subtract(ours, theirs)) / np.abs(theirs)
    worst = int(np.argmax(relative))
    assert relative[worst] <= REL, f"transfer {worst}: relative difference {relative[worst]:.3g}"


CLOSED_FORMS = {
    "one flow": ([[1e6, 2e6], [3e6, 5e5]], [[0, 1, 1000000, 0.5]]),
    "k equal flows": ([[2e6, 2e6]] + [[1e6, 1e7]] * 4, [[0, j, 750000, 0.0] for j in range(1, 5)]),
    "full duplex": ([[1e6, 3e6], [2e6, 5e5]], [[0, 1, 1000000, 0.0], [1, 0, 1000000, 0.0]]),
    "left-over capacity": (
        [[1e6, 1e7], [1e7, 1e7], [1e7, 1e7]],
        [[0, 1, 3000000, 0.0], [0, 2, 1000000, 1.0]],
    ),
    "same instant": (
        [[1e6, 1e7]] + [[1e7, 1e7]] * 3,
        [[0, 1, 1000000, 0.0], [0, 2, 1000000, 1.0], [0, 3, 1000000, 2.0], [0, 1, 1000000, 2.0]],
    ),
    "zero bytes": ([[1e6, 2e6], [1e6, 1e6]], [[0, 1, 0, 0.5], [0, 1, 10, 0.0]]),
    "download bottleneck": (
        [[2e6, 1e6], [1e6, 5e5], [1e6, 4e6]],
        [[0, 1, 1000000, 0.0], [0, 2, 3000000, 0.0]],
    ),
}


@pytest.mark.parametrize("case", sorted(CLOSED_FORMS))
def test_closed_form_cases_match_simgrid(simgrid: None, case: str) -> None:
    hosts, transfers = CLOSED_FORMS[case]
    assert_same(transfer_times(hosts, 0.02, transfers), simgrid_times(hosts, 0.02, transfers))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_random_contended_transfers_match_simgrid(simgrid: None, seed: int) -> None:
    hosts, transfers = random_problem(seed, n_hosts=12, n_transfers=200, horizon_s=3.0)
    assert_same(transfer_times(hosts, 0.03, transfers), simgrid_times(hosts, 0.03, transfers))


def test_a_thousand_transfers_over_a_hundred_hosts_match_simgrid(simgrid: None) -> None:
    hosts, transfers = random_problem(42, n_hosts=100, n_transfers=1000, horizon_s=5.0)
    assert_same(transfer_times(hosts, 0.05, transfers), simgrid_times(hosts, 0.05, transfers))
