"""moshpit and random_groups through a compressing wire under ``schedule: async``.

The groups' butterfly under async is the barrier round's (``GroupProtocol.group_plan``),
so the wire's error must stay as small as the barrier test allows
(``tests/integration/test_moshpit_network.py::test_compression_shrinks_bytes_and_its_error_is_measured``:
RMS distance to the exact run below 0.05 from a standard normal start, a mean drift above
the exact run's, var below 1e-3); random_groups runs the same arithmetic with equal shares.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sim

LOSSY = ("fp16", "uniform8", "quantile8")
PROTOCOLS = {
    "moshpit": {"name": "moshpit", "group_size": 2, "grid_dims": 3},
    "random_groups": {"name": "random_groups", "group_size": 4},
}


def scenario(protocol: dict[str, Any], compression: str) -> Any:
    """8 peers on equal 100 Mbit/s links, 0.05–0.2 s of local work (so that groups mix:
    with equal local work random_groups meets the same groups at every step), 2^12
    float64 (parts of 1024 coordinates or more: every wire is lossy on them), 3 s."""
    return sim.scenario_from_mapping(
        {
            "name": "async-wire",
            "clock": "network",
            "schedule": "async",
            "peers": {
                "count": 8,
                "upload": 12.5e6,
                "download": 12.5e6,
                "latency": 0.005,
                "compute": {"dist": "uniform", "low": 0.05, "high": 0.2},
            },
            "vector": {"dim": 4096, "init": "normal"},
            "protocol": {**protocol, "compression": compression, "matchmaking_time": 0.5},
            "stop": {"max_time": 3, "target_var": 0},
        }
    )


@pytest.fixture(scope="module")
def exact() -> dict[str, sim.RunResult]:
    return {name: sim.run(scenario(p, "none")) for name, p in PROTOCOLS.items()}


@pytest.mark.parametrize("method", LOSSY)
@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_async_groups_through_a_lossy_wire_keep_the_barrier_error_bound(name, method, exact):
    plain = exact[name]
    packed = sim.run(scenario(PROTOCOLS[name], method))
    summary = packed.summary
    assert summary["stop_reason"] == "max_time"
    assert summary["groups_run"] > 0
    assert summary["steps_min"] >= 2
    per_group = summary["bytes_sent"] / summary["groups_run"]
    assert per_group < plain.summary["bytes_sent"] / plain.summary["groups_run"]  # compressed
    error = float(np.sqrt(np.mean((np.asarray(packed.state.x) - np.asarray(plain.state.x)) ** 2)))
    assert 0 < error < 0.05
    assert plain.summary["final_mean_drift"] < 1e-12  # the exact wire keeps the sum
    assert summary["final_mean_drift"] > plain.summary["final_mean_drift"]
    assert summary["final_var"] < 1e-3
