"""Training objectives: every peer's loss and gradient in one batched array operation.

Pure functions over stacked per-peer arrays on any array-API backend (numpy, CuPy,
``array_api_strict``); no randomness (the minibatch indices and the gradient noise come
in as arrays), no I/O, no loop over peers.

| kernel | what it computes |
| --- | --- |
| :func:`logistic_grad` | multinomial logistic gradients of P peers on (P, B) samples each |
| :func:`logistic_grad_gather` | the same on ``table[index]``, gathered in cache-sized blocks |
| :func:`logistic_losses` | the same peers' losses |
| :func:`softmax_residual` | per-sample softmax(z) − onehot(y), classes on axis 1 |
| :func:`predict` | argmax class of one model on (N, F) samples |
| :func:`quadratic_grad` | rows of (x − x*) H: the gradients of ½(x − x_i*)ᵀH(x − x_i*) |
| :func:`quadratic_losses` | ½(x − x_i*)ᵀH(x − x_i*) per row |

A logistic model is a row of ``C·F`` parameters: the (C, F) weight matrix, class-major
(row c holds class c's weights), whose last feature column multiplies the constant
feature 1 (the bias). Logits are laid out (P, C, B), classes before samples, so that the
softmax reduces over a middle axis and both products read the (P, B, F) samples as
they were gathered. numpy arrays take :mod:`sim.kernels.logistic_np` (in place, logits
stored classes first, samples gathered in cache-sized blocks): the same values, bit
for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.kernels import logistic_np
from sim.kernels._xp import is_numpy, namespace, take_rows


def _logits(w: Any, features: Any) -> Any:
    """(P, C, B) logits W_p x_pb."""
    xp = namespace(w)
    return xp.matmul(w, xp.matrix_transpose(features))


def _shifted(logits: Any) -> Any:
    """``logits`` less each sample's largest (numpy: in place, less the largest of all
    when all lie within :data:`~sim.kernels.logistic_np.SHIFT_SPAN`: only round-off
    differs, softmax being shift-invariant)."""
    if is_numpy(logits):
        return logistic_np.shift(logits, 1)
    xp = namespace(logits)
    return logits - xp.max(logits, axis=1, keepdims=True)


def _onehot(labels: Any, classes: int, dtype: Any) -> Any:
    """(P, C, B) indicators of each sample's class."""
    xp = namespace(labels)
    codes = xp.reshape(xp.arange(classes, dtype=labels.dtype), (1, classes, 1))
    return xp.astype(xp.expand_dims(labels, axis=1) == codes, dtype)


def softmax_residual(logits: Any, labels: Any) -> Any:
    """softmax(z) − onehot(y): the gradient of each sample's cross-entropy in its logits.

    Parameters
    ----------
    logits
        (P, C, B) floating, classes on axis 1 (numpy: overwritten).
    labels
        (P, B) integer classes in 0 … C−1.

    Notes
    -----
    The largest logit of each sample is subtracted first, so no exponential overflows.
    """
    xp = namespace(logits)
    exp = xp.exp(_shifted(logits))
    return exp / xp.sum(exp, axis=1, keepdims=True) - _onehot(labels, logits.shape[1], logits.dtype)


def logistic_grad(w: Any, features: Any, labels: Any, weights: Any) -> Any:
    """Gradients of weighted multinomial logistic losses, for P peers at once.

    Parameters
    ----------
    w
        (P, C, F) floating: each peer's weight matrix (the bias is the last column).
    features
        (P, B, F), same dtype: each peer's samples (the last feature is the constant 1).
    labels
        (P, B) integer classes.
    weights
        (P, B), same dtype as ``w``: each sample's weight in its peer's loss (1/B for a
        minibatch of B; 0 for padding).

    Returns
    -------
    grads
        (P, C, F): ∇L_p = Σ_b a_pb (softmax(W_p x_pb) − e_{y_pb}) x_pbᵀ of the loss
        L_p = Σ_b a_pb ℓ(W_p; x_pb, y_pb), ℓ the cross-entropy.

    Notes
    -----
    Two batched matrix products over (P, B, F) and a softmax over (P, C, B): every
    peer's minibatch gradient in a handful of array operations, no loop over peers.
    numpy runs :func:`sim.kernels.logistic_np.grad` (in place, the same values).
    """
    if is_numpy(w) and is_numpy(features):
        return logistic_np.grad(w, features, labels, weights)
    xp = namespace(w)
    logits = _logits(w, features)
    residual = softmax_residual(logits, labels) * xp.expand_dims(weights, axis=1)
    return xp.matmul(residual, features)


def logistic_grad_gather(w: Any, table: Any, table_labels: Any, index: np.ndarray, weights: Any,
                         add_to: Any = None) -> Any:  # fmt: skip
    """:func:`logistic_grad` of the samples ``table[index]``, bit for bit, gathered in
    cache-sized blocks.

    Parameters
    ----------
    w
        (P, C, F) floating weight matrices.
    table, table_labels
        (N, F) samples, ``w``'s dtype, and their (N,) integer classes.
    index
        (P, B) host integers in 0 … N−1: each peer's samples.
    weights
        (P, B), ``w``'s dtype: each sample's weight.
    add_to
        None, or a (P, C, F) array that the gradients are added to (numpy: in place).

    Returns
    -------
    grads
        (P, C, F) gradients, or ``add_to`` plus them.

    Notes
    -----
    numpy (:func:`sim.kernels.logistic_np.grad_gather`): the samples are gathered in
    cache-sized blocks, each peer's two products are the BLAS calls of
    :func:`logistic_grad` and the softmax runs once over all P peers' logits (one
    common shift), so the values equal ``logistic_grad(w, table[index], …)`` exactly;
    ``add_to`` may share memory with ``w``. Other backends gather once and call
    :func:`logistic_grad`.
    """
    if not is_numpy(w):
        n_peers, batch = index.shape
        flat = np.asarray(index).reshape(-1)
        xp = namespace(w)
        features = xp.reshape(take_rows(xp, table, flat), (n_peers, batch, table.shape[1]))
        labels = xp.reshape(take_rows(xp, table_labels, flat), (n_peers, batch))
        grads = logistic_grad(w, features, labels, weights)
        return grads if add_to is None else add_to + grads
    return logistic_np.grad_gather(w, table, table_labels, np.asarray(index), weights, add_to)


def logistic_losses(w: Any, features: Any, labels: Any, weights: Any) -> Any:
    """(P,) losses L_p = Σ_b a_pb ℓ(W_p; x_pb, y_pb) (see :func:`logistic_grad`), with
    ℓ = log Σ_c e^(z_c) − z_y."""
    xp = namespace(w)
    shifted = _shifted(_logits(w, features))
    onehot = _onehot(labels, w.shape[1], w.dtype)
    per_sample = xp.log(xp.sum(xp.exp(shifted), axis=1)) - xp.sum(onehot * shifted, axis=1)
    return xp.sum(weights * per_sample, axis=-1)


def predict(w: Any, features: Any) -> Any:
    """(N,) predicted classes (the largest logit; the first on ties) of one model.

    ``w``: (C, F); ``features``: (N, F) of the same dtype.
    """
    xp = namespace(w)
    return xp.argmax(xp.matmul(features, xp.matrix_transpose(w)), axis=-1)


def quadratic_grad(x: Any, hessian: Any, optima: Any) -> Any:
    """Rows of the gradients of f_i(x) = ½(x − x_i*)ᵀH(x − x_i*): (x_i − x_i*) H.

    Parameters
    ----------
    x, optima
        (P, d) floating: each peer's model and its local optimum x_i*.
    hessian
        (d, d) symmetric H, same dtype.
    """
    namespace(x)  # refuses a non-array input early
    return (x - optima) @ hessian


def quadratic_losses(x: Any, hessian: Any, optima: Any) -> Any:
    """(P,) values ½(x_i − x_i*)ᵀH(x_i − x_i*) of the rows of ``x`` (see :func:`quadratic_grad`)."""
    xp = namespace(x)
    diff = x - optima
    return xp.sum((diff @ hessian) * diff, axis=-1) / 2


__all__ = [
    "logistic_grad",
    "logistic_grad_gather",
    "logistic_losses",
    "predict",
    "quadratic_grad",
    "quadratic_losses",
    "softmax_residual",
]
