"""Async random_groups meets the same groups every step when every peer's timing is
identical (ties on the expiration go to the fixed DHT ids, as in hivemind), and mixes
once the peers' local work varies, from peer to peer or from step to step
(``peers.compute_jitter``; docs/design.md, "Asynchronous swarms", item 6)."""

from __future__ import annotations

import sim


def final_var(compute: object, jitter: float = 0.0) -> tuple[float, float]:
    scenario = sim.scenario_from_mapping(
        {
            "clock": "network",
            "schedule": "async",
            "peers": {"count": 8, "compute": compute, "compute_jitter": jitter},
            "vector": {"dim": 16},
            "protocol": {"name": "random_groups", "group_size": 4},
            "stop": {"max_time": 10, "target_var": None},
        },
        {},
    )
    var = sim.run(scenario, seed=0).metrics["var"]
    return float(var.iloc[2]), float(var.iloc[-1])


def test_identical_timing_meets_the_same_groups_every_step():
    early, late = final_var("0.5 s")
    assert late == early > 0.01  # two fixed groups of 4: the between-group variance stays


def test_varied_local_work_mixes():
    early, late = final_var({"dist": "lognormal", "median": "0.5 s", "sigma": 0.3})
    assert late < early / 100


def test_step_to_step_jitter_of_equal_peers_mixes():
    early, late = final_var("0.5 s", jitter=0.3)
    assert late < early / 100
