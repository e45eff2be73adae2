"""Invariants of gossip and sgp under ``schedule: async`` (asynchronous SGP), with churn
and compression.

Small runs of :class:`~sim.engine.mailbox.MailboxEngine` (2–10 peers on slow links, drawn
local work, graph, weights, push-sum and wire) under drawn exponential churn with every
rejoin rule. After every change of rows — a step, a message settled (delivered or
failed), a preemption, a return — the invariants the protocol declares for the run,
``invariants_in_force("network", rejoin, "async")``, are checked:

- ``sum``, ``weight_sum`` (push-sum): Σ over the peers' rows plus the shares in flight,
  to round-off; values a rejoin writes are accounted for;
- ``positive_weights``: every w > 0;
- ``hull``: every estimate (x, or x/w) inside the per-coordinate range of the inputs and
  of the rows rejoins drew;
- ``absent_unchanged``: a peer keeps its rows bit for bit from its preemption (its
  messages settled) until its return.

What the declaration leaves out is not checked: ``drift_reported`` (no rounds), the sum
of plain mixing, and the invariants on x that a lossy wire breaks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.mailbox import MailboxEngine
from sim.engine.netclock import NetworkClock
from sim.engine.schedules import engine_class
from sim.model.scenario.loader import scenario_from_mapping
from tests.property.test_stateful_invariants import REL, arrays

WIRES = ["none", "none", "fp16", "uniform8", "quantile8"]


@st.composite
def mailbox_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(["gossip", "sgp"]))
    protocol: dict[str, Any] = {"name": name, "compression": draw(st.sampled_from(WIRES))}
    if name == "gossip":
        protocol["topology"] = draw(st.sampled_from(["ring", "complete", "erdos_renyi"]))
        protocol["p"] = 0.5
        protocol["weights"] = draw(st.sampled_from(["uniform", "metropolis"]))
    else:
        protocol["push_sum"] = draw(st.booleans())
    compute_high = draw(st.sampled_from([0.0, 0.2, 0.6]))
    return {
        "name": "async-mailbox-props",
        "clock": "network",
        "schedule": "async",
        "seed": draw(st.integers(0, 2**16)),
        "peers": {
            "count": draw(st.integers(2, 10)),
            "upload": {"dist": "uniform", "low": 400, "high": 4000},
            "download": {"dist": "uniform", "low": 400, "high": 4000},
            "latency": {"dist": "uniform", "low": 0.01, "high": 0.05},
            "compute": {"dist": "uniform", "low": compute_high / 4, "high": compute_high},
        },
        "churn": {
            "model": "exponential",
            "mtbf": draw(st.sampled_from([1.0, 3.0])),
            "mttr": draw(st.sampled_from([0.3, 1.0])),
            "rejoin": draw(st.sampled_from(["keep", "reset", "fetch"])),
        },
        "vector": {"dim": draw(st.integers(1, 4)), "init": "normal"},
        "protocol": protocol,
        "stop": {"max_time": 6, "target_var": 0},
        "metrics": {"every": 1.0},
    }


class Checked(MailboxEngine):
    """Checks the invariants in force after every change of rows."""

    def start(self, clock: NetworkClock) -> None:
        self.in_force = self.protocol.invariants_in_force(
            "network", self.scenario.churn.rejoin, "async"
        )
        self.last = arrays(self.state)
        self.expected = self.mass(self.last)
        estimate = self.estimate()
        self.lo, self.hi = estimate.min(axis=0), estimate.max(axis=0)
        self.scale = max(1.0, *(float(np.abs(v).max()) for v in self.last.values()))
        self.frozen: dict[int, dict[str, np.ndarray]] = {}
        self.checks = self.preemptions = 0
        super().start(clock)
        self.freeze(np.flatnonzero(~clock.present))  # absent from the start

    def estimate(self) -> np.ndarray:
        return np.array(self.protocol.estimate(self.state), dtype=np.float64)

    def mass(self, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Σx and Σw over the rows, plus the push-sum shares in flight."""
        total = {key: value.sum(axis=0) for key, value in rows.items()}
        if "w" in rows:
            for share_x, _, share_w in self.in_flight.values():
                total["x"] = total["x"] + np.asarray(share_x, dtype=np.float64)
                total["w"] = total["w"] + np.asarray(share_w, dtype=np.float64)
        return total

    def freeze(self, peers: np.ndarray) -> None:
        for p in peers.tolist():
            self.frozen[p] = {key: value[p].copy() for key, value in self.last.items()}

    def check(self) -> None:
        now = arrays(self.state)
        tol = REL * now["x"].shape[0] * self.scale
        total = self.mass(now)
        if "sum" in self.in_force:
            np.testing.assert_allclose(total["x"], self.expected["x"], rtol=0, atol=tol)
        if "weight_sum" in self.in_force:
            np.testing.assert_allclose(total["w"], self.expected["w"], rtol=0, atol=tol)
        if "positive_weights" in self.in_force:
            assert (now["w"] > 0).all(), now["w"].min()
        if "hull" in self.in_force:
            estimate = self.estimate()
            slack = REL * np.maximum(np.maximum(np.abs(self.lo), np.abs(self.hi)), 1.0)
            assert (estimate >= self.lo - slack).all()
            assert (estimate <= self.hi + slack).all()
        if "absent_unchanged" in self.in_force:
            for p, rows in self.frozen.items():
                for key, value in rows.items():
                    np.testing.assert_array_equal(now[key][p], value, err_msg=f"peer {p}")
        self.last = now
        self.checks += 1

    # -- every change of rows -------------------------------------------------------------
    def _step(self, peer: int) -> None:
        super()._step(peer)
        self.check()

    def _ended(self, *args: Any, **kwargs: Any) -> None:
        super()._ended(*args, **kwargs)
        self.check()

    def down(self, peers: np.ndarray) -> None:
        super().down(peers)  # settles their messages: their rows may change now
        self.preemptions += 1
        self.check()
        self.freeze(peers)

    def up(self, peers: np.ndarray) -> None:
        """Back: what the rejoin wrote into their rows (``reset``, ``fetch``) since the
        last check is accounted for, as a new input."""
        if peers.size:
            now, before = arrays(self.state), self.last
            for key in self.expected:
                moved = now[key][peers].sum(axis=0) - before[key][peers].sum(axis=0)
                self.expected[key] = self.expected[key] + moved
            for p in peers.tolist():
                self.frozen.pop(p, None)
            estimate = self.estimate()[peers]
            self.lo = np.minimum(self.lo, estimate.min(axis=0))
            self.hi = np.maximum(self.hi, estimate.max(axis=0))
            self.scale = max(self.scale, *(float(np.abs(v[peers]).max()) for v in now.values()))
            self.last = now
        super().up(peers)
        self.check()


@settings(max_examples=30, deadline=None)
@given(mapping=mailbox_scenarios())
def test_mailbox_invariants_in_force_hold_under_async_churn_and_compression(mapping):
    sc = scenario_from_mapping(mapping)
    assert engine_class(sc) is MailboxEngine
    run = Checked(sc, sc.seed)
    run.simulate()
    assert "drift_reported" not in run.in_force
    print(
        "STAT",
        mapping["protocol"],
        mapping["churn"]["rejoin"],
        run.checks,
        run.preemptions,
        int(run.book.steps.sum()),
        len(run.in_force),
    )
