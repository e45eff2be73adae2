"""``avsim info``: per-class peer tables in human units, the expected churn, the Moshpit
grid and the protocol's derived constants, without running anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sim.cli import app

SCENARIO = """\
name: swarm
clock: network
peers:
  count: 96
  classes:
    - {name: reserved, fraction: 0.25, upload: 1 Gbit/s, download: 1 Gbit/s, latency: 5 ms}
    - name: spot
      fraction: 0.75
      upload: 100 Mbit/s
      download: {dist: uniform, low: 20 Mbit/s, high: 80 Mbit/s}
      latency: 20 ms
churn: {model: waves, rate: 0.2, fraction: 0.1, duration: 20 s, class: spot}
vector: {dim: 16}
protocol: {name: moshpit, group_size: 4, grid_dims: 3}
stop: {max_time: 60 s, max_rounds: null}
"""


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "swarm.yaml"
    path.write_text(SCENARIO)
    return path


def info(*args: str | Path) -> str:
    result = CliRunner().invoke(app, ["info", *(str(a) for a in args)])
    assert result.exit_code == 0, result.stderr
    return result.stdout


def row(text: str, key: str) -> list[str]:
    """The cells of the first line that starts with ``key`` (after indentation)."""
    line = next(line for line in text.splitlines() if line.strip().startswith(key))
    return line.split(None if " " not in key else "  ")


def test_each_class_gets_a_table_in_human_units(scenario):
    text = info(scenario)
    assert "class 0 (reserved): 24 peers" in text
    assert "class 1 (spot): 72 peers" in text
    reserved, spot = text.split("class 1 (spot)")
    assert row(reserved.split("class 0")[1], "upload")[1:] == ["1", "Gbit/s"] * 3
    assert row(reserved.split("class 0")[1], "latency")[1:] == ["5", "ms"] * 3
    download = row(spot, "download")[1:]
    low, high = float(download[2]), float(download[4])
    assert 20 <= low < high <= 80
    assert download[1::2] == ["Mbit/s"] * 3


def test_the_expected_churn_is_the_mean_fraction_absent(scenario):
    text = info(scenario)
    # waves on the 72 spot peers, 7 per wave: 1 − exp(−0.2 · 20 · 7/72), times 72/96
    assert "waves: rate=0.2/s, fraction=0.1, duration=20 s, class=spot" in text
    assert "expected absent         0.242 of the peers (24.2%" in text


def test_exponential_churn_on_the_rounds_clock_counts_rounds(tmp_path):
    path = tmp_path / "rounds.yaml"
    path.write_text("name: r\npeers: {count: 8}\nchurn: {model: exponential, mtbf: 9, mttr: 1}\n"
                    "protocol: {name: gossip}\n")  # fmt: skip
    text = info(path)
    assert "exponential: mtbf=9 rounds, mttr=1 rounds" in text
    assert "0.1 of the peers (10.0%" in text


def test_the_moshpit_grid_is_described(scenario):
    text = info(scenario)
    assert "4^3 = 64 cells (re-keyed)" in text
    assert row(text, "groups_per_round")[1] == "16"
    assert row(text, "peers_per_key")[1] == "6"
    assert row(text, "full_grid")[1] == "False"
    fixed = info(scenario, "--set", "protocol.rekey=false", "--set", "peers.count=64")
    assert "(fixed)" in fixed
    assert row(fixed, "peers_per_line")[1] == "4"
    assert row(fixed, "full_grid")[1] == "True"


def test_without_classes_one_table_covers_every_peer(tmp_path):
    path = tmp_path / "plain.yaml"
    path.write_text("name: plain\npeers: {count: 8, upload: 25 Mbit/s}\n"
                    "protocol: {name: gossip}\n")  # fmt: skip
    text = info(path)
    assert "peers: 8" in text
    assert row(text, "upload")[1:3] == ["25", "Mbit/s"]
    assert "churn                   none" in text
    assert "0 of the peers (0.0%" in text


@pytest.mark.parametrize(
    ("args", "start"),
    [
        # found by the input fuzzer: numpy's "Maximum allowed dimension exceeded" escaped
        (["--set", "vector.dim=1000000000000000000000000000000"], "error: vector.dim: 1"),
        (["--max-memory", "1KiB"], "error: peers.count: 96 needs about "),
    ],
)
def test_a_scenario_that_would_not_fit_is_refused_in_one_line(scenario, args, start):
    result = CliRunner().invoke(app, ["info", str(scenario), *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(start), lines[0]
    assert "Traceback" not in result.output


def test_the_median_of_values_near_the_largest_float_does_not_overflow(tmp_path):
    # found by the input fuzzer: np.median averaged the middle pair, a sum past the largest
    # float, and numpy's RuntimeWarning reached stderr
    path = tmp_path / "huge.yaml"
    path.write_text("name: huge\npeers: {count: 8, delay: {dist: uniform, low: 1e308, "
                    "high: 1.7976931348623157e+308}}\nprotocol: {name: gossip}\n")  # fmt: skip
    result = CliRunner().invoke(app, ["info", str(path)])
    assert result.exit_code == 0, result.stderr
    assert "Warning" not in result.stderr
    median, low, high = (float(cell) for cell in row(result.stdout, "delay")[1:6:2])
    assert low <= median <= high < float("inf")
