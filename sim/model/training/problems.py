"""The objectives f_i of the peers, built once per run on the array backend.

A :class:`Problem` gives every stepping peer's stochastic gradient in one batched call
(:mod:`sim.kernels.objectives`) and evaluates models for the metrics: the loss of a
model on the average objective F = (1/n) Σ_i f_i (all n peers that will ever exist),
the peers' own losses f_i(x_i) and, per kind, the test accuracy (``logistic``) or the
excess loss F(x) − F* (``quadratic``). Gradients are computed in the state's dtype,
metrics in float64.
"""

from __future__ import annotations

import contextlib
import functools
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from sim.core.backend import to_numpy
from sim.kernels._xp import GATHER_ELEMENTS, is_numpy, namespace, take_rows
from sim.kernels.objectives import (
    logistic_grad_gather,
    logistic_losses,
    predict,
    quadratic_grad,
    quadratic_losses,
)
from sim.model.training.optimizer import scaled


class Problem(ABC):
    """The peers' objectives: gradients for the steps, losses for the metrics.

    A subclass sets ``columns`` (its metrics besides ``loss`` and ``local_loss``) and
    implements the four methods below.
    """

    #: Metrics of :meth:`evaluate`, in order.
    columns: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def gradients(self, z: Any, rows: np.ndarray, scale: np.ndarray | None = None) -> Any:
        """(k, dim) stochastic gradients of peers ``rows`` (k distinct) at models ``z``,
        each times its ``scale`` ((k,) host) when given."""

    def add_gradients(self, into: Any, z: Any, rows: np.ndarray,
                      scale: np.ndarray | None = None) -> None:  # fmt: skip
        """``into += gradients(z, rows, scale)``, in place: ``into`` is (k, dim) and may
        be ``z`` itself (models are read before their gradients are added); the values
        are those of the two steps, bit for bit."""
        into += self.gradients(z, rows, scale)

    @abstractmethod
    def loss(self, mean: Any) -> float:
        """F(x̄) for the (dim,) float64 model ``mean``."""

    def losses(self, means: np.ndarray) -> np.ndarray:
        """F of each row of the (K, dim) float64 host array ``means``: (K,) float64 host
        values (default: one :meth:`loss` each; a subclass may batch them, and must move
        them to its backend when it is not numpy)."""
        return np.array([self.loss(m) for m in means], dtype=np.float64)

    @abstractmethod
    def local_losses(self, models: Any, rows: np.ndarray) -> float:
        """The mean of f_i(x_i) over peers ``rows``, ``models`` their (k, dim) float64 rows."""

    @abstractmethod
    def evaluate(self, mean: Any, loss: float) -> tuple[float, ...]:
        """The values of :attr:`columns` for the model ``mean`` whose loss is ``loss``."""

    @abstractmethod
    def smoothness(self) -> float:
        """An upper bound on the smoothness L of every stochastic gradient's objective."""


class Quadratic(Problem):
    """f_i(x) = ½(x − x_i*)ᵀH(x − x_i*); stochastic gradients add N(0, σ²/d·I).

    Parameters
    ----------
    hessian
        (d, d) float64 H (symmetric, eigenvalues in [1/κ, 1]).
    optima
        (n, d) float64 local optima x_i*.
    noise
        σ², the mean squared norm of a gradient's noise.
    xp, dtype
        The backend and the state's dtype; ``rng`` draws the noise.
    """

    columns = ("excess_loss",)

    def __init__(self, hessian: np.ndarray, optima: np.ndarray, noise: float,
                 xp: Any, dtype: Any, rng: np.random.Generator) -> None:  # fmt: skip
        self.optimum = optima.mean(axis=0)
        spread = optima - self.optimum
        self.best = float(np.einsum("id,de,ie->", spread, hessian, spread) / (2 * len(optima)))
        self.h64, self.optimum64 = xp.asarray(hessian), xp.asarray(self.optimum)
        self.optima64 = xp.asarray(optima)
        self.h = xp.asarray(hessian, dtype=dtype)
        self.optima = xp.asarray(optima, dtype=dtype)
        if self.h.dtype == xp.float64:  # one copy of each when the state is float64
            self.h64, self.optima64 = self.h, self.optima
        self.sigma = float(np.sqrt(noise / hessian.shape[0]))
        self.rng, self.xp, self.dtype = rng, namespace(self.h), dtype

    def gradients(self, z: Any, rows: np.ndarray, scale: np.ndarray | None = None) -> Any:
        every = rows.size == self.optima.shape[0]
        optima = self.optima if every else take_rows(self.xp, self.optima, rows)
        grads = quadratic_grad(z, self.h, optima)
        if self.sigma > 0:
            noise = self.rng.standard_normal(tuple(z.shape)) * self.sigma
            grads = grads + self.xp.asarray(noise, dtype=self.dtype)
        return grads if scale is None else scaled(grads, scale)

    def loss(self, mean: Any) -> float:
        return self.best + self._excess(mean)

    def losses(self, means: np.ndarray) -> np.ndarray:
        diff = self.xp.asarray(means) - self.optimum64[None, :]
        excess = self.xp.sum((diff @ self.h64) * diff, axis=-1) / 2
        return self.best + np.asarray(to_numpy(excess), dtype=np.float64)

    def _excess(self, mean: Any) -> float:
        diff = mean - self.optimum64
        return float(diff @ self.h64 @ diff) / 2

    def local_losses(self, models: Any, rows: np.ndarray) -> float:
        optima = take_rows(self.xp, self.optima64, rows)
        return float(self.xp.mean(quadratic_losses(models, self.h64, optima)))

    def evaluate(self, mean: Any, loss: float) -> tuple[float, ...]:
        return (self._excess(mean),)

    def smoothness(self) -> float:
        return 1.0


class Logistic(Problem):
    """Multinomial logistic regression, each peer on its share of the training set.

    Parameters
    ----------
    train, test
        (features, labels) of the two splits: (N, F) float64 with the constant feature
        last, (N,) int64; ``classes`` C.
    layout
        Each peer's share (:class:`~sim.model.training.splits.Layout`).
    batch
        Samples per stochastic gradient, or None: the peer's whole share.
    xp, dtype, rng
        The backend, the state's dtype, the minibatch generator.
    """

    columns = ("accuracy",)

    def __init__(self, train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray],
                 classes: int, layout: Any, batch: int | None, xp: Any, dtype: Any,
                 rng: np.random.Generator) -> None:  # fmt: skip
        (x, y), (x_test, y_test) = train, test
        self.features, self.classes = x.shape[1], classes
        self.layout, self.batch, self.rng = layout, batch, rng
        self.x = xp.asarray(x, dtype=dtype)
        self.xp = namespace(self.x)
        self.x64 = self.x if self.x.dtype == xp.float64 else xp.asarray(x)
        self.y = xp.asarray(y)
        self.x_test, self.y_test = xp.asarray(x_test), xp.asarray(y_test)
        self.weights64 = xp.asarray(layout.sample_weights(x.shape[0]))
        self.max_norm2 = float(np.max(np.einsum("nf,nf->n", x, x)))

    def _shape(self, z: Any) -> Any:
        """(k, C, F) weight matrices of (k, C·F) model rows (class-major)."""
        return self.xp.reshape(z, (z.shape[0], self.classes, self.features))

    def gradients(self, z: Any, rows: np.ndarray, scale: np.ndarray | None = None) -> Any:
        index, weights = self._batch(rows, scale)
        blocks = _blocks(rows.size, index.shape[1] * self.features)
        with self._threads():
            grads = [self._block_grads(z[a:b, ...], index[a:b], weights[a:b]) for a, b in blocks]
        return grads[0] if len(grads) == 1 else self.xp.concat(grads, axis=0)

    def add_gradients(self, into: Any, z: Any, rows: np.ndarray,
                      scale: np.ndarray | None = None) -> None:  # fmt: skip
        if not (is_numpy(into) and into.flags.c_contiguous):  # else views could be copies
            super().add_gradients(into, z, rows, scale)
            return
        index, weights = self._batch(rows, scale)
        with self._threads():
            for a, b in _blocks(rows.size, index.shape[1] * self.features):  # z[a:b] read first
                self._block_grads(z[a:b, ...], index[a:b], weights[a:b], self._shape(into[a:b]))

    def _batch(self, rows: np.ndarray, scale: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(k, B) sample indices and weights of the peers' next gradients (the weights
        times ``scale``: the gradient is linear in them)."""
        if self.batch is None:
            index, weights = self.layout.padded(rows)
        else:
            index = self.layout.draw(self.rng, rows, self.batch)
            weights = np.full(index.shape, 1.0 / self.batch)
        return index, weights if scale is None else weights * scale[:, None]

    def _block_grads(self, z: Any, index: np.ndarray, weights: np.ndarray,
                     add_to: Any = None) -> Any:  # fmt: skip
        """(k, dim) gradients of one block of peers (or ``add_to`` plus them)."""
        w = self.xp.asarray(weights, dtype=z.dtype)
        grads = logistic_grad_gather(self._shape(z), self.x, self.y, index, w, add_to)
        return self.xp.reshape(grads, (index.shape[0], self.features * self.classes))

    def loss(self, mean: Any) -> float:
        w = self.xp.reshape(mean, (1, self.classes, self.features))
        total = 0.0
        with self._threads():
            for a, b in _blocks(self.x64.shape[0], self.features + self.classes):
                features, labels = self.x64[None, a:b, :], self.y[None, a:b]
                weights = self.weights64[None, a:b]
                total += float(logistic_losses(w, features, labels, weights)[0])
        return total

    def losses(self, means: np.ndarray) -> np.ndarray:
        """F of K models at once: one product per block of samples for all of them."""
        xp, k = self.xp, int(means.shape[0])
        w = xp.reshape(xp.asarray(means), (k, self.classes, self.features))
        total = xp.zeros(k, dtype=xp.float64)
        with self._threads():
            for a, b in _blocks(self.x64.shape[0], k * (self.features + self.classes)):
                features, labels = self.x64[None, a:b, :], self.y[None, a:b]
                total = total + logistic_losses(w, features, labels, self.weights64[None, a:b])
        return np.asarray(to_numpy(total), dtype=np.float64)

    def local_losses(self, models: Any, rows: np.ndarray) -> float:
        with self._threads():
            return self._local_losses(models, rows)

    def _local_losses(self, models: Any, rows: np.ndarray) -> float:
        xp, total = self.xp, 0.0
        index, weights = self.layout.padded(rows)
        for a, b in _blocks(rows.size, index.shape[1] * self.features):
            flat = index[a:b].reshape(-1)
            k, m = b - a, index.shape[1]
            features = xp.reshape(take_rows(xp, self.x64, flat), (k, m, self.features))
            labels = xp.reshape(take_rows(xp, self.y, flat), (k, m))
            w = self._shape(models[a:b, ...])
            total += float(xp.sum(logistic_losses(w, features, labels, xp.asarray(weights[a:b]))))
        return total / rows.size

    def evaluate(self, mean: Any, loss: float) -> tuple[float, ...]:
        w = self.xp.reshape(mean, (self.classes, self.features))
        with self._threads():
            right = predict(w, self.x_test) == self.y_test
        return (float(self.xp.mean(self.xp.astype(right, self.xp.float64))),)

    def _threads(self) -> contextlib.AbstractContextManager[Any]:
        """numpy: :func:`one_blas_thread`; other backends: nothing."""
        return one_blas_thread() if is_numpy(self.x) else contextlib.nullcontext()

    def smoothness(self) -> float:
        """½ max_j ‖a_j‖²: the softmax Hessian is at most ½ in norm per sample."""
        return self.max_norm2 / 2


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """A context in which numpy's BLAS runs on one thread.

    The logistic products are many small ones (C × B by F per peer) or a few of C × N by
    F: too small for a second thread to pay off, and on a busy machine each call then
    waits milliseconds for it (``scenarios/training_logistic.yaml``: 1.05 s with two
    threads, 0.18 s with one, at load 8 on 2 cores; F(x̄) was 60 % of the run). One
    thread also keeps the numbers independent of the machine's cores: two threads may
    round a sum differently (AMD EPYC, OpenBLAS 0.3.31: last-bit differences in 10 of
    ``training_logistic.yaml``'s 31 losses), which a test checks.
    """
    return _blas_pools().limit(limits=1, user_api="blas")


@functools.cache
def _blas_pools() -> Any:
    """The BLAS thread pools loaded with numpy (threadpoolctl), found once."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _blocks(count: int, elements_each: int) -> list[tuple[int, int]]:
    """[start, stop) blocks of ``count`` items of ``elements_each`` elements, at most
    :data:`~sim.kernels._xp.GATHER_ELEMENTS` elements a block (one item at least)."""
    step = max(1, GATHER_ELEMENTS // max(1, elements_each))
    return [(a, min(a + step, count)) for a in range(0, count, step)]


#: The problem class of each workload ``name``.
PROBLEMS: dict[str, type[Problem]] = {"quadratic": Quadratic, "logistic": Logistic}

__all__ = ["PROBLEMS", "Logistic", "Problem", "Quadratic"]
