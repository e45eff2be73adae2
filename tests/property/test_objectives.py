"""The training kernels and the local optimizer, property by property (issue 14).

- the batched gradients equal each peer's central finite differences of its own loss;
- numpy and ``array_api_strict`` give the same numbers, to within the round-off of
  two summation orders (a bound from the logits' magnitudes), gathered or not;
- below the step size 1/L (L from :meth:`~sim.model.training.problems.Problem.
  smoothness`) the loss never turns NaN, and full-batch gradient descent on the average
  objective (all_reduce after every step) never increases it.
"""

from __future__ import annotations

import array_api_strict as xps
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.engine.schedules import engine_for
from sim.kernels.objectives import (
    logistic_grad,
    logistic_grad_gather,
    logistic_losses,
    predict,
    quadratic_grad,
    quadratic_losses,
)


@st.composite
def logistic_batches(draw: st.DrawFn):
    """(W, X, y, a): P peers' (C, F) models and (B, F) weighted samples."""
    p, b = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    c, f = draw(st.integers(2, 5)), draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([0.1, 1.0, 5.0]))
    w = rng.standard_normal((p, c, f)) * scale
    x = rng.standard_normal((p, b, f))
    y = rng.integers(0, c, (p, b))
    a = rng.random((p, b)) * draw(st.sampled_from([0.0, 1.0]))  # all-zero weights too
    return w, x, y, a


def finite_differences(loss, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of ``loss(w) -> (P,)``, each peer's in its own parameters."""
    grad = np.zeros_like(w)
    for index in np.ndindex(*w.shape[1:]):
        step = np.zeros_like(w)
        step[(slice(None), *index)] = eps
        grad[(slice(None), *index)] = (loss(w + step) - loss(w - step)) / (2 * eps)
    return grad


@given(logistic_batches())
def test_logistic_gradients_equal_each_peers_finite_differences(batch):
    w, x, y, a = batch
    grads = logistic_grad(w.copy(), x, y, a)
    expected = finite_differences(lambda v: logistic_losses(v, x, y, a), w)
    np.testing.assert_allclose(grads, expected, rtol=1e-6, atol=1e-7)


def round_off_bounds(w, x, a):
    """Round-off bounds of the losses (P,) and gradients (P, C, F) of two evaluations that
    differ only in summation order: a logit is a sum of |w_cf x_bf| terms (bound Z_p on
    every |z|, so on the common shift too); the loss ``log Σ e^(z − s) − (z_y − s)`` then
    carries ~ε·Z_p per sample, and the softmax a relative ~ε·Z_p, times |a_b| (and |x_bf|
    for the gradient). 16ε covers the few roundings of each term."""
    eps = np.finfo(np.float64).eps
    z_bound = np.max(np.abs(w) @ np.abs(x).transpose(0, 2, 1), axis=(1, 2)) + 1.0
    losses = 16 * eps * z_bound * np.abs(a).sum(axis=1)
    grads = 16 * eps * z_bound[:, None] * np.einsum("pb,pbf->pf", np.abs(a), np.abs(x))
    return losses, np.broadcast_to(grads[:, None, :], w.shape)


@given(logistic_batches())
def test_logistic_kernels_are_the_same_on_numpy_and_array_api_strict(batch):
    w, x, y, a = batch
    strict = [xps.asarray(v) for v in batch]
    loss_bound, grad_bound = round_off_bounds(w, x, a)
    grad_gap = np.abs(np.asarray(logistic_grad(*strict)) - logistic_grad(w, x, y, a))
    assert np.all(grad_gap <= grad_bound)
    loss_gap = np.abs(np.asarray(logistic_losses(*strict)) - logistic_losses(w, x, y, a))
    assert np.all(loss_gap <= loss_bound)
    np.testing.assert_array_equal(np.asarray(predict(strict[0][0, ...], strict[1][0, ...])),
                                  predict(w[0], x[0]))  # fmt: skip


@given(logistic_batches(), st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_gathered_gradients_are_the_same_on_numpy_and_array_api_strict(batch, n, seed):
    """:func:`logistic_grad_gather` (numpy: blocked, in place) against array_api_strict
    (one gather, then :func:`logistic_grad`), with and without ``add_to``."""
    w, _, _, a = batch
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((n, w.shape[2]))
    labels = rng.integers(0, w.shape[1], n)
    index = rng.integers(0, n, a.shape)
    grad_bound = round_off_bounds(w, table[index], a)[1]
    on_numpy = logistic_grad_gather(w, table, labels, index, a)
    strict = [xps.asarray(v) for v in (w, table, labels)]
    on_strict = logistic_grad_gather(*strict, index, xps.asarray(a))
    assert np.all(np.abs(np.asarray(on_strict) - on_numpy) <= grad_bound)
    start = rng.standard_normal(w.shape)
    added = logistic_grad_gather(*strict, index, xps.asarray(a), add_to=xps.asarray(start))
    expected = start + on_numpy  # plus the two additions' rounding, ≤ ε·|sum| each
    slack = 2 * np.finfo(np.float64).eps * (np.abs(expected) + grad_bound)
    assert np.all(np.abs(np.asarray(added) - expected) <= grad_bound + slack)


@given(st.integers(1, 4), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_quadratic_gradients_equal_finite_differences(p, d, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((d, d))
    h = a @ a.T / d
    x, optima = rng.standard_normal((p, d)), rng.standard_normal((p, d))
    grads = quadratic_grad(x, h, optima)
    expected = finite_differences(lambda v: quadratic_losses(v, h, optima), x)
    np.testing.assert_allclose(grads, expected, rtol=1e-6, atol=1e-7)
    on_strict = quadratic_grad(xps.asarray(x), xps.asarray(h), xps.asarray(optima))
    np.testing.assert_allclose(np.asarray(on_strict), grads, rtol=0, atol=1e-15)


def training(workload: dict, protocol: str, peers: int, rounds: int) -> sim.Scenario:
    mapping = {"peers": {"count": peers}, "protocol": {"name": protocol},
               "workload": workload, "stop": {"max_rounds": rounds}}  # fmt: skip
    if workload["name"] == "quadratic":
        mapping["vector"] = {"dim": 3}
    return sim.scenario_from_mapping(mapping)


def smoothness(sc: sim.Scenario) -> float:
    return engine_for(sc, 0).trainer.problem.smoothness()


WORKLOADS = st.one_of(
    st.builds(
        lambda c, z: {"name": "quadratic", "condition": c, "heterogeneity": z},
        st.floats(1, 1e4),
        st.floats(0, 100),
    ),
    st.builds(
        lambda split, f: {
            "name": "logistic",
            "data": "classification",
            "samples": 120,
            "features": f,
            "classes": 3,
            "split": split,
        },
        st.sampled_from(["shared", "iid", "dirichlet"]),
        st.integers(3, 6),
    ),
)


@settings(max_examples=15)
@given(WORKLOADS, st.floats(0.01, 0.999), st.sampled_from(["all_reduce", "gossip", "push_sum"]),
       st.integers(0, 1000))  # fmt: skip
def test_the_loss_never_turns_nan_below_step_size_one_over_l(workload, fraction, protocol, seed):
    first = training(workload, protocol, 6, 8)
    lr = fraction / smoothness(first)
    stochastic = {**workload, "local_steps": 3, "optimizer": {"lr": lr}}
    if workload["name"] == "logistic":
        stochastic["batch_size"] = 4
    else:
        stochastic["noise"] = 1.0
    frame = sim.run(training(stochastic, protocol, 6, 8), seed=seed).metrics
    assert np.isfinite(frame["loss"]).all()
    assert np.isfinite(frame["local_loss"]).all()


@settings(max_examples=15)
@given(WORKLOADS, st.floats(0.01, 0.999), st.integers(0, 1000))
def test_full_batch_descent_below_one_over_l_never_increases_the_loss(workload, fraction, seed):
    """all_reduce after each step is gradient descent on F, which is L-smooth with L at
    most the peers' largest: γ ≤ 1/L gives F(x⁺) ≤ F(x) − γ/2·‖∇F(x)‖²."""
    first = training(workload, "all_reduce", 5, 10)
    deterministic = {**workload, "optimizer": {"lr": fraction / smoothness(first)}}
    if workload["name"] == "logistic":
        deterministic["batch_size"] = None
    loss = sim.run(training(deterministic, "all_reduce", 5, 10), seed=seed).metrics["loss"]
    assert np.all(np.diff(loss) <= 1e-12 * np.abs(loss[:-1]).max())
