"""Each peer's local optimizer: SGD with momentum, weight decay and a schedule.

The update follows ``torch.optim.SGD`` (no dampening), row by row for the peers that
step, with each peer's own step count t_i driving its learning rate:

    g ← g + λ·x                     (weight_decay λ)
    b ← μ·b + g                     (momentum μ > 0; b starts at 0, so b = g at t = 0)
    d = g + μ·b (Nesterov), b, or g (μ = 0)
    x ← x − γ(t_i)·d

Schedules (:func:`lr_factor`), over ``total_steps`` T of a peer's steps:

- ``constant``: 1;
- ``cosine``: ½(1 + cos(π·min(t, T)/T)), 0 from step T on;
- ``step``: ``gamma`` to the number of ``milestones`` m with t ≥ ⌊m·T⌋;

times a linear warm-up min(1, (t + 1)/``warmup_steps``) when it is set.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sim.kernels._xp import column, namespace, take_rows
from sim.kernels.mixing import put_rows
from sim.model.scenario.workload import Sgd


def lr_factor(sgd: Sgd, steps: np.ndarray) -> np.ndarray:
    """(k,) float64 multipliers of ``sgd.lr`` for peers at step counts ``steps``."""
    t = np.asarray(steps, dtype=np.float64)
    factor = np.ones_like(t)
    if sgd.warmup_steps:
        factor *= np.minimum(1.0, (t + 1) / sgd.warmup_steps)
    total = sgd.total_steps
    if sgd.schedule == "cosine" and total:
        factor *= 0.5 * (1 + np.cos(math.pi * np.minimum(t, total) / total))
    elif sgd.schedule == "step" and total:
        edges = np.floor(np.asarray(sgd.milestones) * total)
        factor *= sgd.gamma ** np.sum(t[:, None] >= edges[None, :], axis=1)
    return factor


class SgdState:
    """SGD's per-peer state: step counts (host) and momentum buffers (backend).

    Parameters
    ----------
    sgd
        The optimizer's settings (``workload.optimizer``).
    like
        An (n_peers, dim) backend array: the buffers take its namespace, dtype, shape.
    """

    def __init__(self, sgd: Sgd, like: Any) -> None:
        self.sgd = sgd
        self.n = int(like.shape[0])
        self.steps = np.zeros(self.n, dtype=np.int64)
        xp = namespace(like)
        self.buffer = xp.zeros_like(like) if sgd.momentum > 0 else None

    @property
    def plain(self) -> bool:
        """No weight decay and no momentum: the step is −γ(t_i)·g_i itself, so callers
        may fold −γ(t_i) into the gradient (:meth:`rates`)."""
        return not self.sgd.weight_decay and self.buffer is None

    def rates(self, rows: np.ndarray) -> np.ndarray:
        """(k,) float64 learning rates γ(t_i) of peers ``rows`` for their next step;
        their step counts advance."""
        lr = self.sgd.lr * lr_factor(self.sgd, self.steps[rows])
        self.steps[rows] += 1
        return lr

    def update(self, z: Any, g: Any, rows: np.ndarray) -> Any:
        """The step −γ(t_i)·d_i of peers ``rows`` (k distinct) at models ``z`` with
        stochastic gradients ``g`` (both (k, dim), neither changed); advances their
        buffers and counts. numpy: the temporaries are updated in place (the values
        are the same, bit for bit)."""
        sgd, own = self.sgd, bool(self.sgd.weight_decay)  # own: d is a temporary of ours
        if sgd.weight_decay:
            g = _plus(sgd.weight_decay * z, g)
        d = g
        if self.buffer is not None:
            b = self._momentum(g, rows)
            d, own = (_plus(sgd.momentum * b, g), True) if sgd.nesterov else (b, False)
        return scaled(d, -self.rates(rows), in_place=own)

    def _momentum(self, g: Any, rows: np.ndarray) -> Any:
        """b_i ← μ·b_i + g_i for peers ``rows``; their new buffers (the state's own
        array when every peer steps: not to be changed)."""
        xp, mu, buffer = namespace(g), self.sgd.momentum, self.buffer
        assert buffer is not None  # momentum > 0
        if rows.size < self.n:
            b = _plus(mu * take_rows(xp, buffer, rows), g)
            self.buffer = put_rows(buffer, rows, b)
            return b
        if type(buffer) is np.ndarray:
            buffer *= mu
            buffer += g
        else:
            self.buffer = buffer = mu * buffer + g
        return buffer

    def forget(self, rows: np.ndarray) -> None:
        """Peers ``rows`` restart their momentum (a rejoin that replaced their model)."""
        if self.buffer is not None and rows.size:
            xp = namespace(self.buffer)
            zeros = xp.zeros((rows.size, self.buffer.shape[1]), dtype=self.buffer.dtype)
            self.buffer = put_rows(self.buffer, rows, zeros)


def scaled(d: Any, factors: np.ndarray, in_place: bool = False) -> Any:
    """Each row of ``d`` ((k, dim)) times its factor ((k,) host): one scalar when they
    are equal; ``in_place``: ``d`` may be overwritten (numpy)."""
    factor = float(factors[0]) if np.all(factors == factors[0]) else None
    if in_place and type(d) is np.ndarray:
        d *= factor if factor is not None else column(np, d, factors)
        return d
    return factor * d if factor is not None else column(namespace(d), d, factors) * d


def _plus(t: Any, g: Any) -> Any:
    """``t + g`` for a temporary ``t`` (numpy: added in place)."""
    if type(t) is np.ndarray:
        t += g
        return t
    return t + g


__all__ = ["SgdState", "lr_factor", "scaled"]
