"""Network-clock figure G1 for barrier rounds (performance.md; issue 3's E1-style figure).

Gossip on a ring of 1024 peers (dim 64, 100 Mbit/s, 10 ms) on the network clock:
messages simulated per wall second, over raw SimPy timeouts per second measured in the
same process (one process yielding ``env.timeout`` in a loop): how close the flow
network and the barrier clock come to SimPy's own event rate. The rounds are one-shot
(:mod:`sim.engine.round_solver`); the same workload on the general path (a ``Flow``, a
SimPy event and a callback per message) is measured in the same run for comparison.
"""

from __future__ import annotations

import time

import simpy

import sim
from sim.engine import round_solver


def simpy_timeouts_per_s(count: int = 200_000) -> float:
    """Raw SimPy: one process yielding ``count`` timeouts."""
    env = simpy.Environment()

    def ticker():
        for _ in range(count):
            yield env.timeout(1.0)

    env.process(ticker())
    started = time.perf_counter()
    env.run()
    return count / (time.perf_counter() - started)


def gossip_messages_per_s(rounds: int = 50, one_shot: bool = True) -> float:
    """Messages per wall second of ring gossip on the network clock (``one_shot``: with
    one-shot rounds, else every round on the general path)."""
    sc = sim.scenario_from_mapping(
        {
            "name": "e1-net",
            "clock": "network",
            "peers": {"count": 1024, "upload": "100 Mbit/s", "latency": "10 ms"},
            "vector": {"dim": 64},
            "protocol": {"name": "gossip", "topology": "ring"},
            "stop": {"max_rounds": rounds, "target_var": 0},
        }
    )
    switch = round_solver.ENABLED
    round_solver.ENABLED = one_shot
    try:
        started = time.perf_counter()
        result = sim.run(sc)
        return result.summary["messages"] / (time.perf_counter() - started)
    finally:
        round_solver.ENABLED = switch


def run() -> list[tuple[str, float, str, str]]:
    gossip_messages_per_s(rounds=2)  # imports and the network kernels, outside the timing
    raw = simpy_timeouts_per_s()
    gossip = gossip_messages_per_s()
    general = gossip_messages_per_s(one_shot=False)
    return [
        ("raw SimPy timeouts per second", raw, "1/s", "reference"),
        ("gossip (network clock) messages per second", gossip, "1/s", "ring N=1024 dim 64"),
        ("G1 gossip messages/s / SimPy timeouts/s", gossip / raw, "ratio", "target >= 0.3"),
        ("G1 on the general path (no one-shot)", general / raw, "ratio", "same run"),
    ]
