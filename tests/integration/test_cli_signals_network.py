"""SIGTERM stops a network-clock ``avsim run`` that goes long without a sample: a
continuous protocol under heavy churn, sampled once an hour of simulated time, ends
soon after one signal with a complete result folder and one ``error:`` line (exit 143),
not at its next sample; and never with a traceback. The run's slow-run
warning, written as it starts, tells the test when to send the signal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

AVSIM = Path(sys.executable).with_name("avsim")
WAIT_S = 120.0
#: Its first sample after t = 0 is an hour of simulated time away (seconds of wall time
#: under the churn's ~250 events and the exchanges' ~256 flows per simulated second).
RARELY_SAMPLED = """\
name: rare
clock: network
peers: {count: 256}
vector: {dim: 64}
churn: {model: exponential, mtbf: 5 s, mttr: 1 s, rejoin: fetch}
protocol: {name: pairwise_gossip, topology: ring, rate: 1.0}
stop: {max_time: 1000000 s, max_rounds: null, target_var: 0}
metrics: {every: 1 hour}
"""

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux only")


def catches_sigterm(pid: int) -> bool:
    """True once the process has installed its SIGTERM handler (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


def test_one_sigterm_ends_a_rarely_sampled_network_run(tmp_path: Path):
    (tmp_path / "rare.yaml").write_text(RARELY_SAMPLED)
    process = subprocess.Popen(
        [str(AVSIM), "run", "rare.yaml", "-o", "out"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        first = process.stderr.readline()  # the engine's slow-run warning: the run starts
        assert first.startswith("warning: this run may take"), first
        assert catches_sigterm(process.pid)
        time.sleep(1.5)  # well inside the run: past t = 0, hours before the next sample
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:  # it did not stop: the test fails, nothing is left
            process.kill()
            process.communicate()
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert errors == [
        "error: interrupted by SIGTERM; wrote out/ with 1 of 1 runs, the last stopped early "
        "(stop_reason interrupted)"
    ]
    assert process.returncode == 128 + signal.SIGTERM
    run = json.loads((tmp_path / "out" / "summary.json").read_text())["runs"][0]
    assert run["stop_reason"] == "interrupted"
    assert 0 < run["sim_time_s"] < 3600
    metrics = pd.read_parquet(tmp_path / "out" / "metrics.parquet")
    assert list(metrics["time_s"]) == [0.0, run["sim_time_s"]]
