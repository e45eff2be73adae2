"""Wall time per flow on the network clock: the constant of the slow-run warning.

Runs a few network-clock scenarios of different protocols (small vectors, so that the
arithmetic is negligible) and reports, for each, the wall microseconds per message
(flow) simulated and how many messages :func:`sim.engine.workload.estimate_events` predicted
(an upper bound: the estimate over the messages actually sent). The guard's
:data:`sim.engine.workload.FLOW_COST_S` is chosen from these figures.
"""

from __future__ import annotations

import time
from typing import Any

import sim
from sim.engine.workload import estimate_events

BASE: dict[str, Any] = {
    "clock": "network",
    "peers": {"count": 512, "upload": "100 Mbit/s", "latency": "10 ms"},
    "vector": {"dim": 64},
    "stop": {"max_rounds": 20, "target_var": 0},
}
CASES: dict[str, dict[str, Any]] = {
    "gossip ring": {"protocol": {"name": "gossip", "topology": "ring"}},
    "sgp": {"protocol": {"name": "sgp"}},
    "random_groups g=8": {"protocol": {"name": "random_groups", "group_size": 8}},
    "moshpit 8x8": {"protocol": {"name": "moshpit", "group_size": 8}},
    "ring_allreduce N=64": {
        "peers": {"count": 64, "upload": "100 Mbit/s", "latency": "10 ms"},
        "protocol": {"name": "ring_allreduce"},
        "stop": {"max_rounds": 5, "target_var": 0},
    },
    "pairwise_gossip": {
        "protocol": {"name": "pairwise_gossip"},
        "stop": {"max_rounds": None, "max_time": 20, "target_var": 0},
    },
    "push_sum": {
        "protocol": {"name": "push_sum"},
        "stop": {"max_rounds": None, "max_time": 20, "target_var": 0},
    },
    "a2cid2": {
        "protocol": {"name": "a2cid2"},
        "stop": {"max_rounds": None, "max_time": 20, "target_var": 0},
    },
}


def measure(case: dict[str, Any]) -> tuple[float, float]:
    """(wall µs per message, estimated / actual messages) of one scenario."""
    sc = sim.scenario_from_mapping({**BASE, **case, "name": "events"})
    started = time.perf_counter()
    result = sim.run(sc)
    wall = time.perf_counter() - started
    messages = max(1, int(result.summary["messages"]))
    estimated, _, _ = estimate_events(sc)
    return wall / messages * 1e6, estimated / messages


def run() -> list[tuple[str, float, str, str]]:
    figures = []
    for name, case in CASES.items():
        us, ratio = measure(case)
        figures.append((f"{name}: wall per flow", us, "µs", "sim.engine.workload.FLOW_COST_S"))
        figures.append((f"{name}: estimated / actual flows", ratio, "ratio", ">= 1"))
    return figures
