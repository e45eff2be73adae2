"""Build a run's training problem from its ``workload`` section, seeded.

Three streams of the run's ``workload`` generator (:func:`sim.core.seeding.
component_rng`), so that each can change without shifting the others: key 0 makes the
problem (the quadratic's H and optima; the logistic data, its test hold-out and its
split), key 1 draws the minibatches, key 2 the gradient noise.

``logistic`` features are standardised with the training split's mean and standard
deviation (a constant feature is only centred), then the constant feature 1 is
appended: the model's last weight row is the bias.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from protocols.base import Protocol
from sim.core.seeding import component_rng
from sim.model.scenario.workload import LogisticWorkload, QuadraticWorkload
from sim.model.training.data import load_data
from sim.model.training.optimizer import SgdState
from sim.model.training.problems import Logistic, Problem, Quadratic
from sim.model.training.splits import Layout, dirichlet_owner, holdout, iid_owner
from sim.model.training.trainer import Trainer

#: Keys of the ``workload`` component's streams.
PROBLEM, BATCHES, NOISE = 0, 1, 2


def build_trainer(
    workload: Any, seed: int, protocol: Protocol, x: Any, start: np.ndarray
) -> Trainer:
    """The trainer of a run with ``seed``; ``x`` is the (n, dim) backend state (its
    namespace, dtype and row count), ``start`` the peers' starting models."""
    n, dim = int(x.shape[0]), int(x.shape[1])
    rng = component_rng(seed, "workload", PROBLEM)
    xp = _module(x)
    problem: Problem
    if isinstance(workload, QuadraticWorkload):
        hessian, optima = quadratic(workload, n, dim, rng)
        noise = component_rng(seed, "workload", NOISE)
        problem = Quadratic(hessian, optima, workload.noise, xp, x.dtype, noise)
    else:
        problem = logistic(workload, n, rng, xp, x.dtype, component_rng(seed, "workload", BATCHES))
    return Trainer(problem, SgdState(workload.optimizer, x), protocol, start)


def _module(x: Any) -> Any:
    """The array module of ``x`` (numpy or cupy): what builds arrays on its device."""
    if type(x) is np.ndarray:
        return np
    import cupy  # the only other backend a scenario can ask for

    return cupy


def quadratic(workload: QuadraticWorkload, n: int, dim: int, rng: np.random.Generator
              ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(H, local optima): H = Q diag(λ) Qᵀ with λ log-spaced from 1 down to 1/condition
    and Q Haar-random; optima x_i* = x* + ζ_i, x* ~ N(0, I), the ζ_i centred and scaled
    to mean squared norm ``heterogeneity`` (all equal with one peer)."""
    exponents = np.arange(dim) / max(1, dim - 1)  # 0 … 1; dim 1: λ = 1
    eigenvalues = workload.condition ** (-exponents)
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
    hessian = (q * eigenvalues) @ q.T
    hessian = (hessian + hessian.T) / 2
    optimum = rng.standard_normal(dim)
    spread = rng.standard_normal((n, dim))
    spread -= spread.mean(axis=0)
    size = float(np.mean(np.sum(spread**2, axis=1)))
    scale = np.sqrt(workload.heterogeneity / size) if size > 0 else 0.0
    return hessian, optimum + spread * scale


def logistic(workload: LogisticWorkload, n: int, rng: np.random.Generator, xp: Any, dtype: Any,
             batches: np.random.Generator) -> Logistic:  # fmt: skip
    """The logistic problem: data, hold-out, standardised features, the peers' shares."""
    data = load_data(workload, rng)
    train, test = holdout(data.y.size, workload.test_fraction, rng)
    x_train, x_test = standardised(data.x[train], data.x[test])
    y_train = data.y[train]
    if workload.split == "shared":
        layout = Layout.shared(train.size, n)
    elif workload.split == "iid":
        layout = Layout.from_owner(iid_owner(train.size, n, rng), n)
    else:
        owner = dirichlet_owner(y_train, data.classes, n, workload.alpha, rng)
        layout = Layout.from_owner(owner, n)
    return Logistic((x_train, y_train), (x_test, data.y[test]), data.classes, layout,
                    workload.batch_size, xp, dtype, batches)  # fmt: skip


def standardised(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both splits centred and scaled by the training split's statistics, with the
    constant feature 1 appended."""
    mean, std = train.mean(axis=0), train.std(axis=0)
    std = np.where(std > 0, std, 1.0)

    def scaled(x: np.ndarray) -> np.ndarray:
        return np.hstack(((x - mean) / std, np.ones((x.shape[0], 1))))

    return scaled(train), scaled(test)


__all__ = ["build_trainer", "logistic", "quadratic", "standardised"]
