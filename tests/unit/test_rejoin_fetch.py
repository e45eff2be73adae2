"""``rejoin: fetch`` on the network clock: a peer preempted again while it downloads.

Regression tests for a bug the stateful machine found (issue 9): a peer restored with
``fetch`` and preempted again before its download completed retried the download and
became present while it was down; with nobody present to fetch from, the retry timer
did the same.
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


def test_a_retry_waiting_for_a_source_gives_up_when_the_peer_goes_down_again():
    env, clock, rejoin, state = setup()
    x0 = state.x.copy()
    clock.preempt(np.array([0, 1, 2]))
    rejoin.restore(np.array([0]))  # nobody to fetch from: retry after retry_s
    env.run(until=rejoin.retry_s / 2)
    clock.preempt(np.array([0]))
    clock.present[1] = True  # a source is back before the retry fires (as with ``keep``)
    env.run(until=5.0)
    assert not clock.present[0]
    np.testing.assert_array_equal(state.x[0], x0[0])
