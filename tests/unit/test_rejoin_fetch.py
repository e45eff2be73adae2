"""``rejoin: fetch`` on the network clock: a peer preempted again while it downloads.

Regression tests for a bug the stateful machine found (issue 9): a peer restored with
``fetch`` and preempted again before its download completed retried the download and
became present while it was down; with nobody present to fetch from, the retry timer
did the same. And with nobody present, a returning peer joins with its own vector (it
used to retry every second, so a swarm that had gone down whole never came back).
"""

from __future__ import annotations

import numpy as np
import simpy

import sim
from protocols.contract import State
from sim.core.seeding import component_rng
from sim.engine.netclock import NetworkClock
from sim.model.rejoin import NetworkRejoin
from sim.network import FlowNetwork

N, DIM = 3, 8
RATE = 64.0  # bytes/s: a vector of 8 float64 takes 1 s to download


def setup() -> tuple[simpy.Environment, NetworkClock, NetworkRejoin, State]:
    scenario = sim.scenario_from_mapping(
        {
            "clock": "network",
            "peers": {"count": N},
            "churn": {"model": "none", "rejoin": "fetch"},
            "vector": {"dim": DIM},
            "protocol": {"name": "gossip"},
            "stop": {"max_time": 10},
        },
        {},
    )
    env = simpy.Environment()
    net = FlowNetwork(env, np.full(N, RATE), np.full(N, RATE), np.zeros(N))
    clock = NetworkClock(env, net, np.ones(N, dtype=bool), np.zeros(N))
    state = State(x=np.arange(N * DIM, dtype=float).reshape(N, DIM))
    rejoin = NetworkRejoin(scenario, component_rng(0, "rejoin"), clock, state)
    return env, clock, rejoin, state


def test_a_peer_preempted_while_fetching_stays_down_and_keeps_its_vector():
    env, clock, rejoin, state = setup()
    x0 = state.x.copy()
    clock.preempt(np.array([0]))
    rejoin.restore(np.array([0]))
    env.run(until=0.5)  # half-way through the download
    clock.preempt(np.array([0]))
    env.run(until=5.0)
    assert not clock.present[0]
    assert clock.net.flows_started == 1  # no retry
    np.testing.assert_array_equal(state.x, x0)
    rejoin.restore(np.array([0]))  # the next return fetches anew
    env.run(until=7.0)
    assert clock.present[0]
    assert clock.net.flows_started == 2
    assert any(np.array_equal(state.x[0], x0[p]) for p in (1, 2))


def test_a_source_preempted_mid_download_is_replaced_by_another():
    env, clock, rejoin, state = setup()
    clock.preempt(np.array([0]))
    rejoin.restore(np.array([0]))
    env.run(until=0.5)
    source = int(np.argmax(clock.net.bytes_out))  # the peer uploading to peer 0
    clock.preempt(np.array([source]))
    env.run(until=5.0)
    other = 3 - source  # peers 1 and 2: the one not preempted
    assert clock.present[0]
    np.testing.assert_array_equal(state.x[0], state.x[other])


def test_with_nobody_present_a_returning_peer_joins_with_its_own_vector():
    """hivemind's load_state_from_peers finds nobody and the averager goes on with its
    local state; before, the peer retried every second and a swarm that had gone down
    whole never came back."""
    env, clock, rejoin, state = setup()
    x0 = state.x.copy()
    clock.preempt(np.array([0, 1, 2]))
    env.run(until=1.0)
    rejoin.restore(np.array([0, 2]))
    assert clock.present.tolist() == [True, False, True]  # at once, both of them
    assert clock.net.flows_started == 0
    np.testing.assert_array_equal(state.x, x0)
    rejoin.restore(np.array([1]))  # now there is somebody to fetch from
    assert not clock.present[1]
    env.run(until=3.0)
    assert clock.present[1]
    assert clock.net.flows_started == 1
    assert any(np.array_equal(state.x[1], x0[p]) for p in (0, 2))


def test_a_peer_whose_only_source_fails_joins_with_its_own_vector():
    env, clock, rejoin, state = setup()
    x0 = state.x.copy()
    clock.preempt(np.array([0, 2]))
    rejoin.restore(np.array([0]))  # fetches from peer 1, the only one present
    env.run(until=0.5)
    clock.preempt(np.array([1]))
    env.run(until=0.5 + 1e-9)
    assert clock.present.tolist() == [True, False, False]
    np.testing.assert_array_equal(state.x[0], x0[0])


def test_a_whole_swarm_down_comes_back_under_fetch(tmp_path):
    """End to end: every peer down from 1 s to 3 s (a trace), ``rejoin: fetch``."""
    trace = tmp_path / "all_down.csv"
    trace.write_text("peer,down_s,up_s\n" + "".join(f"{p},1.0,3.0\n" for p in range(4)))
    scenario = sim.scenario_from_mapping(
        {
            "clock": "network",
            "peers": {"count": 4},
            "churn": {"model": "trace", "file": str(trace), "rejoin": "fetch"},
            "vector": {"dim": DIM},
            "protocol": {"name": "gossip"},
            "stop": {"max_time": 6, "target_var": None},
            "metrics": {"every": "0.5 s"},
        },
        {},
    )
    alive = sim.run(scenario, seed=0).metrics.set_index("time_s")["alive_fraction"]
    assert alive[2.0] == 0.0  # (2.0 and 6.0: rows at churn and at max_time)
    assert alive[alive.index > 3.0].size > 2
    assert (alive[alive.index > 3.0] == 1.0).all()
    assert alive[6.0] == 1.0
