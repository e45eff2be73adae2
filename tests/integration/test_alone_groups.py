"""The groups of an async swarm run alone as the network clock runs them (issue 13).

An async moshpit swarm with churn and short sender timeouts runs on the network clock;
every group it ran (pairs to groups of four, pieces that time out, members preempted
mid-group) is run again by :func:`sim.engine.netclock.alone.run_alone` and by the
network clock in an environment of its own, with a flow per piece and with streams and
chunks (the clock's default), once as it was and once with a member preempted at a
random instant. The flows delivered and timed out, the messages sent and refused, and
every instant agree (1e-9 relative); against the default clock, the group's end.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pytest
import simpy

import sim
from protocols.contract import GroupPlan
from sim.engine.netclock import NetworkClock
from sim.engine.netclock.alone import DELIVERED, FAILED, TIMED_OUT, run_alone
from sim.network import FlowNetwork

RTOL = 1e-9


def _scenario() -> Any:
    link = {"dist": "lognormal", "median": "100 Mbit/s", "sigma": 1.0}
    return sim.scenario_from_mapping(
        {
            "name": "alone-groups",
            "clock": "network",
            "schedule": "async",
            "peers": {"count": 16, "upload": link, "download": link, "latency": "10 ms",
                      "compute": "1 s"},
            "churn": {"model": "exponential", "mtbf": "5 min", "mttr": "1 min"},
            "vector": {"dim": 64, "dtype": "float32", "wire_bytes": "32 MB"},
            "protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 2,
                         "matchmaking_time": 1.0, "sender_timeout": 0.3},
            "stop": {"max_time": 150.0, "target_var": 0},
            "metrics": {"every": 150.0},
        }
    )  # fmt: skip


@pytest.fixture(scope="module")
def swarm() -> tuple[tuple[Any, ...], list[dict[str, Any]]]:
    """The swarm's links and every group it ran to its end (start, flows, presence)."""
    links: list[tuple[Any, ...]] = []
    groups: list[dict[str, Any]] = []
    net_init, clock_run = FlowNetwork.__init__, NetworkClock.run

    def network_init(net: Any, env: Any, *args: Any) -> None:
        links.append(args)
        net_init(net, env, *args)

    def run(clock: Any, plan: Any, idle_s: float = 0.0) -> Any:
        flows = plan.flows()
        plan.flows = lambda: flows
        group = {"t0": clock.env.now, "flows": flows, "present": clock.present.copy()}
        yield from clock_run(clock, plan, idle_s)
        group["end"] = clock.env.now
        groups.append(group)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FlowNetwork, "__init__", network_init)
        patch.setattr(NetworkClock, "run", run)
        patch.setattr(NetworkClock, "groups_alone", False)  # every group through run()
        sim.run(_scenario(), seed=5)
    return links[0], groups


def _preempt(clock: NetworkClock, peer: int, _event: Any) -> None:
    clock.preempt(np.array([peer]))


def _never(state: Any, lost: np.ndarray) -> np.ndarray:
    raise AssertionError("not settled here")


def _clock_run(
    links: tuple[Any, ...], group: dict[str, Any], pieces: bool, preemptions: list
) -> dict[str, Any]:
    env = simpy.Environment(initial_time=group["t0"])
    net = FlowNetwork(env, *links)
    clock = NetworkClock(env, net, group["present"].copy(), np.zeros(group["present"].size))
    sent: list[Any] = []
    if pieces:
        clock.streams = False
        raw = net.send

        def send(*args: Any, **kwargs: Any) -> Any:
            flow = raw(*args, **kwargs)
            sent.append(flow)
            return flow

        net.send = send  # type: ignore[method-assign]
    for at, peer in preemptions:
        timer = env.timeout(at - group["t0"])
        timer.callbacks.append(functools.partial(_preempt, clock, peer))
    plan = GroupPlan(np.zeros(0, dtype=np.intp), _never, lambda: group["flows"])
    env.run(env.process(clock.run(plan)))
    return {"end": env.now, "plan": plan, "clock": clock, "sent": sent}


def test_every_group_of_a_swarm_runs_alone_as_on_the_network_clock(
    swarm: tuple[tuple[Any, ...], list[dict[str, Any]]],
) -> None:
    links, groups = swarm
    rng = np.random.default_rng(0)
    seen = {"timed out": 0, "preempted": 0, "refused": 0}
    sizes = set()
    for group in groups:
        flows = group["flows"]
        members = np.unique(np.r_[flows.src, flows.dst])
        sizes.add(members.size)
        at = group["t0"] + rng.random() * (group["end"] - group["t0"])
        for preemptions in ([], [(at, int(rng.choice(members)))]):
            ref = _clock_run(links, group, True, preemptions)
            got = run_alone(flows, FlowNetwork(simpy.Environment(), *links), group["present"],
                            group["t0"], preemptions=preemptions)  # fmt: skip
            plan, clock = ref["plan"], ref["clock"]
            np.testing.assert_array_equal(got.delivered, plan.delivered)
            np.testing.assert_array_equal(got.timed_out, plan.timed_out)
            assert (got.messages, got.refused) == (clock.messages, clock.failed_messages)
            assert math.isclose(got.done_at, ref["end"], rel_tol=RTOL, abs_tol=0.0)
            for flow in ref["sent"]:
                i = flow.tag
                assert got.outcome[i] in (DELIVERED, FAILED, TIMED_OUT)
                assert math.isclose(got.sent_at[i], flow.start_s, rel_tol=RTOL, abs_tol=0.0)
                assert math.isclose(got.end_at[i], flow.end_s, rel_tol=RTOL, abs_tol=0.0)
            chunked = _clock_run(links, group, False, preemptions)
            np.testing.assert_array_equal(got.delivered, chunked["plan"].delivered)
            assert math.isclose(got.done_at, chunked["end"], rel_tol=RTOL, abs_tol=0.0)
            seen["timed out"] += int(got.timed_out.sum())
            seen["preempted"] += int((got.outcome == FAILED).sum())
            seen["refused"] += got.refused
    assert {2, 3, 4} <= sizes, sizes
    assert all(count > 0 for count in seen.values()), seen
