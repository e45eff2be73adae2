"""A run that hits a NaN says so once: the numerical-health stop message is the only
line on stderr (no numpy RuntimeWarning per overflowing operation), on every clock and
schedule; a floating-point error that leaves the state finite is still said, once."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import sim

AVSIM = Path(sys.executable).with_name("avsim")
HUGE = 1.7e308  # finite; the sum (or difference) of two of them overflows

GROUP_MEAN = "protocol: {name: all_reduce}\nstop: {max_rounds: 5}\n"
GOSSIP = "protocol: {name: pairwise_gossip, topology: complete}\n"


def write(tmp_path: Path, body: str, alternating: bool) -> Path:
    x = np.zeros((8, 2))
    if alternating:  # ±HUGE: the difference of two opposite peers overflows
        x[:] = HUGE * (1 - 2 * (np.arange(8) % 2))[:, None]
    else:  # peers 3 and 5 hold HUGE: the sum overflows
        x[3], x[5] = HUGE, HUGE
    np.save(tmp_path / "x.npy", x)
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: nan\npeers: {count: 8}\nvector: {dim: 2, init: file, file: x.npy}\n" + body
    )
    return path


@pytest.mark.parametrize(
    ("body", "alternating"),
    [
        (GROUP_MEAN, False),
        (GOSSIP + "stop: {max_rounds: 20}\n", True),
        ("clock: network\n" + GOSSIP + "stop: {max_time: 20}\n", True),
    ],
    ids=["barrier-rounds", "events-rounds-clock", "events-network-clock"],
)
def test_the_stop_message_is_the_only_line_on_stderr(tmp_path, body, alternating):
    path = write(tmp_path, body, alternating)
    done = subprocess.run(
        [str(AVSIM), "run", str(path), "--repeats", "2", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 2, lines
    for seed, line in enumerate(lines):
        assert line.startswith(f"warning: seed {seed}: a NaN or inf appeared in the state")


def test_the_api_gives_no_runtime_warning_for_a_nan_stop(tmp_path):
    path = write(tmp_path, GROUP_MEAN, alternating=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = sim.run(path)
    assert result.summary["stop_reason"] == "nan"


def test_an_overflow_that_leaves_the_state_finite_still_warns_once(tmp_path):
    x = np.zeros((8, 2))
    x[::2] = 1e200  # finite; its square (the variance) overflows
    np.save(tmp_path / "x.npy", x)
    scenario = sim.scenario_from_mapping(
        {
            "name": "huge",
            "peers": {"count": 8},
            "vector": {"dim": 2, "init": "file", "file": str(tmp_path / "x.npy")},
            "protocol": {"name": "all_reduce"},
            "stop": {"max_rounds": 3},
        }
    )
    with pytest.warns(RuntimeWarning, match="overflow encountered") as caught:
        result = sim.run(scenario)
    assert result.summary["nan"] is None
    messages = [str(w.message) for w in caught]
    assert len(messages) == len(set(messages))
