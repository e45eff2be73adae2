"""Exact times to loss targets on the network clock, and ``stop.target_loss``.

The brute force: F(x̄) evaluated with :meth:`~sim.model.training.Trainer.loss` (one
model at a time) after every change of the state the tracker sees (every batch of
gradient steps, every churn event, the peer loops' averaging steps) and after every
push-sum exchange, x̄ read from the protocol's rows at that instant.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import sim
import sim.engine.observe.loss_trail as loss_trail
from protocols._async_net import _Push
from sim.core.errors import ScenarioError
from sim.engine.observe.tracker import Tracker
from sim.engine.schedules import engine_for

QUADRATIC = {"name": "quadratic", "condition": 5, "heterogeneity": 3.0, "noise": 0.5,
             "local_steps": 1, "optimizer": {"lr": 0.3}}  # fmt: skip
LOGISTIC = {"name": "logistic", "data": "digits", "batch_size": 8, "local_steps": 1,
            "optimizer": {"lr": 0.2, "momentum": 0.5}}  # fmt: skip
STRAGGLERS = {"dist": "uniform", "low": 0.05, "high": 0.3}


def scenario(workload: dict, protocol: dict, schedule: str = "async", peers: int = 6,
             compute: object = STRAGGLERS, targets: list | None = None,
             stop: dict | None = None, **extra: object) -> sim.Scenario:  # fmt: skip
    targets = [{"loss": 1e-12}] if targets is None else targets
    mapping = {
        "name": "loss_times", "clock": "network", "schedule": schedule,
        "peers": {"count": peers, "compute": compute}, "protocol": protocol,
        "workload": workload, "stop": {"max_time": 6, **(stop or {})},
        "metrics": {"every": 1.0, "targets": targets}, **extra,
    }  # fmt: skip
    return sim.scenario_from_mapping(mapping)


def brute_force(sc: sim.Scenario, monkeypatch, seed: int = 0) -> tuple[list, list, object]:
    """Run ``sc``; [(time, F(x̄))] after every tracker change, the rows, the result."""
    seen: list[tuple[float, float]] = []
    original, on_end = Tracker.change, _Push.on_end
    engines = []

    def change(self, rows, apply):
        original(self, rows, apply)
        record("change")

    def push_ended(self, event):
        on_end(self, event)
        record("exchange")

    def record(kind: str):
        engine = engines[0]
        exists = engine.exists
        now = float(engine.env.now)
        values = engine.protocol.estimate_rows(engine.state, np.flatnonzero(exists))
        x = values.a
        if values.d is not None:
            x = x - values.d * np.exp(-engine.protocol.decay_rate * (now - values.since))[:, None]
        seen.append((now, engine.trainer.loss(x.mean(axis=0)), kind))

    monkeypatch.setattr(Tracker, "change", change)
    monkeypatch.setattr(_Push, "on_end", push_ended)
    engine = engine_for(sc, seed)
    engines.append(engine)
    record("start")  # the state at time 0, as the first sample sees it
    engine.simulate()
    monkeypatch.undo()
    return seen, engine.observer.recorder, engine


def first_below(seen: list[tuple[float, float, str]], v: float) -> float | None:
    return next((t for t, f, _ in seen if f < v), None)


def between_samples(seen: list[tuple[float, float, str]], kind: str | None = None) -> list[float]:
    """Loss levels whose first crossing is strictly between two samples (1 s apart),
    at a change of ``kind`` when given."""
    levels = []
    for t, f, k in seen:
        v = f * (1 + 1e-9)
        if first_below(seen, v) == t and not math.isclose(t, round(t)) and kind in (None, k):
            levels.append(v)
    return levels


CASES = [
    pytest.param(QUADRATIC, {"name": "pairwise_gossip", "topology": "ring", "rate": 4},
                 "async", id="quadratic-pairwise_gossip"),
    pytest.param(LOGISTIC, {"name": "pairwise_gossip", "topology": "ring", "rate": 4},
                 "async", id="logistic-pairwise_gossip"),
    pytest.param(QUADRATIC, {"name": "a2cid2", "topology": "ring", "rate": 4}, "async",
                 id="quadratic-a2cid2"),
    pytest.param(LOGISTIC, {"name": "ring_allreduce"}, "barrier", id="logistic-ring_allreduce"),
    pytest.param(QUADRATIC, {"name": "ring_allreduce"}, "async",
                 id="quadratic-ring_allreduce-async"),
    pytest.param(QUADRATIC, {"name": "moshpit", "group_size": 2}, "barrier",
                 id="quadratic-moshpit-barrier"),
    pytest.param(QUADRATIC, {"name": "moshpit", "group_size": 2}, "async",
                 id="quadratic-moshpit-async"),
    pytest.param(LOGISTIC, {"name": "gossip"}, "async", id="logistic-gossip-async"),
    pytest.param(QUADRATIC, {"name": "sgp"}, "async", id="quadratic-sgp-async"),
    pytest.param(QUADRATIC, {"name": "push_sum", "topology": "ring", "rate": 4}, "async",
                 id="quadratic-push_sum"),
]  # fmt: skip


@pytest.mark.parametrize(("workload", "protocol", "schedule"), CASES)
def test_the_time_to_a_loss_is_the_first_change_below_it(workload, protocol, schedule,
                                                         monkeypatch):  # fmt: skip
    seen, _, _ = brute_force(scenario(workload, protocol, schedule), monkeypatch)
    levels = between_samples(seen)
    assert len(levels) >= 3  # crossings between samples exist to be timed
    picked = sorted({levels[0], levels[len(levels) // 2], levels[-1]}, reverse=True)
    result = sim.run(scenario(workload, protocol, schedule, targets=[{"loss": v} for v in picked]))
    s = result.summary
    assert s["loss_resolution"] == "event"
    for v in picked:
        expected = first_below(seen, v)
        assert s[f"time_to_loss_{v:g}_s"] == expected
        assert s[f"rounds_to_loss_{v:g}"] is not None
    # between two samples (a sample-resolution time would be a later multiple of 1 s)
    assert all(s[f"time_to_loss_{v:g}_s"] % 1.0 for v in picked)


def test_churn_events_that_move_the_mean_are_timed(monkeypatch):
    churn = {"model": "bernoulli", "p": 0.2, "rejoin": "reset"}
    protocol = {"name": "pairwise_gossip", "topology": "ring", "rate": 4}
    sc = scenario(QUADRATIC, protocol, churn=churn, peers=8)
    seen, _, _ = brute_force(sc, monkeypatch)
    levels = between_samples(seen)
    picked = sorted({levels[0], levels[len(levels) // 2], levels[-1]}, reverse=True)
    s = sim.run(scenario(QUADRATIC, protocol, churn=churn, peers=8,
                         targets=[{"loss": v} for v in picked])).summary  # fmt: skip
    assert s["loss_resolution"] == "event"
    for v in picked:
        assert s[f"time_to_loss_{v:g}_s"] == first_below(seen, v)


def test_push_sum_exchanges_are_followed_with_a_variance_target_too(monkeypatch):
    # the tracker listens to the exchanges until var 1e-3 is crossed, then retires: the
    # trail still sees every exchange
    protocol = {"name": "push_sum", "topology": "ring", "rate": 4}
    seen, _, _ = brute_force(scenario(QUADRATIC, protocol), monkeypatch)
    levels = between_samples(seen, "exchange")  # crossed at an exchange, not a step
    assert len(levels) >= 2
    picked = sorted({levels[0], levels[-1]}, reverse=True)
    targets = [1e-3, *({"loss": v} for v in picked)]
    s = sim.run(scenario(QUADRATIC, protocol, targets=targets)).summary
    assert s["loss_resolution"] == "event"
    assert s["time_to_1e-03_s"] is not None
    assert s["time_to_1e-03_s"] < s[f"time_to_loss_{picked[-1]:g}_s"]
    for v in picked:
        assert s[f"time_to_loss_{v:g}_s"] == first_below(seen, v)


def test_a_small_buffer_gives_the_same_times(monkeypatch):
    sc = scenario(LOGISTIC, {"name": "pairwise_gossip", "topology": "ring", "rate": 4},
                  targets=[{"loss": 1.8}, {"loss": 1.0}, {"loss": 0.6}])  # fmt: skip
    wide = sim.run(sc).summary
    monkeypatch.setattr(loss_trail, "BUFFER_BYTES", 8 * 650 * 2)  # two snapshots
    narrow = sim.run(sc).summary
    for v in ("1.8", "1", "0.6"):
        assert wide[f"time_to_loss_{v}_s"] is not None
        assert narrow[f"time_to_loss_{v}_s"] == wide[f"time_to_loss_{v}_s"]


@pytest.mark.parametrize(("workload", "protocol", "schedule"), CASES[1:])
def test_stop_target_loss_ends_the_run_at_that_instant(workload, protocol, schedule,
                                                        monkeypatch):  # fmt: skip
    seen, _, _ = brute_force(scenario(workload, protocol, schedule), monkeypatch)
    v = between_samples(seen)[len(between_samples(seen)) // 2]
    result = sim.run(scenario(workload, protocol, schedule, stop={"target_loss": v}))
    s = result.summary
    t = first_below(seen, v)
    assert s["stop_reason"] == "target"
    assert s["sim_time_s"] == t == s[f"time_to_loss_{v:g}_s"]
    last = result.metrics.iloc[-1]
    assert last["time_s"] == t
    # the last row has the events of that instant scheduled before the run's end: a
    # mailbox peer's mix may follow the post that took F(x̄) below v
    assert any(math.isclose(last["loss"], f, rel_tol=1e-12) for u, f, _ in seen if u == t)
    assert (result.metrics["loss"].iloc[:-1] >= v).all()


def test_stop_target_loss_on_the_rounds_clock_stops_at_the_round():
    base = {"name": "lt_rounds", "peers": {"count": 8}, "protocol": {"name": "gossip"},
            "workload": QUADRATIC, "stop": {"max_rounds": 40},
            "metrics": {"targets": [{"loss": 1.6}]}}  # fmt: skip
    free = sim.run(sim.scenario_from_mapping(base)).summary
    assert free["rounds_to_loss_1.6"] is not None
    stop = {"max_rounds": 40, "target_loss": 1.6}
    stopped = sim.run(sim.scenario_from_mapping({**base, "stop": stop}))
    assert stopped.summary["stop_reason"] == "target"
    assert stopped.summary["rounds"] == free["rounds_to_loss_1.6"] < 40
    assert stopped.summary["rounds_to_loss_1.6"] == free["rounds_to_loss_1.6"]
    assert "loss_resolution" not in stopped.summary  # the rounds clock: per round


def test_stop_target_loss_alone_adds_its_fields():
    protocol = {"name": "pairwise_gossip", "topology": "ring", "rate": 4}
    sc = sim.scenario_from_mapping({
        "name": "lt", "clock": "network", "peers": {"count": 4, "compute": 0.1},
        "protocol": protocol, "workload": QUADRATIC,
        "stop": {"max_time": 3, "target_loss": 1e-9},
    })  # fmt: skip
    s = sim.run(sc).summary
    assert s["time_to_loss_1e-09_s"] is None
    assert s["stop_reason"] == "max_time"
    assert s["loss_resolution"] == "event"


def test_same_seed_same_times():
    sc = scenario(LOGISTIC, {"name": "a2cid2", "topology": "ring", "rate": 4},
                  targets=[{"loss": 1.5}, {"loss": 0.8}], stop={"target_loss": 0.5},
                  churn={"model": "bernoulli", "p": 0.1, "rejoin": "fetch"})  # fmt: skip
    a, b = sim.run(sc, seed=3), sim.run(sc, seed=3)
    drop = ["wall_time_s"]
    assert {k: v for k, v in a.summary.items() if k not in drop} == {
        k: v for k, v in b.summary.items() if k not in drop
    }
    pd.testing.assert_frame_equal(a.metrics, b.metrics)


def test_loss_targets_do_not_change_the_run():
    protocol = {"name": "a2cid2", "topology": "ring", "rate": 4}
    churn = {"model": "bernoulli", "p": 0.1, "rejoin": "reset"}
    plain = sim.run(scenario(LOGISTIC, protocol, churn=churn, targets=[]))
    timed = sim.run(scenario(LOGISTIC, protocol, churn=churn,
                             targets=[{"loss": 1.0}, {"loss": 1e-9}]))  # fmt: skip
    np.testing.assert_array_equal(np.asarray(plain.state.x), np.asarray(timed.state.x))
    pd.testing.assert_frame_equal(plain.metrics, timed.metrics)
    assert "loss_resolution" not in plain.summary


@pytest.mark.parametrize("value", [-1, 0, float("nan"), float("inf"), "abc", True, [0.5]])
def test_bad_stop_target_loss_is_a_one_line_error(value):
    mapping = {"name": "lt", "peers": {"count": 4}, "protocol": {"name": "gossip"},
               "workload": QUADRATIC, "stop": {"max_rounds": 3, "target_loss": value}}  # fmt: skip
    with pytest.raises(ScenarioError) as info:
        sim.scenario_from_mapping(mapping)
    assert "stop.target_loss" in str(info.value)
    assert "\n" not in str(info.value)


def test_stop_target_loss_needs_a_training_workload():
    mapping = {"name": "lt", "peers": {"count": 4}, "protocol": {"name": "gossip"},
               "stop": {"max_rounds": 3, "target_loss": 0.5}}  # fmt: skip
    with pytest.raises(ScenarioError, match=r"stop\.target_loss.*training workload"):
        sim.scenario_from_mapping(mapping)


@pytest.mark.parametrize("workload", [QUADRATIC, LOGISTIC], ids=["quadratic", "logistic"])
def test_batched_losses_are_the_losses_one_by_one(workload):
    engine = engine_for(scenario(workload, {"name": "ring_allreduce"}, "barrier"), 0)
    rng = np.random.default_rng(1)
    means = rng.normal(size=(5, engine.state.x.shape[1])) * 0.1
    batched = engine.trainer.losses(means)
    single = [engine.trainer.loss(m) for m in means]
    np.testing.assert_allclose(batched, single, rtol=1e-12)


@pytest.mark.parametrize(("rejoin", "resolution"), [("keep", "event"), ("reset", "step")])
def test_a2cid2_says_step_once_its_mean_drifts_between_events(rejoin, resolution):
    # a reset restarts x and x̃ of one peer: the peers' x − x̃ no longer sum to zero,
    # so x̄ moves between events (the lazy mixing); a preemption alone keeps the sum
    churn = {"model": "bernoulli", "p": 0.2, "rejoin": rejoin}
    protocol = {"name": "a2cid2", "topology": "ring", "rate": 4}
    s = sim.run(scenario(LOGISTIC, protocol, churn=churn, peers=8)).summary
    assert s["loss_resolution"] == resolution
