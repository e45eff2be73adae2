"""``allreduce_overhead`` (moshpit, random_groups; ``schedule: async``): seconds of
processing between a group's assembly and its all-reduce's first flows, a constant or a
distribution drawn once per group (issue 12 part 7: where hivemind spends its per-step
overhead)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import sim
from protocols._async_groups import async_rules
from sim.cli import app
from sim.core.errors import ScenarioError
from sim.core.fields import const
from sim.engine.schedules import engine_for

FAST = 1e9  # bytes/s: a 4-coordinate vector moves in well under a microsecond


def full_grid(name: str = "moshpit", compute: float = 0.5, **protocol: Any) -> Any:
    """16 peers on the full 4×4 grid (random_groups: one key), no latency, L = 0: every
    group fills the instant its members declare."""
    data: dict[str, Any] = {
        "name": "overhead",
        "clock": "network",
        "schedule": "async",
        "peers": {"count": 16, "upload": FAST, "download": FAST, "latency": 0,
                  "compute": compute},
        "vector": {"dim": 4},
        "protocol": {"name": name, "group_size": 4, "matchmaking_latency": 0.0,
                     "matchmaking_time": 1.0, **protocol},
        "stop": {"max_time": 3.0, "target_var": 0},
        "metrics": {"every": 0.25},
    }  # fmt: skip
    if name == "moshpit":
        data["protocol"]["grid_dims"] = 2
    return sim.scenario_from_mapping(data)


def swarm(peers: dict[str, Any] | None = None, **protocol: Any) -> Any:
    """The hivemind cross-check's swarm: 12 peers on a 4×4 grid, heterogeneous local work,
    under-filled groups (min_group_size 2), latency and a DHT delay."""
    data: dict[str, Any] = {
        "name": "overhead-swarm",
        "clock": "network",
        "schedule": "async",
        "peers": {"count": 12, "upload": FAST, "download": FAST, "latency": 0.002,
                  "compute": {"dist": "uniform", "low": 0.2, "high": 1.5}, **(peers or {})},
        "vector": {"dim": 16},
        "protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 2, "min_group_size": 2,
                     "matchmaking_time": 2.0, "matchmaking_latency": 0.1,
                     "averaging_timeout": 6.0, **protocol},
        "stop": {"max_time": 30.0, "target_var": 0},
        "metrics": {"every": 0.25},
    }  # fmt: skip
    return sim.scenario_from_mapping(data)


@pytest.mark.parametrize("name", ["moshpit", "random_groups"])
def test_the_default_is_zero_and_draws_nothing(name: str) -> None:
    params = full_grid(name).protocol
    assert params.allreduce_overhead == const(0.0)
    assert async_rules(params).overhead is None
    explicit = full_grid(name, allreduce_overhead="0 ms").protocol
    assert async_rules(explicit).overhead is None


@pytest.mark.parametrize(
    ("value", "key"),
    [
        (-0.1, "protocol.allreduce_overhead"),
        ("fast", "protocol.allreduce_overhead"),
        (float("nan"), "protocol.allreduce_overhead"),
        (True, "protocol.allreduce_overhead"),
        ({"dist": "normal", "mean": 1}, "protocol.allreduce_overhead.dist"),
        ({"dist": "uniform", "low": 0.1}, "protocol.allreduce_overhead.high"),
        ({"dist": "choice", "values": [0.1, -1]}, "protocol.allreduce_overhead.values.1"),
        ({"dist": "choice", "values": []}, "protocol.allreduce_overhead.values"),
    ],
)
def test_bad_values_are_refused_on_one_line(value: Any, key: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        full_grid("random_groups", allreduce_overhead=value)
    message = str(caught.value)
    assert message.startswith(f"{key}: expected "), message
    assert "\n" not in message


def test_the_command_line_refuses_a_negative_overhead_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "overhead.yaml"
    path.write_text(
        "name: o\nclock: network\nschedule: async\n"
        "protocol: {name: moshpit, allreduce_overhead: -1 s}\nstop: {max_time: 2}\n"
    )
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: protocol.allreduce_overhead: expected a duration")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["moshpit", "random_groups"])
def test_a_constant_overhead_delays_every_all_reduce(name: str) -> None:
    """Closed form: every peer declares after c, its group fills at once, and the
    flows start o later; step k (1, 2, …) therefore assembles at k·c + (k−1)·o and ends
    at k·(c + o) (+ the flows' sub-microsecond transfer)."""
    c, o = 0.5, 0.2
    result = sim.run(full_grid(name, compute=c, allreduce_overhead=f"{o * 1000:g} ms"), seed=1)
    groups = result.extra_tables["groups"]
    step = np.repeat(np.arange(1, len(groups) // 4 + 1), 4)
    assert len(groups) == 16  # 4 steps of 4 groups of 4 by 3 s
    assert (groups["size"] == 4).all()
    np.testing.assert_allclose(groups["assembled_s"], step * c + (step - 1) * o, atol=1e-9)
    np.testing.assert_allclose(groups["done_s"], step * (c + o), atol=1e-6)
    steps = result.extra_tables["steps"]
    assert (steps["steps"] == 4).all()
    # the overhead is all-reduce time: 4 steps of o (+ flows), the rest is local work
    np.testing.assert_allclose(steps["allreduce_s"], 4 * o, atol=1e-5)
    np.testing.assert_allclose(steps["compute_s"], 3.0 - 4 * o, atol=1e-5)


def test_without_churn_a_constant_overhead_is_local_work_moved_into_the_step() -> None:
    """A peer's loop is a cycle: moving o from before its declaration (``peers.delay``)
    to between assembly and flows shifts every declaration and assembly o earlier and
    changes nothing else: the same groups, members, keys, end times and variance."""
    o = 0.3
    inside = sim.run(swarm(allreduce_overhead=o), seed=3)
    before = sim.run(swarm(peers={"delay": o}), seed=3)
    a, b = inside.extra_tables["groups"], before.extra_tables["groups"]
    assert len(a) == len(b) > 30
    assert a["members"].tolist() == b["members"].tolist()
    assert a["key"].tolist() == b["key"].tolist()
    assert set(a["size"]) == {2, 3, 4}  # under-filled groups take part too
    np.testing.assert_allclose(a["done_s"], b["done_s"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(a["assembled_s"] + o, b["assembled_s"], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(inside.metrics["var"], before.metrics["var"])


def test_a_distribution_is_drawn_once_per_group_from_its_own_stream() -> None:
    values = (0.1, 0.3)
    drawn = full_grid(allreduce_overhead={"dist": "choice", "values": list(values)})
    result = sim.run(drawn, seed=1)
    groups = result.extra_tables["groups"]
    spent = (groups["done_s"] - groups["assembled_s"]).to_numpy()
    nearest = np.array(values)[np.abs(spent[:, None] - np.array(values)).argmin(axis=1)]
    np.testing.assert_allclose(spent, nearest, atol=1e-6)  # one draw per group
    assert set(nearest.tolist()) == set(values)
    again = sim.run(drawn, seed=1).extra_tables["groups"]
    assert again.equals(groups)
    # the draws leave the DHT ids and the leaders' shuffles alone: the first step's
    # groups (assembled before any draw took effect) are those of a run without overhead
    plain = sim.run(full_grid(), seed=1).extra_tables["groups"]
    first = groups["assembled_s"] == groups["assembled_s"].min()
    assert groups[first]["members"].tolist() == plain[: int(first.sum())]["members"].tolist()


def test_a_member_preempted_during_the_overhead_is_lost_inside_its_group(tmp_path: Path) -> None:
    """Where the overhead sits matters under churn: peer 5 goes down 0.1 s into its first
    group's overhead (assembled at c = 0.5 s, flows from 0.7 s). With the overhead inside
    the step it is a member of that group and lost to it: the group ends with one member
    fewer averaged and peer 5 keeps its vector. As local work (``peers.delay``) it is
    preempted before it declares: its key's first group forms without it, all averaged."""
    trace = tmp_path / "trace.csv"
    trace.write_text("peer,down_s,up_s\n5,0.6,2.9\n")
    churn = {"model": "trace", "file": str(trace), "rejoin": "keep"}
    c, o = 0.5, 0.2

    def run(**parts: Any) -> Any:
        scenario = full_grid(compute=c, **parts.pop("protocol", {}))
        data = scenario.model_dump(mode="json")
        data["churn"] = churn
        data["peers"].update(parts.get("peers", {}))
        return sim.run(sim.scenario_from_mapping(data), seed=1)

    inside = run(protocol={"allreduce_overhead": o})
    groups = inside.extra_tables["groups"]
    first = groups[groups["members"].map(lambda m: 5 in map(int, m.split()))].iloc[0]
    assert first["assembled_s"] == pytest.approx(c)
    assert (first["size"], first["averaged"]) == (4, 3)
    before = run(peers={"delay": o})
    groups = before.extra_tables["groups"]
    assert (
        not groups[groups["assembled_s"] < 1.0]["members"]
        .map(lambda m: 5 in map(int, m.split()))
        .any()
    )
    assert (groups["averaged"] == groups["size"]).all()
    initial = engine_for(full_grid(compute=c), 1).state.x[5]
    np.testing.assert_array_equal(inside.state.x[5], initial)
    np.testing.assert_array_equal(before.state.x[5], initial)
