"""``avsim run --trace``: trace.json beside the result, its bounds, its one-line messages."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.engine.trace import MAX_EVENTS

NETWORK = """\
name: traced
seed: 4
clock: network
peers: {count: 12, upload: 100 Mbit/s, download: 100 Mbit/s, latency: 10 ms}
churn: {model: exponential, mtbf: 20 s, mttr: 5 s, rejoin: fetch}
vector: {dim: 8192}
protocol: {name: moshpit, group_size: 4, grid_dims: 2}
stop: {max_time: 10 s, max_rounds: null, target_var: null}
"""
GOSSIP_ASYNC = """\
name: traced-gossip
seed: 4
clock: network
schedule: async
peers: {count: 8, upload: 100 Mbit/s, download: 100 Mbit/s, latency: 10 ms,
        compute: {dist: uniform, low: 0.1, high: 0.3}}
churn: {model: exponential, mtbf: 20 s, mttr: 5 s, rejoin: keep}
vector: {dim: 8192}
protocol: {name: gossip, topology: ring}
stop: {max_time: 10 s, max_rounds: null, target_var: null}
"""
ROUNDS = """\
name: rounds
peers: {count: 8}
vector: {dim: 4}
protocol: {name: random_groups, group_size: 4}
stop: {max_rounds: 3}
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def network(tmp_path: Path) -> Path:
    path = tmp_path / "traced.yaml"
    path.write_text(NETWORK)
    return path


def invoke(runner: CliRunner, *args: str | Path):
    return runner.invoke(app, [str(a) for a in args])


def one_line(result, code: int) -> str:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return lines[0]


def load(folder: Path) -> dict:
    with (folder / "trace.json").open(encoding="utf-8") as file:
        return json.load(file)


def tracks(document: dict) -> list[str]:
    return sorted(
        e["args"]["name"] for e in document["traceEvents"]
        if e["name"] == "thread_name" and "·" not in e["args"]["name"]
    )  # fmt: skip


def test_trace_json_holds_every_seed_and_loads_as_json(runner, network, tmp_path):
    out = tmp_path / "out"
    result = invoke(runner, "run", network, "--out", out, "--repeats", "2", "--trace")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert "trace.json" in result.stdout
    document = load(out)
    assert set(document) == {"traceEvents", "displayTimeUnit"}
    assert document["displayTimeUnit"] == "ms"
    events = document["traceEvents"]
    assert {e["pid"] for e in events} == {4, 5}
    assert all({"name", "ph", "pid", "tid", "ts"} <= e.keys() for e in events)
    assert all(e["dur"] >= 0 for e in events if e["ph"] == "X")
    assert {e.get("cat") for e in events if e["ph"] == "X"} >= {"round", "flow", "churn"}
    assert tracks(document) == sorted([f"peer {p}" for p in range(12)] * 2)


@pytest.mark.parametrize("text", [NETWORK, GOSSIP_ASYNC], ids=["moshpit", "gossip-async"])
def test_results_are_identical_with_and_without_trace(runner, network, tmp_path, text):
    network.write_text(text)
    plain, traced = tmp_path / "plain", tmp_path / "traced"
    assert invoke(runner, "run", network, "--out", plain).exit_code == 0
    assert invoke(runner, "run", network, "--out", traced, "--trace").exit_code == 0
    for name in ("metrics.parquet", "peers.parquet", "traffic.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(plain / name), pd.read_parquet(traced / name))
    runs = [json.loads((f / "summary.json").read_text())["runs"] for f in (plain, traced)]
    for run in (*runs[0], *runs[1]):
        run.pop("wall_time_s")
    assert runs[0] == runs[1]
    assert (plain / "scenario.yaml").read_text() == (traced / "scenario.yaml").read_text()
    assert sorted(p.name for p in traced.iterdir()) == sorted(
        [*(p.name for p in plain.iterdir()), "trace.json"]
    )


def test_trace_peers_limits_the_tracks(runner, network, tmp_path):
    out = tmp_path / "out"
    result = invoke(runner, "run", network, "--out", out, "--trace", "--trace-peers", "0-2,7")
    assert result.exit_code == 0, result.stderr
    assert tracks(load(out)) == ["peer 0", "peer 1", "peer 2", "peer 7"]


def test_trace_cap_truncates_with_a_one_line_warning(runner, network, tmp_path):
    out = tmp_path / "out"
    result = invoke(runner, "run", network, "--out", out, "--trace", "--trace-max-events", "25")
    line = one_line(result, 0)
    assert line.startswith("warning: trace.json stops at t = ")
    assert line.endswith(
        " s (seed 4): it holds --trace-max-events 25 events; follow fewer peers with --trace-peers"
    )
    events = load(out)["traceEvents"]
    body = [e for e in events if e["ph"] != "M"]
    assert len(body) == 26
    assert body[-1]["name"] == "trace truncated"
    at_s = float(line.split("t = ")[1].split(" s ")[0])
    assert at_s == pytest.approx(body[-1]["args"]["at_s"], rel=1e-5)


def test_the_default_follows_the_first_64_peers_and_says_so(runner, network, tmp_path):
    network.write_text(NETWORK.replace("count: 12", "count: 70").replace("10 s", "1 s"))
    out = tmp_path / "out"
    line = one_line(invoke(runner, "run", network, "--out", out, "--trace"), 0)
    assert line == "warning: --trace follows peers 0-63 of 70; choose others with --trace-peers"
    assert tracks(load(out)) == sorted(f"peer {p}" for p in range(64))


def test_trace_on_the_rounds_clock_is_refused(runner, tmp_path):
    path = tmp_path / "rounds.yaml"
    path.write_text(ROUNDS)
    out = tmp_path / "out"
    line = one_line(invoke(runner, "run", path, "--out", out, "--trace"), 2)
    assert line == "error: --trace: expected a scenario with clock: network, got clock: rounds"
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--trace", "--trace-peers", "0-x"],
         "error: --trace-peers: expected peer indices or ranges like 0-15,32, got '0-x'"),
        (["--trace", "--trace-peers", "3,12"],
         "error: --trace-peers: expected peer indices below 12 (the run's peers), got 12"),
        (["--trace-peers", "0-3"],
         "error: --trace-peers: expected --trace as well (it shapes the trace), got no --trace"),
        (["--trace-max-events", "10"],
         "error: --trace-max-events: expected --trace as well (it shapes the trace), got no "
         "--trace"),
    ],
)  # fmt: skip
def test_bad_trace_options_are_one_line_errors(runner, network, tmp_path, args, expected):
    out = tmp_path / "out"
    assert one_line(invoke(runner, "run", network, "--out", out, *args), 2) == expected
    assert not out.exists()


def test_help_shows_the_trace_options_and_their_defaults(runner):
    result = invoke(runner, "run", "--help")
    text = " ".join(result.stdout.split())
    for needle in ("--trace", "--trace-peers", "--trace-max-events", "0-63", str(MAX_EVENTS)):
        assert needle in text


def nests(slices: list[dict]) -> bool:
    """The ``X`` slices of one track nest (Perfetto draws nothing else)."""
    open_ends: list[int] = []
    for e in sorted(slices, key=lambda e: (e["ts"], -e["dur"])):
        while open_ends and open_ends[-1] <= e["ts"]:
            open_ends.pop()
        if open_ends and e["ts"] + e["dur"] > open_ends[-1]:
            return False
        open_ends.append(e["ts"] + e["dur"])
    return True


def test_gossip_async_steps_are_slices_after_each_local_work(runner, network, tmp_path):
    """Mailbox steps (asynchronous SGP): a ``compute`` slice per local work and, where it
    ends, a ``step`` slice (no duration) with the step's index, the ring neighbours it
    sent to and the senders it mixed; one per completed step, numbered in order."""
    network.write_text(GOSSIP_ASYNC)
    out = tmp_path / "out"
    result = invoke(runner, "run", network, "--out", out, "--trace")
    assert result.exit_code == 0, result.stderr
    events = load(out)["traceEvents"]
    assert all({"name", "ph", "pid", "tid", "ts"} <= e.keys() for e in events)
    assert tracks(load(out)) == sorted(f"peer {p}" for p in range(8))
    body = [e for e in events if e["ph"] == "X"]
    assert all(isinstance(e["ts"], int) and isinstance(e["dur"], int) for e in body)
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in body)
    assert {e["cat"] for e in body} == {"compute", "step", "flow", "churn"}
    by_tid: dict[int, list[dict]] = {}
    for e in body:
        by_tid.setdefault(e["tid"], []).append(e)
    assert all(nests(track) for track in by_tid.values())
    steps = pd.read_parquet(out / "steps.parquet").set_index("peer")["steps"]
    stride = 10  # extra rows of peer i: tid = i + row × 10 (8 peers)
    sent = mixed = 0
    for peer in range(8):
        mine = [e for e in body if e["tid"] % stride == peer]
        step_slices = sorted((e for e in mine if e["cat"] == "step"), key=lambda e: e["ts"])
        compute_ends = {e["ts"] + e["dur"] for e in mine if e["cat"] == "compute"}
        assert len(step_slices) == steps[peer]  # 0 for a peer absent all along
        ring = {(peer - 1) % 8, (peer + 1) % 8}
        for k, e in enumerate(step_slices):
            assert e["name"] == "step"
            assert e["dur"] == 0
            assert e["args"]["step"] == k
            assert e["ts"] in compute_ends  # the step comes when its local work ends
            assert set(e["args"]["sent_to"]) <= ring
            assert set(e["args"]["mixed_from"]) <= ring
            sent += len(e["args"]["sent_to"])
            mixed += len(e["args"]["mixed_from"])
    assert sent == sum(1 for e in body if e["cat"] == "flow")  # one flow per message
    assert sent > 0
    assert mixed > 0
