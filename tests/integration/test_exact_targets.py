"""Exact time-to-target: the tracker's variance after every change equals the variance
recomputed from the state (brute force), for every continuous-time protocol on both
clocks, with churn; crossing times do not depend on ``metrics.every``."""

from __future__ import annotations

import math

import numpy as np
import pytest

import protocols._solo_exchanges as solo
import sim
from sim.engine.observe.targets import target_label
from sim.engine.recorder import statistics
from sim.engine.schedules import Engine, engine_for
from sim.kernels import pairwise_delta, push_half
from sim.kernels.mixing import a2cid2_exchange, a2cid2_mix, mix_coefficient
from sim.model.scenario import apply_overrides

CONTINUOUS = ["pairwise_gossip", "push_sum", "a2cid2"]
CHURN = {
    "network": [
        {"model": "none"},
        {"model": "exponential", "mtbf": 5, "mttr": 2, "rejoin": "fetch"},
        {"model": "exponential", "mtbf": 5, "mttr": 2, "rejoin": "reset"},
    ],
    "rounds": [
        {"model": "none"},
        {"model": "bernoulli", "p": 0.2, "rejoin": "fetch"},
        {"model": "bernoulli", "p": 0.2, "rejoin": "reset"},
    ],
}
#: Relative agreement asked of the tracker (variances stay above ~1e-8 in these runs).
RELATIVE = 1e-12


def scenario(protocol: str, clock: str, churn: dict, length: float = 20, **over):
    stop = {"max_time": length} if clock == "network" else {"max_rounds": int(length)}
    mapping = {
        "name": "exact",
        "clock": clock,
        "peers": {"count": 12},
        "vector": {"dim": 3},
        "protocol": {"name": protocol},
        "churn": churn,
        "stop": {**stop, "target_var": 0},
        "metrics": {"every": 5, "targets": [1e-30]},  # a var_alive threshold: both sets kept
    }
    return sim.scenario_from_mapping(apply_overrides(mapping, over))


def brute_force(run: Engine) -> tuple[float, float]:
    """(var, var_alive) recomputed from the state now (A²CiD²: every peer mixed to now)."""
    protocol, state = run.protocol, run.state
    if protocol.Params.__name__.startswith("A2cid2"):
        x, x_tilde = state.x.copy(), state.extra["x_tilde"].copy()
        c = mix_coefficient(float(run.env.now) - protocol.last, protocol.eta)
        estimate = a2cid2_mix(x, x_tilde, c)[0]
    else:
        estimate = protocol.estimate(state)
    sample = statistics(estimate, run.present.copy(), run.mean0, run.exists)
    return sample.var, sample.var_alive


def assert_close(got: dict[str, float], var: float, var_alive: float) -> None:
    for metric, reference in (("var", var), ("var_alive", var_alive)):
        if metric in got and math.isfinite(reference):
            assert got[metric] == pytest.approx(reference, rel=RELATIVE), metric


@pytest.mark.parametrize("churn", CHURN["network"], ids=lambda c: c.get("rejoin", "none"))
@pytest.mark.parametrize("protocol", CONTINUOUS)
def test_network_clock_tracker_matches_brute_force_after_every_change(protocol, churn, monkeypatch):
    # one change at a time (the closed-form segments show the tracker batches instead:
    # tests/property/test_solo_exchanges.py checks those against one at a time)
    monkeypatch.setattr(solo.settings, "ENABLED", False)
    run = engine_for(scenario(protocol, "network", churn), 0)
    tracker = run.tracker
    tracker.trace = []
    checked = []

    def checked_after(method):
        def call(*args):
            start = len(tracker.trace)
            method(*args)
            if len(tracker.trace) > start:
                got = {metric: var for _, metric, var in tracker.trace[start:]}
                assert_close(got, *brute_force(run))
                checked.append(float(run.env.now))

        return call

    tracker.after = checked_after(tracker.after)
    tracker.change = checked_after(tracker.change)
    finished = run.env.process(run.process(None))
    run.env.run(until=run.env.any_of([finished, run.env.timeout(20)]))
    assert len(checked) > 100


@pytest.mark.parametrize("churn", CHURN["rounds"], ids=lambda c: c.get("rejoin", "none"))
@pytest.mark.parametrize("protocol", CONTINUOUS)
def test_rounds_clock_tracker_matches_the_events_one_by_one(protocol, churn):
    """The waves are replayed in time order: after each event the variance equals the
    one of the state built by applying the round's events one at a time."""
    run = engine_for(scenario(protocol, "rounds", churn), 0)
    tracker, proto = run.tracker, run.protocol
    tracker.trace = []
    rounds: list[tuple] = []
    if protocol == "push_sum":
        draw = proto._pushes

        def capture(mask):
            senders, targets, times = draw(mask)
            rounds.append((times, senders, targets))
            return senders, targets, times

        proto._pushes = capture
    else:
        draw = proto.ring_round

        def capture(present):
            times, i, j = draw(present)
            rounds.append((times, i, j))
            return times, i, j

        proto.ring_round = capture
    play = proto.round

    def round_(state, present, t):
        round_.start = (state.x.copy(), {k: v.copy() for k, v in state.extra.items()}, present)
        return play(state, present, t)

    proto.round = round_
    end_round = tracker.end_round
    events = [0]

    def checked_end(rounds_done, end_s):
        start = len(tracker.trace)
        end_round(rounds_done, end_s)
        got = [(v, m) for _, m, v in tracker.trace[start:]]
        expected = one_by_one(run, *round_.start, rounds[-1])
        for metric, column in (("var", 0), ("var_alive", 1)):
            values = [v for v, m in got if m == metric]
            assert len(values) == len(expected)
            for value, reference in zip(values, expected, strict=True):
                if math.isfinite(reference[column]):
                    assert value == pytest.approx(reference[column], rel=RELATIVE)
        events[0] += len(expected)

    tracker.end_round = checked_end
    run.env.process(run.process(None))
    run.env.run()
    assert events[0] > 50


def one_by_one(run: Engine, x, extra, present, drawn) -> list[tuple[float, float]]:
    """(var, var_alive) after each event of a round, applied one at a time."""
    protocol = run.protocol
    times, i, j = drawn
    last = np.zeros(x.shape[0])
    out = []
    for k in range(times.size):
        a, b = np.array([i[k]]), np.array([j[k]])
        if protocol.Params.__name__.startswith("PairwiseGossip"):
            x = pairwise_delta(x, a, b)
            estimate = x
        elif protocol.Params.__name__.startswith("PushSum"):
            x, extra["w"] = push_half(x, a, b), push_half(extra["w"], a, b)
            estimate = x / extra["w"]
        else:
            rows = np.r_[a, b]
            c = mix_coefficient(times[k] - last[rows], protocol.eta)
            x, extra["x_tilde"] = a2cid2_exchange(
                x, extra["x_tilde"], a, b, c, protocol.alpha_tilde
            )
            last[rows] = times[k]
            mixed = a2cid2_mix(
                x.copy(), extra["x_tilde"].copy(), mix_coefficient(times[k] - last, protocol.eta)
            )
            estimate = mixed[0]
        sample = statistics(estimate, present, run.mean0, run.exists)
        out.append((sample.var, sample.var_alive))
    return out


def test_a2cid2_time_to_target_does_not_depend_on_the_sampling_interval():
    base = {
        "name": "every",
        "clock": "network",
        "peers": {"count": 32},
        "vector": {"dim": 8},
        "protocol": {"name": "a2cid2", "topology": "ring"},
        "churn": {"model": "exponential", "mtbf": 60, "mttr": 5, "rejoin": "fetch"},
        "stop": {"max_time": 400, "target_var": 1e-4},
        "metrics": {"targets": [1e-2]},
    }
    coarse = sim.run(
        sim.scenario_from_mapping({**base, "metrics": {"every": 5, "targets": [1e-2]}})
    )
    fine = sim.run(
        sim.scenario_from_mapping({**base, "metrics": {"every": 0.5, "targets": [1e-2]}})
    )
    for key in ("time_to_target_s", "time_to_1e-02_s"):
        assert coarse.summary[key] is not None
        assert coarse.summary[key] == pytest.approx(fine.summary[key], rel=1e-9)
        assert coarse.summary[key] % 5 != 0  # not a sample time
    assert coarse.summary["stop_reason"] == "target"
    assert coarse.summary["sim_time_s"] == coarse.summary["time_to_target_s"]  # ends there


def test_a2cid2_crossings_between_events_are_bracketed_by_the_state():
    """Thresholds crossed by the continuous mixing, between two exchanges: the variance
    recomputed just before the time found is above, just after below."""
    targets = [float(t) for t in np.logspace(-1, -5, 33)]
    over = {"metrics.targets": targets, "peers.count": 16, "protocol.topology": "ring"}
    sc = scenario("a2cid2", "network", {"model": "none"}, length=120, **over)
    summary = sim.run(sc).summary
    probe = engine_for(sc, sc.seed)
    probe.tracker.trace = []
    probe.env.process(probe.process(None))
    probe.env.run(until=120)
    events = np.array(sorted({t for t, _, _ in probe.tracker.trace}))
    between = 0
    for target in targets:
        at = summary[f"time_to_{target_label(target)}_s"]
        gap = float(np.min(np.abs(events - at)))
        if at is None or gap < 1e-9:
            continue
        between += 1
        step = min(1e-6, gap / 4)
        assert var_at(sc, at - step) > target > var_at(sc, at + step)
    assert between >= 1


def var_at(sc, time_s: float) -> float:
    run = engine_for(sc, sc.seed)
    run.env.process(run.process(None))
    run.env.run(until=time_s)
    return brute_force(run)[0]


@pytest.mark.parametrize("clock", ["rounds", "network"])
@pytest.mark.parametrize("protocol", CONTINUOUS)
def test_time_to_target_is_an_event_time_not_a_sample_time(protocol, clock):
    sc = scenario(protocol, clock, {"model": "none"}, length=200,
                  **{"stop.target_var": 1e-3, "metrics.every": 10})  # fmt: skip
    summary = sim.run(sc).summary
    assert summary["stop_reason"] == "target"
    at = summary["time_to_target_s"]
    assert at is not None
    assert at % 1 != 0  # an exchange's time, not a round or sample
    expected = math.floor(at) if clock == "network" else math.floor(at) + 1
    assert summary["rounds_to_target"] == expected
