"""Each churn model's ``expected_absent_fraction`` (shown by ``avsim info``) against the
fraction of peers its schedule actually keeps absent, measured over a long run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sim.model.churn.schedule import build_schedule
from sim.model.scenario import scenario_from_mapping

N_PEERS = 200
CLASSES = np.repeat([0, 1], [50, 150])
NAMES = ["reserved", "spot"]


def churn_of(churn: dict[str, Any]) -> Any:
    peers = {"count": N_PEERS, "classes": [{"name": "reserved", "fraction": 0.25},
                                           {"name": "spot", "fraction": 0.75}]}  # fmt: skip
    return scenario_from_mapping({"peers": peers, "churn": churn, "protocol": {"name": "gossip"}})


def measured_absent(churn: Any, horizon: float, step: float, seed: int = 1) -> float:
    schedule = build_schedule(churn, N_PEERS, np.random.default_rng(seed),
                              peer_classes=CLASSES, class_names=NAMES)  # fmt: skip
    times = np.arange(step / 2, horizon, step)
    return float(np.mean([1.0 - schedule.present_at(t).mean() for t in times]))


@pytest.mark.parametrize(
    ("churn", "expected"),
    [
        ({"model": "none"}, 0.0),
        ({"model": "bernoulli", "p": 0.1}, 0.1),
        ({"model": "exponential", "mtbf": 10, "mttr": 2}, 2 / 12),
        # 20 of 200 peers per wave: each hit at rate 0.5 · 0.1, down if hit in the last 2 s
        ({"model": "waves", "rate": 0.5, "fraction": 0.1, "duration": 2}, -np.expm1(-0.1)),
        # 15 of the 150 spot peers per wave, none of the 50 reserved ones
        ({"model": "waves", "rate": 0.5, "fraction": 0.1, "duration": 2, "class": "spot"},
         -np.expm1(-0.1) * 0.75),
    ],
)  # fmt: skip
def test_the_expected_fraction_is_what_the_schedule_keeps_absent(churn, expected):
    model = churn_of(churn).churn
    assert model.expected_absent_fraction(CLASSES, NAMES) == pytest.approx(expected, rel=1e-12)
    assert measured_absent(model, horizon=4000.0, step=0.5) == pytest.approx(expected, rel=0.08,
                                                                            abs=1e-12)  # fmt: skip


def test_a_trace_is_averaged_over_the_run_or_its_own_span(tmp_path: Path):
    path = tmp_path / "trace.csv"
    path.write_text("peer,down_s,up_s\n0,1,2\n1,2,inf\n")
    churn = scenario_from_mapping(
        {"peers": {"count": 4}, "churn": {"model": "trace", "file": str(path)},
         "protocol": {"name": "gossip"}}
    ).churn  # fmt: skip
    classes = np.zeros(4, dtype=int)
    # over 10 s: peer 0 away 1 s, peer 1 away 8 s, out of 4 peers × 10 s
    assert churn.expected_absent_fraction(classes, horizon_s=10.0) == pytest.approx(9 / 40)
    # without a horizon: until the trace's last finite time (2 s)
    assert churn.expected_absent_fraction(classes) == pytest.approx(1 / 8)
