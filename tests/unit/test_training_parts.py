"""The parts of a training workload: schedules, SGD, splits, data files, problems, rejoin."""

from __future__ import annotations

import math

import numpy as np
import pytest

import sim
from protocols.contract import State
from sim.core.errors import ScenarioError, SimulationError
from sim.engine.schedules import engine_for
from sim.model.scenario.workload import LogisticWorkload, QuadraticWorkload, Sgd
from sim.model.training.build import quadratic, standardised
from sim.model.training.data import data_shape, load_data
from sim.model.training.optimizer import SgdState, lr_factor
from sim.model.training.splits import Layout, dirichlet_owner, holdout, iid_owner
from sim.model.training.trainer import start_vectors

# -- schedules and SGD ------------------------------------------------------------------


def test_learning_rate_schedules():
    steps = np.array([0, 25, 50, 75, 99, 100, 150])
    assert np.all(lr_factor(Sgd(), steps) == 1)
    cosine = lr_factor(Sgd(schedule="cosine", total_steps=100), steps)
    np.testing.assert_allclose(cosine, [1, (1 + math.cos(math.pi / 4)) / 2, 0.5,
                                        (1 + math.cos(3 * math.pi / 4)) / 2,
                                        (1 + math.cos(0.99 * math.pi)) / 2, 0, 0])  # fmt: skip
    step = lr_factor(Sgd(schedule="step", total_steps=100, milestones=[0.5, 0.75]), steps)
    np.testing.assert_allclose(step, [1, 1, 0.1, 0.01, 0.01, 0.01, 0.01])
    warm = lr_factor(Sgd(warmup_steps=4), np.arange(6))
    np.testing.assert_allclose(warm, [0.25, 0.5, 0.75, 1, 1, 1])


def test_sgd_follows_torch_semantics_row_by_row():
    """Two steps of two peers with momentum, Nesterov and weight decay, by hand."""
    sgd = Sgd(lr=0.5, momentum=0.9, nesterov=True, weight_decay=0.1)
    state = SgdState(sgd, np.zeros((3, 2)))
    rows = np.array([0, 2])
    z = np.array([[1.0, -1.0], [2.0, 0.0]])
    g = np.array([[0.5, 0.5], [1.0, -1.0]])
    u1 = state.update(z, g, rows)
    g1 = g + 0.1 * z
    np.testing.assert_allclose(u1, -0.5 * (g1 + 0.9 * g1))  # b = g at the first step
    u2 = state.update(z + u1, g, rows)
    g2 = g + 0.1 * (z + u1)
    b2 = 0.9 * g1 + g2
    np.testing.assert_allclose(u2, -0.5 * (g2 + 0.9 * b2))
    assert state.steps.tolist() == [2, 0, 2]
    np.testing.assert_array_equal(state.buffer[1], [0, 0])  # peer 1 never stepped
    state.forget(np.array([2]))
    np.testing.assert_array_equal(state.buffer[2], [0, 0])
    np.testing.assert_allclose(state.buffer[0], b2[0])


def test_peers_at_different_steps_get_their_own_learning_rates():
    state = SgdState(
        Sgd(lr=1.0, schedule="step", total_steps=4, milestones=[0.5]), np.zeros((2, 1))
    )
    state.steps[:] = [0, 3]
    update = state.update(np.zeros((2, 1)), np.ones((2, 1)), np.array([0, 1]))
    np.testing.assert_allclose(update, [[-1.0], [-0.1]])


# -- splits -------------------------------------------------------------------------------


def test_holdout_and_iid_split_partition_the_samples_in_equal_shares():
    rng = np.random.default_rng(0)
    train, test = holdout(103, 0.2, rng)
    assert test.size == 21
    assert train.size == 82
    assert sorted(np.concatenate((train, test)).tolist()) == list(range(103))
    layout = Layout.from_owner(iid_owner(82, 5, rng), 5)
    assert sorted(layout.size.tolist()) == [16, 16, 16, 17, 17]
    assert sorted(layout.order.tolist()) == list(range(82))
    np.testing.assert_allclose(layout.sample_weights(82).sum(), 1.0)


def test_dirichlet_split_skews_labels_and_leaves_no_peer_empty():
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(10), 30)
    owner = dirichlet_owner(labels, 10, 40, 0.05, rng)
    assert np.bincount(owner, minlength=40).min() >= 1
    classes_per_peer = [np.unique(labels[owner == p]).size for p in range(40)]
    assert np.mean(classes_per_peer) < 3  # α = 0.05: most peers see one or two classes
    flat = dirichlet_owner(labels, 10, 5, 1e4, rng)  # α large: close to iid
    counts = np.array([[np.sum((owner_ == p) & (labels == c)) for c in range(10)]
                       for owner_ in [flat] for p in range(5)])  # fmt: skip
    assert counts.min() >= 3  # every peer holds every class


def test_layout_batches_and_padded_shares():
    layout = Layout.from_owner(np.array([1, 0, 1, 1, 0, 2]), 3)
    index, weights = layout.padded(np.array([0, 1, 2]))
    assert index.shape == (3, 3)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    assert set(index[1][weights[1] > 0].tolist()) == {0, 2, 3}
    drawn = layout.draw(np.random.default_rng(0), np.array([2, 0]), 50)
    assert set(drawn[0].tolist()) == {5}
    assert set(drawn[1].tolist()) == {1, 4}
    shared = Layout.shared(7, 4)
    np.testing.assert_allclose(shared.sample_weights(7), 1 / 7)


# -- data ----------------------------------------------------------------------------------


def npz(tmp_path, **arrays) -> str:
    path = tmp_path / "data.npz"
    np.savez(path, **arrays)
    return str(path)


def test_a_user_npz_is_read_and_its_labels_become_classes(tmp_path):
    x = np.arange(40.0).reshape(20, 2)
    y = np.array([7, 3] * 10)
    workload = LogisticWorkload(data="file", file=npz(tmp_path, X=x, y=y))
    assert data_shape(workload) == (20, 2, 2)
    data = load_data(workload, np.random.default_rng(0))
    assert data.classes == 2
    np.testing.assert_array_equal(data.y, (y == 7).astype(int))
    np.testing.assert_array_equal(data.x, x)


@pytest.mark.parametrize(
    ("arrays", "says"),
    [
        ({"X": np.zeros((5, 2))}, "an archive without y"),
        ({"X": np.zeros(5), "y": np.zeros(5, int)}, "X of shape (5,)"),
        ({"X": np.zeros((5, 2)), "y": np.zeros(4, int)}, "y of shape (4,)"),
        ({"X": np.zeros((5, 2)), "y": np.zeros(5)}, "dtype float64"),
        ({"X": np.zeros((5, 2)), "y": np.zeros(5, int)}, "a single class"),
    ],
)
def test_a_broken_npz_is_one_error_naming_the_key_and_the_file(tmp_path, arrays, says):
    workload = LogisticWorkload(data="file", file=npz(tmp_path, **arrays))
    with pytest.raises(ScenarioError) as info:
        data_shape(workload)
    message = str(info.value)
    assert message.startswith("workload.file: ")
    assert says in message
    assert "\n" not in message


def test_non_finite_features_are_refused_when_the_data_is_loaded(tmp_path):
    x = np.ones((6, 2))
    x[4, 1] = np.nan
    workload = LogisticWorkload(data="file", file=npz(tmp_path, X=x, y=np.arange(6) % 2))
    with pytest.raises(ScenarioError, match="finite numbers in X, got nan at row 4, column 1"):
        load_data(workload, np.random.default_rng(0))


def test_a_file_that_is_not_an_npz(tmp_path):
    path = tmp_path / "x.npz"
    path.write_bytes(b"not a zip")
    with pytest.raises(ScenarioError, match=r"not an \.npz archive"):
        data_shape(LogisticWorkload(data="file", file=str(path)))


def test_standardised_features_end_with_the_constant_one():
    train = np.array([[1.0, 5.0], [3.0, 5.0]])
    scaled_train, scaled_test = standardised(train, np.array([[2.0, 7.0]]))
    np.testing.assert_allclose(scaled_train, [[-1, 0, 1], [1, 0, 1]])
    np.testing.assert_allclose(scaled_test, [[0, 2, 1]])  # a constant feature is only centred


# -- problems ---------------------------------------------------------------------------


def test_the_quadratic_has_the_asked_condition_and_spread():
    workload = QuadraticWorkload(condition=50.0, heterogeneity=2.5)
    hessian, optima = quadratic(workload, 6, 4, np.random.default_rng(0))
    eigenvalues = np.linalg.eigvalsh(hessian)
    np.testing.assert_allclose([eigenvalues.min(), eigenvalues.max()], [1 / 50, 1], rtol=1e-12)
    spread = optima - optima.mean(axis=0)
    assert np.mean(np.sum(spread**2, axis=1)) == pytest.approx(2.5, rel=1e-12)
    _, one = quadratic(workload, 1, 4, np.random.default_rng(0))
    assert one.shape == (1, 4)


def test_start_vectors():
    x0 = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(start_vectors("zeros", x0), np.zeros((3, 2)))
    np.testing.assert_array_equal(start_vectors("same", x0), [[0, 1]] * 3)
    assert start_vectors("each", x0) is x0


# -- the trainer in a run -----------------------------------------------------------------


def engine(protocol: str, **workload: object):
    mapping = {"peers": {"count": 6}, "vector": {"dim": 3}, "protocol": {"name": protocol},
               "workload": {"name": "quadratic", **workload},
               "stop": {"max_rounds": 2}}  # fmt: skip
    return engine_for(sim.scenario_from_mapping(mapping), 0)


def test_a_reset_rejoin_restarts_the_model_its_protocol_arrays_and_its_momentum():
    run = engine("a2cid2", init="same", optimizer={"momentum": 0.9})
    trainer, state = run.trainer, run.state
    trainer.steps(state, np.arange(6), 3)
    rows = np.array([1, 4])
    before = state.x.copy()
    trainer.returned(state, rows, "reset", "same")
    np.testing.assert_array_equal(state.x[rows], trainer.start[rows])
    np.testing.assert_array_equal(state.extra["x_tilde"][rows], trainer.start[rows])
    np.testing.assert_array_equal(trainer.sgd.buffer[rows], 0)
    np.testing.assert_array_equal(state.x[[0, 2, 3, 5]], before[[0, 2, 3, 5]])
    assert trainer.sgd.buffer[0].any()
    trainer.returned(state, np.array([0]), "fetch", "same")
    np.testing.assert_array_equal(trainer.sgd.buffer[0], 0)  # the optimizer is not fetched
    assert trainer.sgd.steps.tolist() == [3] * 6  # the schedule's clock continues


def test_push_sum_weights_scale_the_step_so_each_model_takes_the_optimizers_step():
    run = engine("push_sum", noise=0.0)
    trainer, state = run.trainer, run.state
    state.extra["w"][:] = np.array([[0.25], [1.0], [2.0], [0.5], [1.0], [1.25]])
    state.x[:] = state.x + 1.0
    models = state.x / state.extra["w"]
    rows = np.array([0, 2, 3])
    expected = models[rows] - 0.1 * trainer.problem.gradients(models[rows], rows)
    trainer.steps(state, rows, 1)
    np.testing.assert_allclose(state.x[rows] / state.extra["w"][rows], expected, rtol=1e-14)


def test_a_protocol_array_the_trainer_does_not_know_is_refused():
    run = engine("gossip")
    state = State(x=run.state.x, extra={"y_mystery": run.state.x.copy()})
    with pytest.raises(SimulationError, match="y_mystery"):
        run.trainer.check(state)


def test_overlap_leaves_the_state_as_it_was_until_the_changes_are_added():
    run = engine("a2cid2", local_steps=2, init="same")
    trainer, state = run.trainer, run.state
    x0, tilde0 = state.x.copy(), state.extra["x_tilde"].copy()
    rows = np.array([0, 1, 5])
    deltas = trainer.deltas(state, rows, 2)
    np.testing.assert_array_equal(state.x, x0)
    np.testing.assert_array_equal(state.extra["x_tilde"], tilde0)
    trainer.add(state, deltas)
    reference = engine("a2cid2", local_steps=2, init="same")
    reference.trainer.steps(reference.state, rows, 2)
    np.testing.assert_allclose(state.x, reference.state.x, rtol=0, atol=1e-15)
    np.testing.assert_allclose(state.extra["x_tilde"], reference.state.extra["x_tilde"], atol=1e-15)
