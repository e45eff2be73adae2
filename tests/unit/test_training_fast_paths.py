"""The training step's fast paths give the general path's numbers, bit for bit.

- plain SGD of every peer with a plain protocol adds its update straight into the numpy
  state (:meth:`Trainer._fused`): the same models as the gradient-then-add path;
- the optimizer's numpy temporaries are updated in place: the same steps and momentum
  buffers as torch's formulas written out, every peer or some, and the gradient passed
  in is never changed;
- the logistic products run BLAS on one thread, with the numbers of the default pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sim
from sim.engine.schedules import engine_for
from sim.model.scenario.workload import Sgd
from sim.model.training.optimizer import SgdState


def trainer_and_state(protocol: str, workload: dict, peers: int = 40):
    mapping = {"peers": {"count": peers}, "protocol": {"name": protocol},
               "workload": workload, "stop": {"max_rounds": 3}}  # fmt: skip
    engine = engine_for(sim.scenario_from_mapping(mapping), 0)
    return engine.trainer, engine.state


ROOT = Path(__file__).resolve().parents[2]
LOGISTIC = {"name": "logistic", "split": "shared", "batch_size": 8, "optimizer": {"lr": 0.5}}


@pytest.mark.parametrize("workload", [LOGISTIC, {"name": "quadratic", "noise": 0.5}])
def test_fused_steps_move_the_models_as_the_general_path(workload, monkeypatch):
    trainer, state = trainer_and_state("all_reduce", workload)
    rows = np.arange(state.x.shape[0])
    assert trainer._fused(state, rows)
    twin, twin_state = trainer_and_state("all_reduce", workload)
    monkeypatch.setattr(type(twin), "_fused", lambda self, state, rows: False)
    for k in (1, 3):
        trainer.steps(state, rows, k)
        twin.steps(twin_state, rows, k)
        np.testing.assert_array_equal(state.x, twin_state.x)
    assert np.abs(state.x).max() > 0  # the steps moved the models


@pytest.mark.parametrize(
    ("protocol", "optimizer", "some"),
    [
        ("all_reduce", {"momentum": 0.9}, False),  # momentum: not plain SGD
        ("all_reduce", {"weight_decay": 0.1}, False),
        ("all_reduce", {}, True),  # not every peer steps
        ("push_sum", {}, False),  # the model is x/w
        ("a2cid2", {}, False),  # x_tilde moves too
    ],
)
def test_other_steps_take_the_general_path(protocol, optimizer, some):
    trainer, state = trainer_and_state(protocol, {**LOGISTIC, "optimizer": optimizer})
    rows = np.arange(0, state.x.shape[0], 2 if some else 1)
    assert not trainer._fused(state, rows)


def torch_step(sgd: Sgd, x, g, b, lr):
    """torch.optim.SGD's step, written out: (update, new buffer)."""
    g = g + sgd.weight_decay * x if sgd.weight_decay else g
    if not sgd.momentum:
        return -lr[:, None] * g, b
    b = sgd.momentum * b + g
    d = g + sgd.momentum * b if sgd.nesterov else b
    return -lr[:, None] * d, b


@pytest.mark.parametrize(("momentum", "nesterov"), [(0.0, False), (0.9, False), (0.9, True)])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
@pytest.mark.parametrize("schedule", ["constant", "cosine"])
def test_in_place_updates_equal_torchs_formulas_bit_for_bit(momentum, nesterov, weight_decay,
                                                            schedule):  # fmt: skip
    sgd = Sgd(lr=0.3, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay,
              schedule=schedule, total_steps=7)  # fmt: skip
    rng = np.random.default_rng(5)
    n, dim = 9, 6
    state, buffer = SgdState(sgd, np.zeros((n, dim))), np.zeros((n, dim))
    for step, rows in enumerate([np.arange(n), np.array([1, 4, 8]), np.arange(n)] * 2):
        x, g = rng.standard_normal((rows.size, dim)), rng.standard_normal((rows.size, dim))
        g_before = g.copy()
        lr = sgd.lr * (0.5 * (1 + np.cos(np.pi * state.steps[rows] / 7))
                       if schedule == "cosine" else np.ones(rows.size))  # fmt: skip
        expected, new_b = torch_step(sgd, x, g, buffer[rows], lr)
        buffer[rows] = new_b
        update = state.update(x, g, rows)
        np.testing.assert_array_equal(update, expected, err_msg=f"step {step}")
        np.testing.assert_array_equal(g, g_before)  # the caller's gradient is untouched
        if momentum:
            np.testing.assert_array_equal(state.buffer, buffer)
            update *= 2  # the update handed out is not the momentum buffer itself
            np.testing.assert_array_equal(state.buffer, buffer)


def test_logistic_products_run_on_one_blas_thread_whatever_the_pool(monkeypatch):
    """The products run on one BLAS thread, so a run's numbers do not depend on the BLAS
    threads the process has (the machine's cores): two threads may split a sum and
    round it differently (AMD EPYC, OpenBLAS 0.3.31: 10 of this scenario's 31 losses
    differ in the last bit without the limit)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from sim.model.training import problems

    scenario = sim.load_scenario(ROOT / "scenarios" / "training_logistic.yaml")
    seen: list[int] = []
    losses = problems.logistic_losses

    def spy(*args: Any) -> Any:
        seen.extend(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
        return losses(*args)

    monkeypatch.setattr(problems, "logistic_losses", spy)
    with threadpool_limits(limits=2, user_api="blas"):
        limited = sim.run(scenario).metrics
    assert seen
    assert set(seen) == {1}
    with threadpool_limits(limits=1, user_api="blas"):
        single = sim.run(scenario).metrics
    for column in ("loss", "accuracy", "local_loss", "consensus"):
        np.testing.assert_array_equal(limited[column], single[column])
