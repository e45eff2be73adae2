"""An async swarm whose groups run alone gives the run the network clock gives
(:mod:`sim.engine.netclock.alone_groups`, issue 13).

A churned swarm (members go down and come back while their groups run), with short
sender timeouts and a row every two seconds (groups in flight at most samples), runs
twice: every group on the clock's events, and the groups run alone (all of them, with
and without the churn schedule read ahead, or those of up to 3 members beside the
others on the events). The groups, the
steps, the messages and the final vectors are the same, bit for bit; the instants and
the bytes (per row, per peer) to 1e-9 relative.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import sim
from sim.engine.netclock import NetworkClock, alone_groups
from tests.compare import assert_runs_agree

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


def _run(
    alone: bool, monkeypatch: pytest.MonkeyPatch, max_members: int = 8, read_ahead: bool = True
) -> tuple[Any, dict[str, int]]:
    seen = {"down": 0, "up": 0, "kept on events": 0, "timed again": 0}
    groups_cls = alone_groups.AloneGroups
    changed, takes, timing, init = groups_cls.changed, groups_cls.takes, groups_cls._time, (
        groups_cls.__init__
    )  # fmt: skip
    inside = [False]

    def counting(groups: Any, peers: np.ndarray, up: bool) -> None:
        running = {key for p in peers.tolist() for key in groups._of_peer.get(p, {})}
        seen["up" if up else "down"] += len(running)
        inside[0] = True
        try:
            changed(groups, peers, up)
        finally:
            inside[0] = False

    def timed(groups: Any, comp: Any, background: bool = False) -> None:
        seen["timed again"] += inside[0]  # a change the loop did not have
        timing(groups, comp, background)

    def taking(groups: Any, plan: Any) -> bool:
        small = plan.members.size <= groups.MAX_MEMBERS
        seen["kept on events"] += small and any(m in groups._events for m in plan.members)
        return takes(groups, plan)

    def building(groups: Any, *args: Any) -> None:
        init(groups, *args)
        if not read_ahead:
            groups.churn = None

    with monkeypatch.context() as patch:
        patch.setattr(NetworkClock, "groups_alone", alone)
        patch.setattr(groups_cls, "MAX_MEMBERS", max_members)
        patch.setattr(groups_cls, "changed", counting)
        patch.setattr(groups_cls, "_time", timed)
        patch.setattr(groups_cls, "takes", taking)
        patch.setattr(groups_cls, "__init__", building)
        return sim.run(_scenario(), seed=2), seen


@pytest.mark.parametrize(("max_members", "read_ahead"), [(8, True), (8, False), (3, True)])
def test_a_swarm_whose_groups_run_alone_runs_as_on_the_clock(
    monkeypatch: pytest.MonkeyPatch, max_members: int, read_ahead: bool
) -> None:
    """With groups of up to 4, all run alone (8); with 3, the groups of 4 run on the
    clock's events, and a small group with a member still in one of those (lost to it
    and back) stays on the events too, where both groups' flows meet. Reading the churn
    schedule ahead, the loop has every change of presence before it happens and never
    runs again; without, it runs again from the group's start at each."""
    ref, _ = _run(False, monkeypatch)
    got, seen = _run(True, monkeypatch, max_members, read_ahead)
    assert seen["down"] > 0, seen  # members down mid-group
    if max_members == 8:
        assert seen["up"] > 0, seen  # and back while their old group runs
    else:
        assert seen["kept on events"] > 0, seen
    if read_ahead:
        assert seen["timed again"] == 0, seen
    else:
        assert seen["timed again"] == seen["down"] + seen["up"], seen
    assert got.summary["flows_timed_out"] > 0
    assert_runs_agree(got, ref, RTOL, ("metrics", "traffic", "groups", "steps"))


@pytest.mark.parametrize("workers", [1, 2])
def test_groups_timed_by_worker_threads_give_the_same_run_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """Every new group's loop on a worker thread (``BACKGROUND_FLOWS`` 1), its ends
    armed at its wake instant, gives the run of every loop timed at once, bit for bit:
    members going down and back, timeouts, rows every two seconds."""
    if not alone_groups.compiled():
        pytest.skip("the loop runs as Python here: no worker threads")
    groups_cls = alone_groups.AloneGroups
    wake = groups_cls._wake
    woken = [0]

    def waking(groups: Any, comp: Any, now: float, least: float) -> float:
        at = wake(groups, comp, now, least)
        woken[0] += at < float("inf")
        return at

    def run(count: int) -> Any:
        with monkeypatch.context() as patch:
            patch.setattr(NetworkClock, "groups_alone", True)
            patch.setattr(groups_cls, "WORKERS", count)
            patch.setattr(groups_cls, "BACKGROUND_FLOWS", 1)
            patch.setattr(groups_cls, "_wake", waking)
            return sim.run(_scenario(), seed=2)

    ref = run(0)
    assert woken[0] == 0
    got = run(workers)
    assert woken[0] > 10, woken  # groups timed in the background
    assert got.summary["flows_timed_out"] > 0
    for key, value in ref.summary.items():
        if key != "wall_time_s":
            assert got.summary[key] == value, key
    np.testing.assert_array_equal(got.state.x, ref.state.x)
    assert got.metrics.equals(ref.metrics)
    for name in ("traffic", "groups", "steps"):
        assert got.extra_tables[name].equals(ref.extra_tables[name]), name


def test_groups_that_share_a_member_run_alone_together_as_on_the_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group's flows start 20 s after it assembles (``allreduce_overhead``) and peers
    come back within a second: a member goes down and back and joins a new group
    before its old group, running alone, has sent it anything. The two groups then run
    as one component (their flows meet on its links), and the run is the clock's."""
    data = {
        "name": "alone-together", "clock": "network", "schedule": "async",
        "peers": {"count": 8, "upload": "100 Mbit/s", "download": "100 Mbit/s",
                  "latency": "10 ms", "compute": "1 s"},
        "churn": {"model": "exponential", "mtbf": "20 s", "mttr": "1 s"},
        "vector": {"dim": 8, "dtype": "float32", "wire_bytes": "8 MB"},
        "protocol": {"name": "moshpit", "group_size": 2, "grid_dims": 2,
                     "matchmaking_time": 1.0, "allreduce_overhead": 20.0},
        "stop": {"max_time": 120.0, "target_var": 0}, "metrics": {"every": 10.0},
    }  # fmt: skip
    joined = [0]
    merge = alone_groups.AloneGroups._merge

    def merging(groups: Any, comps: list) -> Any:
        joined[0] += 1
        return merge(groups, comps)

    monkeypatch.setattr(alone_groups.AloneGroups, "_merge", merging)
    got = sim.run(sim.scenario_from_mapping(data), seed=0)
    assert joined[0] > 0
    data["network"] = {"groups_alone": False}
    ref = sim.run(sim.scenario_from_mapping(data), seed=0)
    np.testing.assert_array_equal(got.state.x, ref.state.x)
    assert got.summary["messages"] == ref.summary["messages"]
    assert got.summary["groups_run"] == ref.summary["groups_run"]
    np.testing.assert_allclose(got.metrics["bytes_sent"], ref.metrics["bytes_sent"], rtol=RTOL)
    np.testing.assert_allclose(
        got.extra_tables["groups"]["done_s"], ref.extra_tables["groups"]["done_s"], rtol=RTOL
    )


def test_without_numba_the_loop_runs_as_python_with_the_same_floats_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where numba is missing (or its JIT is off) the groups' loop runs as Python: one
    warning per process names the faster setting, and the run's floats are the
    compiled loop's, bit for bit."""
    from sim.engine.netclock import _alone_loop, alone
    from sim.engine.workload import SlowRunWarning

    data = _scenario().model_dump(mode="json")
    data["stop"]["max_time"] = 30.0
    data["peers"]["count"] = 8
    compiled_run = sim.run(sim.scenario_from_mapping(data), seed=1)
    monkeypatch.setattr(alone, "_solver", lambda: _alone_loop.solve)
    monkeypatch.setattr(alone_groups, "compiled", lambda: False)
    monkeypatch.setattr(alone_groups, "_WARNED", [False])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        python_run = sim.run(sim.scenario_from_mapping(data), seed=1)
        sim.run(sim.scenario_from_mapping(data), seed=1)  # once per process
    slow = [str(w.message) for w in caught if issubclass(w.category, SlowRunWarning)]
    assert len(slow) == 1, slow
    assert "network.groups_alone: false" in slow[0]
    np.testing.assert_array_equal(python_run.state.x, compiled_run.state.x)
    for column in compiled_run.metrics.columns:
        if column != "wall_time_s":
            assert python_run.metrics[column].tolist() == compiled_run.metrics[column].tolist()
