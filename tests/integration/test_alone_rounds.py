"""Barrier rounds whose groups run alone give the run of the network clock's events
(:mod:`sim.engine.netclock.alone_rounds`, issue 13).

Moshpit and random_groups on the network clock, lognormal bandwidths, members going down
and back mid-round, short sender timeouts, a row every second: run with every flow on
the clock's events, and with each round's groups alone (all of them, or only those of up
to 3 peers beside the others on the events, in the same round). The groups, messages,
flows timed out and the final vectors are the same, bit for bit; the instants and the
bytes to 1e-9 relative.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sim
from sim.engine.netclock import NetworkClock, alone_groups, alone_rounds
from tests.compare import assert_runs_agree

RTOL = 1e-9


def _scenario(protocol: dict[str, Any], churn: bool = True) -> Any:
    link = {"dist": "lognormal", "median": "100 Mbit/s", "sigma": 1.0}
    data: dict[str, Any] = {
        "name": "alone-rounds",
        "clock": "network",
        "peers": {"count": 24, "upload": link, "download": link, "latency": "10 ms"},
        "vector": {"dim": 32, "dtype": "float32", "wire_bytes": "16 MB"},
        "protocol": protocol,
        "stop": {"max_time": 60.0, "target_var": 0},
        "metrics": {"every": 1.0},
    }
    if churn:
        data["churn"] = {"model": "exponential", "mtbf": "30 s", "mttr": "3 s"}
    return sim.scenario_from_mapping(data)


MOSHPIT = {"name": "moshpit", "group_size": 4, "grid_dims": 2, "matchmaking_time": 0.5,
           "sender_timeout": 0.3}  # fmt: skip
RANDOM_GROUPS = {"name": "random_groups", "group_size": 4}


def _run(
    scenario: Any, alone: bool, monkeypatch: pytest.MonkeyPatch, max_members: int = 64
) -> tuple[Any, dict[str, int]]:
    seen = {"alone": 0, "on events": 0, "changed": 0}
    run, changed = alone_groups.AloneGroups.run, alone_groups.AloneGroups.changed
    transmit = alone_rounds.transmit

    def running(groups: Any, plan: Any) -> Any:
        seen["alone"] += 1
        return run(groups, plan)

    def changing(groups: Any, peers: np.ndarray, up: bool) -> None:
        seen["changed"] += sum(p in groups._of_peer for p in peers.tolist())
        changed(groups, peers, up)

    def sending(env: Any, groups: Any, plan: Any, on_events: Any, *args: Any) -> Any:
        def counted(p: Any, idle_s: float) -> Any:
            seen["on events"] += 1
            return on_events(p, idle_s)

        return transmit(env, groups, plan, counted, *args)

    with monkeypatch.context() as patch:
        patch.setattr(NetworkClock, "groups_alone", alone)
        patch.setattr(alone_rounds, "MAX_MEMBERS", max_members)
        patch.setattr(alone_groups.AloneGroups, "run", running)
        patch.setattr(alone_groups.AloneGroups, "changed", changing)
        patch.setattr(alone_rounds, "transmit", sending)
        return sim.run(scenario, seed=3), seen


def _same_run(got: Any, ref: Any) -> None:
    assert_runs_agree(got, ref, RTOL)


@pytest.mark.parametrize("protocol", [MOSHPIT, RANDOM_GROUPS], ids=["moshpit", "random_groups"])
def test_barrier_rounds_whose_groups_run_alone_run_as_on_the_clock(
    monkeypatch: pytest.MonkeyPatch, protocol: dict[str, Any]
) -> None:
    """Every group alone, churn mid-round (the loop has it from the churn schedule)."""
    scenario = _scenario(protocol)
    ref, none = _run(scenario, False, monkeypatch)
    assert none["alone"] == 0
    got, seen = _run(scenario, True, monkeypatch)
    assert seen["alone"] > 20, seen
    assert seen["on events"] == 0, seen
    assert seen["changed"] > 0, seen  # members went down (or back) while a group ran
    assert ref.summary["rounds"] >= 5
    _same_run(got, ref)


def test_small_groups_alone_beside_large_ones_on_the_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Groups of up to 3 peers alone, those of 4 on the clock's events, in one round."""
    scenario = _scenario(MOSHPIT)
    ref, _ = _run(scenario, False, monkeypatch)
    got, seen = _run(scenario, True, monkeypatch, max_members=3)
    assert seen["alone"] > 0, seen
    assert seen["on events"] > 0, seen
    _same_run(got, ref)


def test_moshpit_flows_timed_out_alone_as_on_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without churn, the sender timeout cuts slow flows: the same flows time out."""
    scenario = _scenario({**MOSHPIT, "sender_timeout": 0.05}, churn=False)
    ref, _ = _run(scenario, False, monkeypatch)
    got, seen = _run(scenario, True, monkeypatch)
    assert seen["alone"] > 0
    assert ref.summary["flows_timed_out"] > 0
    _same_run(got, ref)


def test_a_ring_all_reduce_stays_on_the_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """A protocol that is not a group protocol keeps every flow on the clock's events."""
    scenario = _scenario({"name": "ring_allreduce"}, churn=False)
    got, seen = _run(scenario, True, monkeypatch)
    assert seen["alone"] == 0
    assert got.summary["rounds"] > 0
