"""An async swarm whose groups run alone gives the run the network clock gives
(:mod:`sim.engine.netclock.alone_groups`, issue 13).

A churned swarm (members go down and come back while their groups run), with short
sender timeouts and a row every two seconds (groups in flight at most samples), runs
twice: every group on the clock's events, and the groups run alone. The groups, the
steps, the messages and the final vectors are the same, bit for bit; the instants and
the bytes (per row, per peer) to 1e-9 relative.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sim
from sim.engine.netclock import NetworkClock, alone_groups

RTOL = 1e-9


def _scenario() -> Any:
    link = {"dist": "lognormal", "median": "100 Mbit/s", "sigma": 1.0}
    return sim.scenario_from_mapping(
        {
            "name": "alone-swarm",
            "clock": "network",
            "schedule": "async",
            "peers": {"count": 16, "upload": link, "download": link, "latency": "10 ms",
                      "compute": "1 s"},
            "churn": {"model": "exponential", "mtbf": "60 s", "mttr": "4 s"},
            "vector": {"dim": 32, "dtype": "float32", "wire_bytes": "64 MB"},
            "protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 2,
                         "matchmaking_time": 1.0, "sender_timeout": 0.1},
            "stop": {"max_time": 120.0, "target_var": 0},
            "metrics": {"every": 2.0},
        }
    )  # fmt: skip


def _run(alone: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, int]]:
    changes = {"down": 0, "up": 0}
    changed = alone_groups.AloneGroups.changed

    def counting(groups: Any, peers: np.ndarray, up: bool) -> None:
        running = {id(g) for p in peers.tolist() for g in groups._of_peer.get(p, ())}
        changes["up" if up else "down"] += len(running)
        changed(groups, peers, up)

    with monkeypatch.context() as patch:
        patch.setattr(NetworkClock, "groups_alone", alone)
        patch.setattr(alone_groups.AloneGroups, "changed", counting)
        return sim.run(_scenario(), seed=2), changes


def test_a_swarm_whose_groups_run_alone_runs_as_on_the_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ref, _ = _run(False, monkeypatch)
    got, changes = _run(True, monkeypatch)
    assert changes["down"] > 0, changes  # members down mid-group
    assert changes["up"] > 0, changes  # and back while their old group runs
    assert got.summary["flows_timed_out"] > 0
    for key, value in ref.summary.items():
        if key == "wall_time_s":
            continue
        if isinstance(value, float) and not isinstance(got.summary[key], bool):
            assert got.summary[key] == pytest.approx(value, rel=RTOL, abs=0.0), key
        else:
            assert got.summary[key] == value, key
    np.testing.assert_array_equal(got.state.x, ref.state.x)
    tables = ("metrics", "traffic", "groups", "steps")
    for name in tables:
        mine = got.metrics if name == "metrics" else got.extra_tables[name]
        theirs = ref.metrics if name == "metrics" else ref.extra_tables[name]
        assert list(mine.columns) == list(theirs.columns)
        for column in theirs.columns:
            if theirs[column].dtype.kind == "f":
                np.testing.assert_allclose(mine[column], theirs[column], rtol=RTOL, atol=0.0)
            else:
                assert mine[column].tolist() == theirs[column].tolist(), (name, column)
