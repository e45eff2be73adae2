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

import math
from typing import Any

import numpy as np
import pytest
import simpy

import sim
from sim.engine.netclock.alone import DELIVERED, FAILED, TIMED_OUT, run_alone
from sim.engine.netclock.replay import on_the_clock, recorded_groups
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
    return recorded_groups(lambda: sim.run(_scenario(), seed=5))


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
            t0, present = group["t0"], group["present"]
            ref = on_the_clock(links, flows, t0, present, True, preemptions)
            got = run_alone(flows, FlowNetwork(simpy.Environment(), *links), present, t0,
                            preemptions=preemptions)  # fmt: skip
            np.testing.assert_array_equal(got.delivered, ref["delivered"])
            np.testing.assert_array_equal(got.timed_out, ref["timed_out"])
            assert (got.messages, got.refused) == (ref["messages"], ref["refused"])
            assert math.isclose(got.done_at, ref["end"], rel_tol=RTOL, abs_tol=0.0)
            networked = np.flatnonzero(np.isfinite(ref["sent_at"]))
            assert np.isin(got.outcome[networked], (DELIVERED, FAILED, TIMED_OUT)).all()
            np.testing.assert_allclose(got.sent_at[networked], ref["sent_at"][networked],
                                       rtol=RTOL, atol=0.0)  # fmt: skip
            np.testing.assert_allclose(got.end_at[networked], ref["end_at"][networked],
                                       rtol=RTOL, atol=0.0)  # fmt: skip
            chunked = on_the_clock(links, flows, t0, present, False, preemptions)
            np.testing.assert_array_equal(got.delivered, chunked["delivered"])
            assert math.isclose(got.done_at, chunked["end"], rel_tol=RTOL, abs_tol=0.0)
            seen["timed out"] += int(got.timed_out.sum())
            seen["preempted"] += int((got.outcome == FAILED).sum())
            seen["refused"] += got.refused
    assert {2, 3, 4} <= sizes, sizes
    assert all(count > 0 for count in seen.values()), seen
