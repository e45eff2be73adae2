"""``network.sharing: rtt_weighted`` needs a positive route latency to weigh each flow by:
a run whose peers have no latency is refused in one line naming the key, and a network
error raised inside a SimPy process keeps its type and message (SimPy re-raises copies
made as ``type(e)(*e.args)``)."""

from __future__ import annotations

import pytest
import simpy

import sim
from sim.core.errors import ScenarioError
from sim.network import FlowNetwork
from sim.network.faults import NetworkError


def test_rtt_weighted_with_zero_latency_peers_is_refused_naming_the_key():
    sc = sim.scenario_from_mapping(
        {
            "name": "rtt0",
            "clock": "network",
            "peers": {"count": 8, "upload": "10 Mbit/s", "download": "10 Mbit/s", "latency": 0},
            "network": {"sharing": "rtt_weighted"},
            "protocol": {"name": "pairwise_gossip"},
            "stop": {"max_time": 2},
        }
    )
    with pytest.raises(ScenarioError, match=r"^network\.sharing: expected maxmin, or a positive"):
        sim.run(sc)


def test_a_network_error_inside_a_process_keeps_its_type_and_message():
    env = simpy.Environment()
    net = FlowNetwork(env, [1e6, 1e6], [1e6, 1e6], [0.0, 0.0], sharing="rtt_weighted")

    def sender():
        yield env.timeout(1.0)
        net.send(0, 1, 100.0)

    env.process(sender())
    with pytest.raises(NetworkError, match=r"^send\(src, dst\): expected a positive route latency"):
        env.run()
