"""Training on the rounds clock against closed forms and independent references (issue 14).

- exact: all_reduce after every step with deterministic gradients follows centralised
  gradient descent (momentum, Nesterov, weight decay, schedules) on the average objective,
  step for step, for both objectives;
- exact: one peer reduces every protocol to plain SGD;
- theory: decentralised gradient descent with a gossip matrix W converges to the closed
  form fixed point of x = W(x − γ∇F(x)) (adapt then combine) and, with ``overlap``, of
  x = Wx − γ∇F(x) (D-PSGD);
- ζ² = σ² = 0 keeps the peers in consensus under every protocol.

The references are written here from the formulas, not with the simulator's kernels.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import protocols
import sim
from sim.engine.schedules import engine_for

EXACT = 1e-12


def scenario(workload: dict, protocol: str | dict = "all_reduce", peers: int = 8,
             rounds: int = 20, **extra: object) -> sim.Scenario:  # fmt: skip
    """A rounds-clock training scenario (``extra``: further top-level sections)."""
    section = protocol if isinstance(protocol, dict) else {"name": protocol}
    mapping = {"name": "train", "peers": {"count": peers}, "protocol": section,
               "workload": workload, "stop": {"max_rounds": rounds}, **extra}  # fmt: skip
    return sim.scenario_from_mapping(mapping)


def trajectory(sc: sim.Scenario, seed: int = 0) -> tuple[list[np.ndarray], object]:
    """The mean of the peers' vectors after each round (and the engine, run)."""
    engine = engine_for(sc, seed)
    means: list[np.ndarray] = []
    engine.simulate(lambda _: means.append(engine.state.x.mean(axis=0)))
    return means, engine


def cosine(lr: float, t: int, total: int) -> float:
    return lr * 0.5 * (1 + math.cos(math.pi * min(t, total) / total))


def heavy_ball(grad, x0: np.ndarray, steps: int, lr, momentum: float, nesterov: bool,
               decay: float) -> list[np.ndarray]:  # fmt: skip
    """Centralised SGD (torch semantics) with a deterministic gradient; the iterates."""
    x, b, out = x0.copy(), np.zeros_like(x0), []
    for t in range(steps):
        g = grad(x) + decay * x
        b = momentum * b + g
        d = g + momentum * b if nesterov else (b if momentum else g)
        x = x - lr(t) * d
        out.append(x)
    return out


# -- exact: all_reduce after every step is centralised gradient descent -------------------


@pytest.mark.parametrize("nesterov", [False, True])
def test_all_reduce_after_each_step_is_centralised_gd_on_a_quadratic(nesterov):
    rounds = 25
    optimizer = {"lr": 0.4, "momentum": 0.8, "nesterov": nesterov, "weight_decay": 0.01,
                 "schedule": "cosine"}  # fmt: skip
    sc = scenario({"name": "quadratic", "condition": 5, "heterogeneity": 3.0,
                   "optimizer": optimizer}, vector={"dim": 6}, rounds=rounds)  # fmt: skip
    means, engine = trajectory(sc)
    problem = engine.trainer.problem
    h, optimum = problem.h64, problem.optima64.mean(axis=0)
    expected = heavy_ball(lambda x: h @ (x - optimum), np.zeros(6), rounds,
                          lambda t: cosine(0.4, t, rounds), 0.8, nesterov, 0.01)  # fmt: skip
    assert len(means) == rounds
    for got, want in zip(means, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=EXACT * max(1, np.abs(want).max()))
    assert np.max(np.abs(expected[-1] - expected[0])) > 0.1  # it moved


def softmax_gradient(w: np.ndarray, x: np.ndarray, y: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Σ_j c_j ∇ℓ_j(W) for W (C, F), sample by sample in plain numpy."""
    logits = x @ w.T
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(y.size), y] -= 1
    return (c[:, None] * p).T @ x


def test_all_reduce_full_batch_is_centralised_gd_on_logistic_regression():
    rounds, peers = 15, 6
    workload = {"name": "logistic", "batch_size": None, "split": "dirichlet", "alpha": 1.0,
                "optimizer": {"lr": 0.5, "momentum": 0.5, "weight_decay": 1e-3,
                              "schedule": "step", "milestones": [0.4]}}  # fmt: skip
    means, engine = trajectory(scenario(workload, peers=peers, rounds=rounds))
    problem = engine.trainer.problem
    x, y, layout = problem.x64, problem.y, problem.layout
    owner = np.repeat(np.arange(peers), layout.size)
    c = np.zeros(y.size)
    c[layout.order] = 1.0 / (
        peers * layout.size[owner]
    )  # each share 1/n, each sample 1/(n·|share|)
    classes, features = 10, x.shape[1]
    assert len(set(layout.size.tolist())) > 1  # unequal shares: the weights matter

    def grad(v: np.ndarray) -> np.ndarray:
        return softmax_gradient(v.reshape(classes, features), x, y, c).reshape(-1)

    expected = heavy_ball(grad, np.zeros(classes * features), rounds,
                          lambda t: 0.5 * (0.1 if t >= 6 else 1.0), 0.5, False, 1e-3)  # fmt: skip
    for got, want in zip(means, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=EXACT * max(1, np.abs(want).max()))
    final = expected[-1].reshape(classes, features)
    logits = x @ final.T
    top = logits.max(axis=1)
    losses = np.log(np.exp(logits - top[:, None]).sum(axis=1)) + top - logits[np.arange(y.size), y]
    assert engine.recorder.frame()["loss"].iloc[-1] == pytest.approx(float(c @ losses), rel=1e-12)


# -- exact: one peer is plain SGD under every protocol --------------------------------------


def one_peer(protocol: str, workload: dict, rounds: int = 6) -> np.ndarray:
    result = sim.run(scenario(workload, protocol, peers=1, rounds=rounds, vector={"dim": 4}))
    return np.asarray(result.state.x)[0]


@pytest.mark.parametrize("name", sorted(protocols.REGISTRY))
def test_one_peer_reduces_every_protocol_to_plain_gradient_descent(name):
    workload = {"name": "quadratic", "condition": 3, "local_steps": 2,
                "optimizer": {"lr": 0.3, "momentum": 0.6}}  # fmt: skip
    got = one_peer(name, workload)
    problem = engine_for(scenario(workload, peers=1, vector={"dim": 4}), 0).trainer.problem
    h, optimum = problem.h64, problem.optima64[0]
    expected = heavy_ball(lambda x: h @ (x - optimum), np.zeros(4), 12, lambda t: 0.3, 0.6,
                          False, 0.0)[-1]  # fmt: skip
    np.testing.assert_allclose(got, expected, rtol=0, atol=EXACT)


def test_one_peer_takes_the_same_stochastic_steps_under_every_protocol():
    workload = {"name": "quadratic", "noise": 0.5, "local_steps": 3,
                "optimizer": {"lr": 0.2, "momentum": 0.9, "nesterov": True}}  # fmt: skip
    runs = {name: one_peer(name, workload) for name in sorted(protocols.REGISTRY)}
    reference = runs.pop("all_reduce")
    for name, x in runs.items():
        np.testing.assert_allclose(x, reference, rtol=0, atol=EXACT, err_msg=name)
    assert not np.allclose(reference, one_peer("all_reduce", {**workload, "noise": 0.0}))


# -- theory: the fixed points of decentralised gradient descent ---------------------------


def ring_metropolis(n: int) -> np.ndarray:
    """Metropolis weights of a ring (every degree 2): 1/3 on itself and each neighbour."""
    w = np.eye(n) / 3
    for i in range(n):
        w[i, (i + 1) % n] = w[i, (i - 1) % n] = 1 / 3
    return w


@pytest.mark.parametrize("overlap", [False, True])
def test_gossip_gradient_descent_converges_to_its_closed_form_fixed_point(overlap):
    """Rows X (n × d), F(X)_i = ∇f_i(x_i) = (x_i − x_i*)H. Adapt then combine:
    X = W(X − γ(X − X*)H), so (I − W⊗I + γW⊗H) vec X = γ(W⊗H) vec X*; with ``overlap``
    (combine and adapt at once): X = WX − γ(X − X*)H, so (I − W⊗I + γI⊗H) vec X =
    γ(I⊗H) vec X* (row-major vec: vec(A X B) = (A ⊗ Bᵀ) vec X)."""
    n, d, gamma = 8, 3, 0.2
    workload = {"name": "quadratic", "condition": 2, "heterogeneity": 4.0, "overlap": overlap,
                "optimizer": {"lr": gamma}}  # fmt: skip
    protocol = {"name": "gossip", "topology": "ring", "weights": "metropolis"}
    sc = scenario(workload, protocol, peers=n, rounds=400, vector={"dim": d})
    engine = engine_for(sc, 3)
    engine.simulate()
    problem = engine.trainer.problem
    h, optima = problem.h64, problem.optima64
    w, eye = ring_metropolis(n), np.eye(n)
    mixed = w if not overlap else eye
    a = np.eye(n * d) - np.kron(w, np.eye(d)) + gamma * np.kron(mixed, h)
    fixed = np.linalg.solve(a, gamma * np.kron(mixed, h) @ optima.reshape(-1)).reshape(n, d)
    np.testing.assert_allclose(engine.state.x, fixed, rtol=0, atol=1e-8)
    spread = np.abs(fixed - fixed.mean(axis=0)).max()
    assert spread > 1e-2  # heterogeneous optima: the fixed point is not a consensus
    other = np.linalg.solve(
        np.eye(n * d) - np.kron(w, np.eye(d)) + gamma * np.kron(eye if not overlap else w, h),
        gamma * np.kron(eye if not overlap else w, h) @ optima.reshape(-1),
    ).reshape(n, d)
    assert np.abs(other - fixed).max() > 1e-6  # the two orders have different fixed points


# -- ζ² = σ² = 0: the peers stay in consensus ---------------------------------------------


@pytest.mark.parametrize("name", sorted(protocols.REGISTRY))
def test_identical_objectives_without_noise_keep_the_consensus_distance_at_zero(name):
    workload = {"name": "quadratic", "heterogeneity": 0.0, "noise": 0.0, "local_steps": 2,
                "optimizer": {"lr": 0.3, "momentum": 0.5}}  # fmt: skip
    result = sim.run(scenario(workload, name, peers=8, rounds=8, vector={"dim": 5}))
    frame = result.metrics
    assert frame["consensus"].max() <= 1e-24  # identical rows, to round-off
    assert frame["loss"].iloc[-1] < frame["loss"].iloc[0] / 2  # while the model trains
    assert frame["grad_steps"].iloc[-1] == 8 * 8 * 2


# -- runs: seeds, churn, metrics ----------------------------------------------------------


LOGISTIC = {"name": "logistic", "split": "dirichlet", "alpha": 0.3, "batch_size": 8,
            "local_steps": 2, "optimizer": {"lr": 0.2, "momentum": 0.9}}  # fmt: skip


def test_the_same_scenario_and_seed_give_identical_results_and_another_seed_differs():
    sc = scenario(LOGISTIC, "moshpit", peers=16, rounds=6)
    a, b, c = sim.run(sc, seed=1), sim.run(sc, seed=1), sim.run(sc, seed=2)
    assert a.metrics.equals(b.metrics)
    np.testing.assert_array_equal(a.state.x, b.state.x)
    assert not np.array_equal(a.state.x, c.state.x)


def test_preempted_peers_take_no_gradient_steps():
    churn = {"model": "bernoulli", "p": 0.3, "rejoin": "keep"}
    sc = scenario(LOGISTIC, "random_groups", peers=12, rounds=7, churn=churn)
    result = sim.run(sc, seed=4)
    engine = engine_for(sc, 4)
    from sim.model.churn import RoundChurn

    churn_masks = RoundChurn(engine.schedule())
    present = sum(churn_masks.present(t).astype(int) for t in range(7))
    steps = result.extra_tables["training"]["grad_steps"].to_numpy()
    np.testing.assert_array_equal(steps, 2 * present)
    assert present.min() < 7  # some peer was away
    assert result.summary["grad_steps"] == int(steps.sum())
    assert result.summary["grad_steps_min"] == int(steps.min())


def test_metrics_and_summary_of_a_logistic_run():
    sc = scenario(LOGISTIC, "gossip", peers=10, rounds=12, metrics={"targets": [{"loss": 1.5}]})
    result = sim.run(sc)
    frame = result.metrics
    assert list(frame.columns[-5:]) == ["loss", "accuracy", "local_loss", "consensus", "grad_steps"]
    assert frame["loss"].iloc[0] == pytest.approx(math.log(10))  # x = 0: uniform predictions
    assert frame["loss"].iloc[-1] < 1.0
    assert 0.5 < frame["accuracy"].iloc[-1] <= 1.0
    np.testing.assert_allclose(frame["consensus"], frame["var"] * sc.vector.dim, rtol=1e-12)
    first = int(frame.loc[frame["loss"] < 1.5, "round"].iloc[0])
    summary = result.summary
    assert summary["rounds_to_loss_1.5"] == first
    assert summary["time_to_loss_1.5_s"] == float(first)
    assert summary["final_loss"] == frame["loss"].iloc[-1]
    assert summary["final_accuracy"] == frame["accuracy"].iloc[-1]
    assert summary["grad_steps"] == 10 * 12 * 2
    assert sc.stop.target_var is None  # no default variance target with a workload


def test_without_a_workload_nothing_changes():
    plain = {"name": "plain", "peers": {"count": 8}, "protocol": {"name": "gossip"},
             "stop": {"max_rounds": 3}}  # fmt: skip
    result = sim.run(sim.scenario_from_mapping(plain))
    from sim.engine.recorder import COLUMNS

    assert tuple(result.metrics.columns) == COLUMNS
    assert not {"final_loss", "grad_steps"} & set(result.summary)
    assert "training" not in result.extra_tables
    assert result.summary["rounds_to_target"] is None or result.summary["stop_reason"]
