"""``schedule: async`` for gossip and sgp: asynchronous SGP (issue 12 part 3).

Every peer sends at its own step and mixes what has arrived since its last step
(:mod:`sim.engine.mailbox`): push-sum's mass is exact with the shares in flight, plain
mixing never leaves the hull, a small ring converges, runs are deterministic, and the
refusal is gone."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sim
from sim.engine.mailbox import MailboxEngine
from sim.engine.schedules import engine_class

CHURN = {"model": "exponential", "mtbf": 4, "mttr": 1, "rejoin": "keep"}


def scenario(protocol: dict[str, Any], **parts: Any) -> Any:
    data: dict[str, Any] = {
        "name": "mailbox",
        "clock": "network",
        "schedule": "async",
        "peers": {
            "count": 12, "upload": 1e6, "download": 1e6,
            "latency": {"dist": "uniform", "low": 0.005, "high": 0.05},
            "classes": [{"name": "fast", "fraction": 0.5, "compute": 0.1},
                        {"name": "slow", "fraction": 0.5, "compute": 0.35}],
        },
        "vector": {"dim": 8},
        "protocol": protocol,
        "stop": {"max_time": 30, "target_var": 0},
        "metrics": {"every": 0.5},
    }  # fmt: skip
    data.update(parts)
    return sim.scenario_from_mapping(data, {})


class Checked(MailboxEngine):
    """Calls ``check`` after every step and every end of a message."""

    def __init__(self, *args: Any, check: Any) -> None:
        super().__init__(*args)
        self.check, self.returns, self.busiest = check, 0, 0

    def _step(self, peer: int) -> None:
        super()._step(peer)
        self.busiest = max(self.busiest, len(self.in_flight))
        self.check(self)

    def _ended(self, event: Any, src: int, dst: int) -> None:
        self.returns += not event.ok
        super()._ended(event, src, dst)
        self.check(self)


def mass(engine: MailboxEngine) -> tuple[np.ndarray, float]:
    """Σx and Σw over the peers and the shares in flight."""
    x = np.asarray(engine.state.x).sum(axis=0)
    w = float(np.asarray(engine.state.extra["w"]).sum())
    for share_x, _, share_w in engine.in_flight.values():
        x = x + np.asarray(share_x)
        w += float(np.asarray(share_w).sum())
    return x, w


@pytest.mark.parametrize("churn", [None, CHURN])
def test_async_sgp_push_sum_keeps_mass_with_shares_in_flight(churn):
    sc = scenario({"name": "sgp", "push_sum": True}, **({"churn": churn} if churn else {}))
    assert engine_class(sc) is MailboxEngine
    seen: list[tuple[np.ndarray, float]] = []
    engine = Checked(sc, 3, check=lambda e: seen.append(mass(e)))
    x0, w0 = mass(engine)
    engine.simulate(None)
    assert len(seen) > 100
    assert engine.busiest > 0
    if churn is not None:
        assert engine.returns > 0  # failed flows gave their shares back
    for x, w in seen:
        np.testing.assert_allclose(x, x0, rtol=1e-12, atol=1e-12)
        assert w == pytest.approx(w0, rel=1e-12)
    assert (np.asarray(engine.state.extra["w"]) > 0).all()


@pytest.mark.parametrize(
    "protocol",
    [{"name": "gossip", "topology": "ring"}, {"name": "gossip", "weights": "metropolis"},
     {"name": "sgp"}],
)  # fmt: skip
def test_async_plain_mixing_never_leaves_the_hull(protocol):
    """The range of every value held (the peers' rows, the mailboxes, the messages in
    flight) never widens, and it shrinks."""
    ranges: list[tuple[np.ndarray, np.ndarray]] = []

    def check(e: MailboxEngine) -> None:
        held = [np.asarray(e.state.x)]
        held += [np.asarray(v)[None] for box in e.mailboxes.values() for v in box.values()]
        held += [np.asarray(v)[None] for v in e.in_flight.values()]
        values = np.concatenate(held)
        ranges.append((values.min(axis=0), values.max(axis=0)))

    engine = Checked(scenario(protocol, churn=CHURN), 5, check=check)
    x0 = np.asarray(engine.state.x).copy()
    lo, hi = x0.min(axis=0), x0.max(axis=0)
    engine.simulate(None)
    assert len(ranges) > 100
    assert engine.returns > 0
    for low, high in ranges:
        assert (low >= lo - 1e-12).all()
        assert (high <= hi + 1e-12).all()
        lo, hi = low, high
    assert (hi - lo < 0.5 * (x0.max(axis=0) - x0.min(axis=0))).all()


@pytest.mark.parametrize(
    "protocol",
    [{"name": "gossip", "topology": "ring"}, {"name": "sgp"},
     {"name": "sgp", "push_sum": True}],
)  # fmt: skip
def test_async_mixing_converges_on_a_small_ring(protocol):
    sc = scenario(protocol, stop={"max_time": 200, "target_var": 1e-8})
    result = sim.run(sc)
    assert result.summary["stop_reason"] == "target"
    assert result.summary["steps_min"] < result.summary["steps_max"]  # peers ran apart
    var = result.metrics["var"].to_numpy()
    assert var[-1] < 1e-8 < var[0]


@pytest.mark.parametrize("protocol", [{"name": "gossip"}, {"name": "sgp", "push_sum": True}])
def test_async_mixing_is_deterministic(protocol):
    sc = scenario(protocol, churn=CHURN, stop={"max_time": 10, "target_var": 0})
    first, second = sim.run(sc, seed=7), sim.run(sc, seed=7)
    assert first.metrics.equals(second.metrics)
    assert np.array_equal(np.asarray(first.state.x), np.asarray(second.state.x))
    assert not first.metrics.equals(sim.run(sc, seed=8).metrics)


def test_async_gossip_mixes_only_arrived_values():
    """Two peers, no local work: each step sends, then mixes the value that arrived
    before it; with 1 s of latency nothing has arrived at the first steps."""
    sc = scenario(
        {"name": "gossip", "topology": "ring"},
        peers={"count": 2, "upload": 1e9, "download": 1e9, "latency": 0.5, "compute": 0.4},
        stop={"max_time": 1.0, "target_var": 0},
        metrics={"every": 0.1},
    )
    result = sim.run(sc)
    var = result.metrics.set_index("time_s")["var"]
    # the first values arrive at 0.4 + 1.0 (two route latencies of 0.5 each) > 1.0
    assert var.iloc[-1] == var.iloc[0]
