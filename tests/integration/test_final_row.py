"""The final metrics row of a network-clock run (recorded where the run ends: at
``stop.max_time``, a target crossed between samples, an interrupt) is the sample a
regular sampler would record at that instant: same presence mask, state brought to now.

A jump of ``var_alive`` (or ``var``, ``mean_drift``) in that row is the churn between the
last regular row and the end — a returning peer's stale vector joining ``var_alive``
under ``rejoin: keep``, a ``fetch`` arrival — not a different measurement.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

import sim
from sim.engine import run

END_S = 97.3  # not a multiple of the coarse interval: the last row is the end's own
SCENARIO: dict[str, Any] = {
    "name": "final-row",
    "clock": "network",
    "peers": {
        "count": 32,
        "classes": [
            {"name": "dc", "fraction": 0.25, "upload": "1 Gbit/s", "latency": "5 ms"},
            {"name": "home", "fraction": 0.75, "upload": "10 Mbit/s", "latency": "30 ms"},
        ],
    },
    "churn": {"model": "exponential", "mtbf": "40 s", "mttr": "10 s"},
    "vector": {"dim": 16, "dtype": "float64"},
    "stop": {"max_time": END_S, "max_rounds": None, "target_var": 0},
}


@pytest.mark.parametrize("rejoin", ["keep", "fetch", "reset"])
@pytest.mark.parametrize("protocol", ["a2cid2", "pairwise_gossip", "push_sum"])
def test_the_final_row_is_what_a_sample_at_the_end_records(protocol: str, rejoin: str):
    rows = []
    for every in (5.0, END_S / 20):  # the end: off the grid, then on it (to rounding)
        mapping = {
            **SCENARIO,
            "churn": {**SCENARIO["churn"], "rejoin": rejoin},
            "protocol": {"name": protocol, "topology": "ring"},
            "metrics": {"every": every},
        }
        metrics = run(sim.scenario_from_mapping(mapping)).metrics
        assert metrics["time_s"].iloc[-1] == END_S
        rows.append(metrics.iloc[[-1]].reset_index(drop=True))
    pd.testing.assert_frame_equal(rows[0], rows[1])
