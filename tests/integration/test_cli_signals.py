"""SIGTERM and SIGINT sent to a real ``avsim`` process (sim.cli.signals).

``avsim run``: one signal ends the run in progress early and leaves a complete, readable
result folder whose last run says ``stop_reason: interrupted``; two signals leave no
folder at all. ``avsim sweep``: a signal stops the sweep at once with the ``--resume``
hint and a valid journal, and ``--resume`` then gives the uninterrupted sweep's table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

AVSIM = Path(sys.executable).with_name("avsim")
#: A run far longer than any test waits (it must be stopped by the signal).
ENDLESS = """\
name: endless
peers: {count: 128}
vector: {dim: 2048}
protocol: {name: gossip, topology: ring}
stop: {max_rounds: 1000000, target_var: 0}
repeats: 3
"""
SWEEP = """\
name: sw
scenario:
  name: sw
  peers: {count: 64}
  vector: {dim: 2048}
  protocol: {name: gossip, topology: ring}
  stop: {max_rounds: 200, target_var: 0}
repeats: 3
cases:
  - {label: ring}
  - {label: torus, protocol: {name: gossip, topology: torus}}
"""
WAIT_S = 120.0


def catches_sigterm(pid: int) -> bool:
    """True once the process has installed its SIGTERM handler (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


def start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(AVSIM), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_until(condition: object, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the command never got going"
        time.sleep(0.05)


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = process.communicate(timeout=WAIT_S)
    return process.returncode, err


def cpu_s(pid: int) -> float:
    """CPU seconds the process has used (Linux /proc: utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def running(tmp_path: Path) -> subprocess.Popen[str]:
    """``avsim run`` of the endless scenario, once it is inside its first run: it has
    installed its handlers, then used a second of CPU (loading the scenario and building
    the run take a fraction of that; counted in CPU time, not wall time, so that a busy
    machine that leaves the process waiting does not send the signal before the run)."""
    (tmp_path / "endless.yaml").write_text(ENDLESS)
    process = start(["run", "endless.yaml", "-o", "out"], tmp_path)
    wait_until(lambda: catches_sigterm(process.pid), process)
    ready = cpu_s(process.pid) + 1.0
    wait_until(lambda: cpu_s(process.pid) >= ready, process)
    return process


pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux only")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_one_signal_writes_a_complete_folder_of_the_runs_so_far(tmp_path: Path, signum: int):
    process = running(tmp_path)
    process.send_signal(signum)
    code, err = finish(process)
    name = signal.Signals(signum).name
    assert code == 128 + signum, err
    assert err.splitlines() == [
        f"error: interrupted by {name}; wrote out/ with 1 of 3 runs, the last stopped early "
        "(stop_reason interrupted)"
    ]
    out = tmp_path / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert [run["stop_reason"] for run in summary["runs"]] == ["interrupted"]
    assert 0 < summary["runs"][0]["rounds"] < 1_000_000
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert metrics["round"].iloc[-1] == summary["runs"][0]["rounds"]
    assert {"convergence.png", "peers.parquet", "scenario.yaml"} <= {p.name for p in out.iterdir()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["endless.yaml", "out"]


def test_a_second_signal_aborts_and_leaves_no_folder(tmp_path: Path):
    process = running(tmp_path)
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGTERM)
    code, err = finish(process)
    assert code == 128 + signal.SIGTERM, err
    assert err.splitlines() == ["error: interrupted by SIGTERM; no result folder written"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["endless.yaml"]


def test_a_terminated_sweep_resumes_to_the_uninterrupted_table(tmp_path: Path):
    (tmp_path / "sw.yaml").write_text(SWEEP)
    journal = tmp_path / "out" / "runs.partial.jsonl"
    process = start(["sweep", "sw.yaml", "-o", "out", "--workers", "2"], tmp_path)
    wait_until(lambda: journal.is_file() and journal.stat().st_size > 0, process)
    process.send_signal(signal.SIGTERM)
    code, err = finish(process)
    assert code == 128 + signal.SIGTERM, err
    assert err.splitlines() == [
        "error: interrupted by SIGTERM; run it again with --resume to continue"
    ]
    assert not (tmp_path / "out" / "runs.parquet").exists()
    lines = journal.read_text().splitlines()
    assert 1 <= len(lines) < 6
    assert all(json.loads(line)["summary"] for line in lines)

    resumed = subprocess.run(
        [str(AVSIM), "sweep", "sw.yaml", "-o", "out", "--resume", "--workers", "2"],
        cwd=tmp_path, capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    fresh = subprocess.run(
        [str(AVSIM), "sweep", "sw.yaml", "-o", "fresh", "--workers", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr
    runs = pd.read_parquet(tmp_path / "out" / "runs.parquet").drop(columns=["wall_time_s"])
    again = pd.read_parquet(tmp_path / "fresh" / "runs.parquet").drop(columns=["wall_time_s"])
    pd.testing.assert_frame_equal(runs, again)
    assert not journal.exists()
