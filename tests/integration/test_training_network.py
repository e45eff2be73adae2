"""Training on the network clock against closed forms and independent references (issue 14).

- exact: ring_allreduce after every step (barrier rounds, or ``schedule: async``) with
  deterministic gradients follows centralised gradient descent on the average objective,
  step for step, whatever the peers' compute times (the round waits for the slowest);
- exact: one peer reduces every network-clock protocol to plain SGD;
- ζ² = σ² = 0 keeps the peers in consensus where they step in lockstep;
- gradient clocks: a peer with half the compute time takes twice the steps; preempted
  peers take no steps; a returning peer restarts its clock;
- A²CiD² with η = 0, α̃ = ½ is pairwise gossip, gradients included;
- the closed-form exchange path (:mod:`protocols._solo_exchanges`) gives the general
  path's run, bit for bit, with gradient steps between exchanges;
- loss targets are timed in simulated seconds; the same seed gives the same run.

The references are written here from the formulas, not with the simulator's kernels.
"""

from __future__ import annotations

import gc
import math
import tracemalloc

import numpy as np
import pandas as pd
import pytest

import protocols._solo_exchanges as solo
import sim
from sim.core.errors import ScenarioError
from sim.engine.resources import culprit, memory_parts
from sim.engine.schedules import engine_for

EXACT = 1e-12
#: Every protocol of the network clock with the schedules it runs.
NETWORK = [
    ("ring_allreduce", "barrier"), ("ring_allreduce", "async"), ("moshpit", "barrier"),
    ("moshpit", "async"), ("random_groups", "barrier"), ("random_groups", "async"),
    ("gossip", "barrier"), ("gossip", "async"), ("sgp", "barrier"), ("sgp", "async"),
    ("random_pairs", "barrier"), ("pairwise_gossip", "async"), ("push_sum", "async"),
    ("a2cid2", "async"),
]  # fmt: skip
EDGE = ["pairwise_gossip", "push_sum", "a2cid2"]


def scenario(workload: dict, protocol: str | dict = "ring_allreduce", peers: int = 8,
             schedule: str = "barrier", compute: object = 0.5, classes: list | None = None,
             **extra: object) -> sim.Scenario:  # fmt: skip
    """A network-clock training scenario (``extra``: further top-level sections)."""
    section = protocol if isinstance(protocol, dict) else {"name": protocol}
    table: dict = {"count": peers, "compute": compute}
    if classes is not None:
        table["classes"] = classes
    mapping = {
        "name": "train_net", "clock": "network", "schedule": schedule,
        "peers": table, "protocol": section,
        "workload": workload, "stop": {"max_time": 10}, **extra,
    }  # fmt: skip
    return sim.scenario_from_mapping(mapping)


def quadratic(**optimizer: object) -> dict:
    return {"name": "quadratic", "condition": 5, "heterogeneity": 3.0,
            "optimizer": {"lr": 0.3, **optimizer}}  # fmt: skip


def cosine(lr: float, t: int, total: int) -> float:
    return lr * 0.5 * (1 + math.cos(math.pi * min(t, total) / total))


def heavy_ball(grad, x0: np.ndarray, steps: int, lr, momentum: float = 0.0,
               nesterov: bool = False, decay: float = 0.0) -> list[np.ndarray]:  # fmt: skip
    """Centralised SGD (torch semantics) with a deterministic gradient; the iterates."""
    x, b, out = x0.copy(), np.zeros_like(x0), []
    for t in range(steps):
        g = grad(x) + decay * x
        b = momentum * b + g
        d = g + momentum * b if nesterov else (b if momentum else g)
        x = x - lr(t) * d
        out.append(x)
    return out


def run(sc: sim.Scenario, seed: int = 0):
    engine = engine_for(sc, seed)
    engine.simulate()
    return engine


# -- exact: ring_allreduce after every step is centralised gradient descent --------------


@pytest.mark.parametrize("schedule", ["barrier", "async"])
@pytest.mark.parametrize(
    "compute", [0.25, {"dist": "uniform", "low": 0.1, "high": 2.0}], ids=["equal", "stragglers"]
)
def test_ring_allreduce_after_each_step_is_centralised_gd(schedule, compute):
    rounds = 20
    optimizer = {"momentum": 0.8, "nesterov": True, "weight_decay": 0.01, "schedule": "cosine"}
    sc = scenario(quadratic(**optimizer), schedule=schedule, compute=compute,
                  vector={"dim": 6}, stop={"max_rounds": rounds})  # fmt: skip
    engine = engine_for(sc, 0)
    means: list[np.ndarray] = []
    engine.simulate(lambda _: means.append(engine.state.x.mean(axis=0)))
    problem = engine.trainer.problem
    h, optimum = problem.h64, problem.optima64.mean(axis=0)
    expected = heavy_ball(lambda x: h @ (x - optimum), np.zeros(6), rounds,
                          lambda t: cosine(0.3, t, rounds), 0.8, True, 0.01)  # fmt: skip
    assert len(means) == rounds
    for got, want in zip(means, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=EXACT * max(1, np.abs(want).max()))
    assert engine.trainer.sgd.steps.tolist() == [rounds] * 8
    # each round waits for the slowest peer's step: it starts max(compute) after the last
    assert engine.env.now >= rounds * engine.peers["compute"].max()


def test_full_batch_logistic_ring_allreduce_is_centralised_gd_in_simulated_time():
    """Logistic regression, iid shares, full batch: the mean model follows GD on
    F = (1/n)Σ f_i (reference softmax gradient written here), and rounds take their time."""
    rounds, lr = 8, 0.5
    workload = {"name": "logistic", "data": "digits", "split": "iid", "batch_size": None,
                "optimizer": {"lr": lr}}  # fmt: skip
    sc = scenario(workload, peers=4, compute=2.0, stop={"max_rounds": rounds})
    engine = engine_for(sc, 0)
    means, times = [], []
    engine.simulate(lambda _: (means.append(engine.state.x.mean(axis=0)),
                               times.append(float(engine.env.now))))  # fmt: skip
    problem = engine.trainer.problem
    x, y, layout = problem.x64, problem.y, problem.layout
    classes, features = problem.classes, problem.features
    weights = layout.sample_weights(x.shape[0])  # 1/(n·m_i) per sample: F's weights

    def grad(w_flat: np.ndarray) -> np.ndarray:
        w = w_flat.reshape(classes, features)
        logits = x @ w.T
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(y.size), y] -= 1
        return ((p * weights[:, None]).T @ x).reshape(-1)

    expected = heavy_ball(grad, np.zeros(classes * features), rounds, lambda t: lr)
    for got, want in zip(means, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * max(1, np.abs(want).max()))
    assert all(b - a >= 2.0 for a, b in zip([0.0, *times], times, strict=False))


# -- exact: one peer is plain SGD under every protocol ---------------------------------------


@pytest.mark.parametrize(("protocol", "schedule"), NETWORK)
def test_one_peer_is_plain_sgd_under_every_protocol(protocol, schedule):
    workload = {**quadratic(momentum=0.5), "local_steps": 3}
    sc = scenario(workload, protocol, peers=1, schedule=schedule, vector={"dim": 5})
    engine = run(sc)
    steps = int(engine.trainer.sgd.steps[0])
    assert steps >= 3
    problem = engine.trainer.problem
    h, optimum = problem.h64, problem.optima64[0]
    want = heavy_ball(lambda x: h @ (x - optimum), np.zeros(5), steps, lambda t: 0.3, 0.5)[-1]
    got = np.asarray(engine.protocol.estimate(engine.state))[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=EXACT * max(1, np.abs(want).max()))


# -- consensus: identical objectives, no noise -----------------------------------------------

#: Schedules where every peer steps at the same instants (equal compute): barrier rounds,
#: collectives, the mailbox loops (steps take no time) and the edge clocks. The group loops
#: of ``schedule: async`` fall out of step (their groups end at different times), so peers
#: that took different numbers of steps differ there even with one objective. push_sum
#: too: a share in flight carries its sender's model from before the steps taken while it
#: travels (measured: consensus 2·10⁻³ after 10 s), a real effect of asynchronous push-sum.
DRIFT = ("moshpit", "random_groups", "push_sum")
LOCKSTEP = [(p, s) for p, s in NETWORK if not (s == "async" and p in DRIFT)]


@pytest.mark.parametrize(("protocol", "schedule"), LOCKSTEP)
def test_identical_objectives_without_noise_keep_the_consensus_distance_at_zero(protocol, schedule):
    workload = {"name": "quadratic", "heterogeneity": 0.0, "noise": 0.0, "local_steps": 2,
                "optimizer": {"lr": 0.2, "momentum": 0.5}}  # fmt: skip
    sc = scenario(workload, protocol, peers=8, schedule=schedule, vector={"dim": 4},
                  metrics={"every": 0.5})  # fmt: skip
    engine = run(sc)
    frame = engine.recorder.frame()
    assert frame["grad_steps"].iloc[-1] > 0
    assert frame["loss"].iloc[-1] < frame["loss"].iloc[0]  # it trains
    assert np.all(frame["consensus"].to_numpy() <= 1e-24)


# -- gradient clocks --------------------------------------------------------------------------


@pytest.mark.parametrize(("protocol", "schedule"), [*((p, "async") for p in EDGE),
                                                    ("gossip", "async")])  # fmt: skip
def test_a_peer_with_half_the_compute_time_takes_twice_the_steps(protocol, schedule):
    classes = [{"fraction": 0.5, "compute": 0.25}, {"fraction": 0.5, "compute": 0.5}]
    sc = scenario(quadratic(), protocol, peers=8, schedule=schedule, vector={"dim": 3},
                  classes=classes, stop={"max_time": 10.1}, metrics={"every": 1})  # fmt: skip
    engine = run(sc)
    compute = engine.peers["compute"].to_numpy()
    steps = engine.trainer.sgd.steps
    fast, slow = steps[compute == 0.25], steps[compute == 0.5]
    assert set(fast.tolist()) == {40}  # 10.1 s / compute, rounded down
    assert set(slow.tolist()) == {20}
    table = engine.tables()["training"]
    assert table["grad_steps"].tolist() == steps.tolist()
    # a row at t counts the steps that end at t: 4 peers × 4t + 4 peers × 2t
    rows = engine.recorder.frame()
    whole = rows[rows["time_s"] == rows["time_s"].round()]
    assert len(whole) == 11
    assert whole["grad_steps"].tolist() == [24 * int(t) for t in whole["time_s"]]


@pytest.mark.parametrize("protocol", ["a2cid2", "sgp"])
def test_peers_whose_steps_end_at_one_instant_step_in_one_batch(protocol, monkeypatch):
    """Compute 0.25 s and 0.5 s (sums exact in binary): every 0.5 s all 8 peers step in
    one Trainer.steps call, in between the fast half alone."""
    classes = [{"fraction": 0.5, "compute": 0.25}, {"fraction": 0.5, "compute": 0.5}]
    sc = scenario(quadratic(), protocol, peers=8, schedule="async", vector={"dim": 3},
                  classes=classes, stop={"max_time": 5.1})  # fmt: skip
    engine = engine_for(sc, 0)
    fast = np.flatnonzero(engine.peers["compute"].to_numpy() == 0.25)
    calls: list[tuple[float, list[int]]] = []
    steps = engine.trainer.steps

    def logged(state, rows, k):
        assert k == 1
        calls.append((float(engine.env.now), rows.tolist()))
        steps(state, rows, k)

    monkeypatch.setattr(engine.trainer, "steps", logged)
    engine.simulate()
    assert [t for t, _ in calls] == [0.25 * k for k in range(1, 21)]
    for t, rows in calls:
        assert rows == (list(range(8)) if t % 0.5 == 0 else fast.tolist())


@pytest.mark.parametrize(("protocol", "schedule"), NETWORK)
def test_preempted_peers_take_no_steps(protocol, schedule, monkeypatch):
    churn = {"model": "bernoulli", "p": 0.3, "rejoin": "keep"}
    sc = scenario(quadratic(), protocol, peers=8, schedule=schedule, vector={"dim": 3},
                  compute=0.25, churn=churn, stop={"max_time": 12})  # fmt: skip
    engine = engine_for(sc, 1)
    steps = engine.trainer.steps
    stepped: list[np.ndarray] = []

    def checked(state, rows, k):
        present = engine.clock.present
        assert present[rows].all(), f"absent peers {rows[~present[rows]]} stepped"
        stepped.append(rows.copy())
        steps(state, rows, k)

    monkeypatch.setattr(engine.trainer, "steps", checked)
    engine.simulate()
    assert stepped
    assert int(engine.clock.preemptions.sum()) > 0
    assert engine.trainer.sgd.steps.sum() == sum(r.size for r in stepped)


def test_a_returning_peer_restarts_its_gradient_clock():
    """Edge clock: a peer away from t = 1 to t = 3 (a trace) takes the steps of its
    present time only, on a clock restarted at its return (compute 0.4: 2.5 → 2.9 …)."""
    sc = scenario(quadratic(), "pairwise_gossip", peers=4, schedule="async",
                  vector={"dim": 3}, compute=0.4, stop={"max_time": 5})  # fmt: skip
    engine = engine_for(sc, 0)
    times: dict[int, list[float]] = {}
    steps = engine.trainer.steps

    def logged(state, rows, k):
        for r in rows.tolist():
            times.setdefault(r, []).append(float(engine.env.now))
        steps(state, rows, k)

    engine.trainer.steps = logged
    clock = engine.network_clock
    process = engine.process

    def with_churn(progress):
        def away():
            yield engine.env.timeout(1.0)
            engine.tracker.change(np.array([0]), lambda: engine.clock.preempt(np.array([0])))
            yield engine.env.timeout(1.5)
            engine.tracker.change(np.array([0]), lambda: engine.clock.arrive(np.array([0])))

        gen = process(progress)
        engine.env.process(away())
        yield from gen

    assert clock is not None
    engine.process = with_churn
    engine.simulate()
    np.testing.assert_allclose(times[0], [0.4, 0.8, 2.9, 3.3, 3.7, 4.1, 4.5, 4.9], atol=1e-12)
    assert len(times[1]) == 12  # 0.4 … 4.8


# -- A²CiD² with η = 0 is pairwise gossip --------------------------------------------------


def test_a2cid2_without_momentum_is_pairwise_gossip_with_gradients():
    workload = {"name": "logistic", "data": "digits", "batch_size": 8, "optimizer": {"lr": 0.1}}
    a = {"name": "a2cid2", "eta": 0.0, "alpha_tilde": 0.5}
    results = [
        run(scenario(workload, p, peers=6, schedule="async", compute=0.3, stop={"max_time": 6}))
        for p in (a, {"name": "pairwise_gossip"})
    ]
    first, second = results
    np.testing.assert_allclose(first.state.x, second.state.x, rtol=0, atol=1e-13)
    np.testing.assert_array_equal(first.trainer.sgd.steps, second.trainer.sgd.steps)
    assert first.clock.net.flows_started == second.clock.net.flows_started


# -- the closed-form exchange path with gradient steps --------------------------------------


@pytest.mark.parametrize("protocol", ["pairwise_gossip", "a2cid2"])
@pytest.mark.parametrize("compute", [0.25, {"dist": "uniform", "low": 0.05, "high": 0.4}])
@pytest.mark.parametrize("watched", [False, True], ids=["no-targets", "var-targets"])
def test_the_closed_form_exchange_path_gives_the_general_paths_training_run(
    protocol, compute, watched, monkeypatch
):
    workload = {"name": "logistic", "data": "digits", "batch_size": 8,
                "optimizer": {"lr": 0.1, "momentum": 0.9}}  # fmt: skip
    section = {"name": protocol, "rate": 4.0}
    stop: dict = {"max_time": 6}
    metrics: dict = {"every": 0.5}
    if watched:  # the exact-target tracker watches every exchange and every step
        workload["init"] = "each"  # var > 0 from the start
        stop["target_var"] = 1e-30
        metrics["targets"] = [1e-3, 1e-5, {"loss": 0.4}]
    sc = scenario(workload, section, peers=16, schedule="async", compute=compute,
                  stop=stop, metrics=metrics)  # fmt: skip
    applied = 0
    commit = solo.SoloExchanges.commit

    def counting(self, segment):
        nonlocal applied
        applied += int(np.count_nonzero(np.array(segment.ends) < segment.end))
        yield from commit(self, segment)

    monkeypatch.setattr(solo.SoloExchanges, "commit", counting)
    out = []
    for enabled in (False, True):
        log: list = []
        monkeypatch.setattr(solo.settings, "ENABLED", enabled)
        monkeypatch.setattr(solo.settings, "EXCHANGES", log)
        out.append((sim.run(sc, seed=3), sorted(log)))
    assert applied > 0  # the fast path ran
    (a, log_a), (b, log_b) = out
    assert log_a == log_b
    np.testing.assert_array_equal(np.asarray(a.state.x), np.asarray(b.state.x))
    for key, array in a.state.extra.items():
        np.testing.assert_array_equal(np.asarray(array), np.asarray(b.state.extra[key]))
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    for name, table in a.extra_tables.items():
        pd.testing.assert_frame_equal(table, b.extra_tables[name])


# -- metrics, seeds, scenario checks --------------------------------------------------------


def test_loss_targets_are_timed_in_simulated_seconds_between_the_samples():
    workload = {"name": "logistic", "data": "digits", "batch_size": 16, "local_steps": 2,
                "optimizer": {"lr": 0.2}}  # fmt: skip
    sc = scenario(workload, {"name": "moshpit", "group_size": 4}, peers=8, schedule="async",
                  compute=0.3, metrics={"every": 0.5, "targets": [{"loss": 1.5}, {"loss": 1e-9}]},
                  stop={"max_time": 15})  # fmt: skip
    result = sim.run(sc, seed=0)
    frame, summary = result.metrics, result.summary
    crossed = frame[frame["loss"] <= 1.5]
    assert not crossed.empty
    # at the step or averaging step, after the last sample above 1.5, that took F(x̄)
    # below it (tests/integration/test_loss_times.py: the exact instant)
    first = float(crossed["time_s"].iloc[0])
    before = float(frame[frame["time_s"] < first]["time_s"].iloc[-1])
    assert before < summary["time_to_loss_1.5_s"] <= first
    assert summary["loss_resolution"] == "event"
    assert summary["time_to_loss_1e-09_s"] is None
    for key in ("final_loss", "final_accuracy", "final_local_loss", "grad_steps"):
        assert summary[key] is not None
    assert summary["grad_steps"] == int(result.extra_tables["training"]["grad_steps"].sum())
    assert frame["grad_steps"].is_monotonic_increasing
    assert {"steps_min", "loss", "accuracy", "consensus"} <= set(frame.columns)


@pytest.mark.parametrize(
    ("protocol", "schedule"),
    [("a2cid2", "async"), ("sgp", "async"), ("moshpit", "async"), ("gossip", "barrier")],
)
def test_same_scenario_and_seed_give_the_same_training_run(protocol, schedule):
    workload = {"name": "logistic", "data": "digits", "batch_size": 8, "local_steps": 2,
                "optimizer": {"lr": 0.1, "momentum": 0.9}}  # fmt: skip
    churn = {"model": "bernoulli", "p": 0.1, "rejoin": "fetch"}
    sc = scenario(workload, protocol, peers=8, schedule=schedule,
                  compute={"dist": "uniform", "low": 0.2, "high": 0.6}, churn=churn)  # fmt: skip
    a, b = sim.run(sc, seed=5), sim.run(sc, seed=5)
    np.testing.assert_array_equal(np.asarray(a.state.x), np.asarray(b.state.x))
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    pd.testing.assert_frame_equal(a.extra_tables["training"], b.extra_tables["training"])


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"workload": {"overlap": True}}, "workload.overlap"),
        ({"workload": {"optimizer": {"lr": 0.1, "schedule": "cosine"}}},
         "workload.optimizer.total_steps"),
        ({"peers": {"count": 4, "compute": 0.0}}, "peers.compute"),
    ],
)  # fmt: skip
def test_network_clock_refusals_are_one_line_errors(change, key):
    base = {"name": "t", "clock": "network", "schedule": "async", "peers": {"count": 4},
            "protocol": {"name": "a2cid2"}, "stop": {"max_time": 5},
            "workload": {"name": "quadratic", "optimizer": {"lr": 0.1}}}  # fmt: skip
    for section, value in change.items():
        base[section] = {**base[section], **value}
    with pytest.raises(ScenarioError) as info:
        run(sim.scenario_from_mapping(base))
    assert info.value.key == key
    assert "\n" not in str(info.value)


def test_a_decaying_schedule_spans_max_rounds_steps_in_barrier_rounds():
    sc = scenario({**quadratic(schedule="cosine"), "local_steps": 3}, "gossip",
                  stop={"max_rounds": 7})  # fmt: skip
    assert sc.workload.optimizer.total_steps == 21


# -- the memory estimate counts the training data and the optimizer state --------------------

MIB = 2**20
CLASSIFICATION = {"name": "logistic", "data": "classification", "samples": 100_000,
                  "features": 60, "classes": 4, "batch_size": 32,
                  "optimizer": {"lr": 0.1, "momentum": 0.9}}  # fmt: skip
MEMORY_CASES = {
    "rounds, generated data": {"peers": {"count": 16}, "protocol": {"name": "all_reduce"},
                               "workload": CLASSIFICATION},
    "network, generated data": {"clock": "network", "peers": {"count": 16},
                                "protocol": {"name": "ring_allreduce"},
                                "workload": CLASSIFICATION},
    "rounds, quadratic H and momentum": pytest.param({
        "peers": {"count": 64}, "vector": {"dim": 2048}, "protocol": {"name": "all_reduce"},
        "workload": {"name": "quadratic", "optimizer": {"lr": 0.1, "momentum": 0.9}}},
        marks=pytest.mark.slow),  # H's QR: 15 s on a loaded machine
}  # fmt: skip


@pytest.mark.parametrize("case", MEMORY_CASES.values(), ids=MEMORY_CASES.keys())
def test_the_memory_estimate_bounds_a_training_runs_peak(case):
    """measured ≤ estimate ≤ 3 × measured (tests/integration/test_resources.py's band),
    tracemalloc (numpy reports its allocations to it); the training part dominates."""
    sc = sim.scenario_from_mapping({"name": "m", "stop": {"max_rounds": 2}, **case})
    estimate = memory_parts(sc)
    assert estimate.parts["training"] > estimate.nbytes / 2
    gc.collect()
    tracemalloc.start()
    try:
        sim.run(sc, seed=0)
        measured = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    report = f"estimate {estimate.nbytes / MIB:.0f} MiB, measured {measured / MIB:.0f} MiB"
    assert estimate.nbytes >= 100 * MIB, report
    assert measured <= estimate.nbytes <= 3 * measured, report


def test_momentum_buffers_count_and_pure_averaging_has_no_training_part():
    base = {"name": "m", "peers": {"count": 64}, "vector": {"dim": 4096},
            "protocol": {"name": "gossip"}, "stop": {"max_rounds": 2}}  # fmt: skip
    plain = {**base, "workload": {"name": "quadratic", "optimizer": {"lr": 0.1}}}
    heavy = {**base, "workload": {"name": "quadratic", "optimizer": {"lr": 0.1, "momentum": 0.9}}}
    parts = [memory_parts(sim.scenario_from_mapping(m)).parts for m in (base, plain, heavy)]
    assert "training" not in parts[0]
    assert parts[2]["training"] - parts[1]["training"] == 64 * 4096 * 8


def test_a_generated_data_set_that_does_not_fit_is_blamed():
    workload = {**CLASSIFICATION, "samples": 2_000_000}
    sc = sim.scenario_from_mapping({"name": "m", "peers": {"count": 4}, "workload": workload,
                                    "protocol": {"name": "all_reduce"}})  # fmt: skip
    blamed = culprit(sc)
    assert (blamed.key, blamed.value) == ("workload.samples", 2_000_000)
