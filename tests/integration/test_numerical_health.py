"""Numerical health: a NaN or inf in the state stops the run where it first appeared."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import sim
from sim.cli import app
from sim.engine.schedules import engine_for

HUGE = 1.7e308  # finite; the difference of two of them overflows


def scenario(tmp_path, protocol: dict, clock: str = "rounds", peers: int = 8):
    """Pairwise gossip: every peer holds ±1.7e308, signs alternating (the difference of
    two opposite peers overflows); a group mean: peers 3 and 5 hold 1.7e308 (the sum
    overflows)."""
    x = np.zeros((peers, 2))
    if protocol["name"] == "pairwise_gossip":
        x[:] = HUGE * (1 - 2 * (np.arange(peers) % 2))[:, None]
    else:
        x[3], x[5] = HUGE, HUGE
    path = tmp_path / "x.npy"
    np.save(path, x)
    stop = {"max_rounds": 20} if clock == "rounds" else {"max_time": 20}
    return sim.scenario_from_mapping(
        {
            "name": "nan",
            "clock": clock,
            "peers": {"count": peers},
            "vector": {"dim": 2, "init": "file", "file": str(path)},
            "protocol": protocol,
            "stop": {**stop, "target_var": 1e-9},
        }
    )


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_barrier_protocol_stops_at_the_round_with_the_lowest_bad_peer(tmp_path):
    result = sim.run(scenario(tmp_path, {"name": "all_reduce"}))
    assert result.summary["stop_reason"] == "nan"
    assert result.summary["nan"] == {"round": 1, "time_s": 1.0, "peer": 0}
    assert result.summary["rounds"] == 1
    assert not np.isfinite(result.state.x).all()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("clock", ["rounds", "network"])
def test_an_event_protocol_names_the_first_event_in_time(tmp_path, clock):
    sc = scenario(tmp_path, {"name": "pairwise_gossip", "topology": "complete"}, clock)
    result = sim.run(sc)
    nan = result.summary["nan"]
    assert result.summary["stop_reason"] == "nan"
    first = first_bad_event(sc, clock)
    assert nan["time_s"] == pytest.approx(first[0], rel=1e-12)
    assert nan["peer"] == first[1]


def first_bad_event(sc, clock: str) -> tuple[float, int]:
    """(time, lowest peer) of the first exchange that left a non-finite row, found by
    watching the state itself (network) or replaying the rounds one event at a time."""
    run = engine_for(sc, sc.seed)
    if clock == "network":
        found = []
        after = run.tracker.after

        def watch(rows):
            after(rows)
            bad = rows[~np.isfinite(run.state.x[rows]).all(axis=1)]
            if bad.size and not found:
                found.append((float(run.env.now), int(bad.min())))

        run.tracker.after = watch
        run.env.process(run.process(None))
        run.env.run(until=20)
        return found[0]
    from sim.kernels import pairwise_delta

    drawn = run.protocol.ring_round
    for t in range(20):
        times, i, j = drawn(np.ones(sc.peers.count, dtype=bool))
        for k in range(times.size):
            a, b = np.array([i[k]]), np.array([j[k]])
            with np.errstate(all="ignore"):
                run.state.x = pairwise_delta(run.state.x, a, b)
            bad = np.r_[a, b][~np.isfinite(run.state.x[np.r_[a, b]]).all(axis=1)]
            if bad.size:
                return t + float(times[k]), int(bad.min())
    raise AssertionError("no NaN")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_cli_prints_one_warning_line(tmp_path):
    x = np.zeros((8, 2))
    x[3], x[5] = HUGE, HUGE
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "s.yaml").write_text(
        "name: nan\npeers: {count: 8}\nvector: {dim: 2, init: file, file: x.npy}\n"
        "protocol: {name: all_reduce}\nstop: {max_rounds: 5}\n"
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(tmp_path / "s.yaml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "NaN or inf" in line]
    assert lines == [
        "warning: seed 0: a NaN or inf appeared in the state at round 1, t = 1 s (peer 0); "
        "the run stopped there"
    ]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_without_a_threshold_to_time_the_samples_find_it(tmp_path):
    """Nothing to time: the tracker is off, the first sample that sees a NaN stops the
    run and names the lowest peer."""
    sc = scenario(tmp_path, {"name": "pairwise_gossip", "topology": "complete"}, "network")
    off = sim.scenario_from_mapping(
        {**sc.model_dump(mode="json"), "stop": {"max_time": 20, "target_var": 0}}
    )
    result = sim.run(off)
    nan = result.summary["nan"]
    assert result.summary["stop_reason"] == "nan"
    assert nan["time_s"] == float(round(nan["time_s"]))  # a sample (metrics.every: 1 s)
    bad = np.flatnonzero(~np.isfinite(result.state.x).all(axis=1))
    assert nan["peer"] == int(bad.min())
