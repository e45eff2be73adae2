"""Local SGD for any set of peers: the one API every clock calls.

:meth:`Trainer.steps` makes peers ``rows`` take k gradient steps each: per step, one
batched gradient of all of them (:class:`~sim.model.training.problems.Problem`), one
optimizer update (:class:`~sim.model.training.optimizer.SgdState`), one write into the
state. The rounds clock calls it for the present peers before each averaging round
(:mod:`sim.engine.training`); a network clock calls it for the peers whose local work
just ended.

**What a step moves.** A peer's model is its estimate z (:meth:`~protocols.base.
Protocol.estimate`: x, or x/w with push-sum weights); the gradient is taken at z and
the optimizer's update u = −γ·d moves z by exactly u, whatever the protocol:

- plain protocols: x ← x + u;
- A²CiD² (``x_tilde``, :data:`MOVES_WITH_X`): x ← x + u and x̃ ← x̃ + u, the paper's
  gradient event (the same step to both, so x̃ − x, which the mixing decays, is kept);
- push-sum weights (``w``, :data:`WEIGHTS`; push_sum, sgp with ``push_sum``): w stays
  and x ← x + w·u, so z = x/w ← z + u. Σx/Σw then moves by the w-weighted mean of the
  updates. Stochastic Gradient Push (Assran et al., 2019, Alg. 1) adds u to x instead,
  which moves z by u/w: with push_sum's halving pushes w ranges over powers of two and
  a light peer takes steps many times γ (unstable even for γ < 1/L).

A protocol array none of these names is refused when the trainer is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from protocols.base import Protocol
from protocols.contract import State
from sim.core.errors import SimulationError
from sim.kernels._xp import is_numpy, namespace, take_rows
from sim.kernels.mixing import put_rows
from sim.model.rejoin import reset_rows
from sim.model.training.optimizer import SgdState
from sim.model.training.problems import PROBLEMS, Problem

#: Protocol arrays (``state.extra``) that a gradient step moves by the model's update.
MOVES_WITH_X = frozenset({"x_tilde"})
#: Push-sum weights: the model is x/w; a step moves x by w·u and leaves w alone.
WEIGHTS = frozenset({"w"})


@dataclass
class Deltas:
    """What k steps changed the models of peers ``rows`` ((m, dim); ``overlap``:
    computed from the models before a round, added after it)."""

    rows: np.ndarray
    model: Any


class Trainer:
    """The local optimizer of every peer, and the metrics of a run's models.

    Parameters
    ----------
    problem
        The peers' objectives.
    sgd
        The optimizer state (step counts, momentum buffers).
    protocol
        The run's protocol (its :meth:`~protocols.base.Protocol.estimate` is the model).
    start
        (n, dim) host array: every peer's starting model (:func:`start_vectors`); a
        ``reset`` rejoin restarts from its row.
    """

    def __init__(self, problem: Problem, sgd: SgdState, protocol: Protocol, start: np.ndarray):
        self.problem, self.sgd, self.protocol, self.start = problem, sgd, protocol, start
        self._plain = type(protocol).estimate is Protocol.estimate

    @property
    def columns(self) -> tuple[str, ...]:
        """The metrics columns a training run adds, in order (:func:`metric_columns`)."""
        return _columns(self.problem.columns)

    def check(self, state: State) -> None:
        """Refuse protocol arrays whose fate under a gradient step is not defined."""
        unknown = sorted(set(state.extra) - MOVES_WITH_X - WEIGHTS)
        if unknown:
            name = type(self.protocol).__name__
            raise SimulationError(
                f"{name} keeps state.extra[{unknown[0]!r}], which sim/model/training/"
                "trainer.py does not know how a gradient step moves (MOVES_WITH_X or WEIGHTS)"
            )

    # -- steps -------------------------------------------------------------------------

    def steps(self, state: State, rows: np.ndarray, k: int) -> None:
        """Peers ``rows`` ((m,) distinct, sorted) take ``k`` gradient steps each."""
        fused = self._fused(state, rows)
        for _ in range(k if rows.size else 0):
            z = self.models(state, rows)
            if fused:  # x += −γ·g, the product adding into x as it goes
                self.problem.add_gradients(state.x, z, rows, -self.sgd.rates(rows))
                continue
            if self.sgd.plain:  # −γ·g: the gradient with its samples weighted by −γ
                update = self.problem.gradients(z, rows, -self.sgd.rates(rows))
            else:
                update = self.sgd.update(z, self.problem.gradients(z, rows), rows)
            self._move(state, rows, update)

    def _fused(self, state: State, rows: np.ndarray) -> bool:
        """Whether a step of peers ``rows`` may add its update straight into the numpy
        ``state.x`` (every peer steps, plain SGD, the model is x, no protocol arrays):
        the values of the general path, bit for bit, without its (n, dim) temporaries."""
        every = rows.size == state.x.shape[0]
        return every and self.sgd.plain and self._plain and not state.extra and is_numpy(state.x)

    def models(self, state: State, rows: np.ndarray) -> Any:
        """(m, dim) models of peers ``rows``: their estimates, in the state's dtype."""
        every = rows.size == state.x.shape[0]
        if self._plain:
            return state.x if every else take_rows(namespace(state.x), state.x, rows)
        if every:
            return self.protocol.estimate(state)
        xp = namespace(state.x)
        sub = State(take_rows(xp, state.x, rows),
                    {k: take_rows(xp, v, rows) for k, v in state.extra.items()})  # fmt: skip
        return self.protocol.estimate(sub)

    def deltas(self, state: State, rows: np.ndarray, k: int) -> Deltas:
        """What ``k`` steps of peers ``rows`` would change in their models; the state
        is left as it was (the optimizer state advances)."""
        keys = ["x", *sorted(state.extra)]
        saved = {key: self._rows(state, key, rows) for key in keys}
        xp = namespace(state.x)
        before = xp.asarray(self.models(state, rows), copy=True)
        self.steps(state, rows, k)
        change = self.models(state, rows) - before
        for key in keys:
            self._set(state, key, put_rows(self._get(state, key), rows, saved[key]))
        return Deltas(rows, change)

    def add(self, state: State, deltas: Deltas) -> None:
        """Move the peers' current models by what :meth:`deltas` computed."""
        self._move(state, deltas.rows, deltas.model)

    def _move(self, state: State, rows: np.ndarray, update: Any) -> None:
        """Move the models of peers ``rows`` by ``update`` ((m, dim); see the module
        doc: x by update (times w with push-sum weights), x̃ by update)."""
        every = rows.size == state.x.shape[0]
        change = update
        for key in WEIGHTS & set(state.extra):
            weights = state.extra[key]
            change = change * (weights if every else take_rows(namespace(weights), weights, rows))
        self._add_rows(state, "x", rows, change)
        for key in MOVES_WITH_X & set(state.extra):
            self._add_rows(state, key, rows, update)

    def _add_rows(self, state: State, key: str, rows: np.ndarray, change: Any) -> None:
        array = self._get(state, key)
        if rows.size == array.shape[0]:
            moved = _add(array, change)
        else:
            moved = put_rows(array, rows, take_rows(namespace(array), array, rows) + change)
        self._set(state, key, moved)

    def _get(self, state: State, key: str) -> Any:
        return state.x if key == "x" else state.extra[key]

    def _set(self, state: State, key: str, array: Any) -> None:
        if key == "x":
            state.x = array
        else:
            state.extra[key] = array

    def _rows(self, state: State, key: str, rows: np.ndarray) -> Any:
        array = self._get(state, key)
        return take_rows(namespace(array), array, rows)  # a gather: a new array

    # -- rejoin ------------------------------------------------------------------------

    def returned(self, state: State, rows: np.ndarray, rejoin: str, init: str) -> None:
        """Peers ``rows`` came back under ``churn.rejoin``: ``reset`` restarts their
        model from the workload's start (``init: each`` keeps the rejoin's fresh draw of
        ``vector.init``) and their momentum; ``fetch`` restarts their momentum (the
        model and protocol arrays were copied, the optimizer state is not); ``keep``
        keeps everything. Step counts (the schedule's clock) always continue."""
        if rejoin == "keep" or rows.size == 0:
            return
        if rejoin == "reset" and init != "each":
            xp = namespace(state.x)
            reset_rows(state, rows, xp.asarray(self.start[rows], dtype=state.x.dtype))
        self.sgd.forget(rows)

    # -- metrics -----------------------------------------------------------------------

    def metrics(self, estimate: Any, mean: Any, var: float, rows: np.ndarray) -> tuple[Any, ...]:
        """The values of :attr:`columns`: F(x̄) for the mean ``mean`` of the estimates of
        the existing peers ``rows``, the problem's own metrics, the mean of f_i(x_i),
        the consensus distance (1/n)Σ‖x_i − x̄‖² (= var·dim) and the steps taken."""
        dim = int(estimate.shape[1])
        if mean is None or rows.size == 0:
            nan = float("nan")
            return (nan, *(nan for _ in self.problem.columns), nan, nan, self.total_steps)
        loss = self.problem.loss(mean)
        xp = namespace(estimate)
        models = xp.astype(take_rows(xp, estimate, rows), xp.float64)
        local = self.problem.local_losses(models, rows)
        return (loss, *self.problem.evaluate(mean, loss), local, var * dim, self.total_steps)

    def loss(self, mean: Any) -> float:
        """F(x̄) for the (dim,) float64 mean model ``mean`` (NaN without one)."""
        return float("nan") if mean is None else self.problem.loss(mean)

    def losses(self, means: np.ndarray) -> np.ndarray:
        """F of each row of the (K, dim) float64 host array ``means`` ((K,) float64)."""
        return self.problem.losses(means)

    @property
    def total_steps(self) -> int:
        """Gradient steps taken so far, all peers together."""
        return int(self.sgd.steps.sum())


def metric_columns(name: str) -> tuple[str, ...]:
    """The metrics columns of a run with workload ``name``: ``loss``, the problem's own
    (``accuracy`` or ``excess_loss``), ``local_loss``, ``consensus``, ``grad_steps``."""
    return _columns(PROBLEMS[name].columns)


def _columns(own: tuple[str, ...]) -> tuple[str, ...]:
    return ("loss", *own, "local_loss", "consensus", "grad_steps")


def _add(array: Any, change: Any) -> Any:
    """``array + change``; numpy in place."""
    if type(array) is np.ndarray:
        array += change
        return array
    return array + change


def start_vectors(init: str, x0: np.ndarray) -> np.ndarray:
    """Every peer's starting model: ``zeros``; ``same``: peer 0's row of the
    ``vector.init`` draw ``x0`` for everyone; ``each``: ``x0`` as drawn."""
    if init == "zeros":
        return np.zeros_like(x0)
    if init == "same":
        return np.repeat(x0[:1], x0.shape[0], axis=0)
    return x0


__all__ = ["MOVES_WITH_X", "WEIGHTS", "Deltas", "Trainer", "metric_columns", "start_vectors"]
