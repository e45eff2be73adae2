"""Each protocol's invariants table (module docstrings), checked under random churn."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import protocols
from protocols.base import Protocol
from protocols.contract import Context, RoundStats, State
from tests.strategies import dims, peer_counts, permutations, schedules, seeds, vectors

TOPOLOGIES = ["ring", "torus", "erdos_renyi"]

#: Doubly stochastic in every round, whatever the churn: the sum is kept, var never grows.
DOUBLY_STOCHASTIC = [
    ("all_reduce", {}),
    ("random_groups", {"group_size": 3}),
    ("moshpit", {"group_size": 3, "grid_dims": 2}),
    ("moshpit", {"group_size": 2, "grid_dims": 3, "fault_model": "abort"}),
    ("moshpit", {"group_size": 3, "grid_dims": 2, "fault_model": "partial", "min_group_size": 1}),
    ("moshpit", {"group_size": 3, "grid_dims": 2, "rekey": False}),
    ("moshpit", {"group_size": 2, "grid_dims": 3, "rekey": False, "fault_model": "abort"}),
    *[("gossip", {"topology": t, "weights": "metropolis"}) for t in TOPOLOGIES],
]
#: Row-stochastic only: the mean may drift, and the drift must be reported.
DRIFTING = [*[("gossip", {"topology": t}) for t in TOPOLOGIES], ("sgp", {})]
#: One configuration per protocol family, for the checks every protocol must pass.
FAMILIES = [
    ("all_reduce", {}),
    ("random_groups", {"group_size": 3}),
    ("moshpit", {"group_size": 2, "grid_dims": 3, "fault_model": "abort"}),
    ("moshpit", {"group_size": 3, "grid_dims": 2, "rekey": False}),
    ("gossip", {"topology": "exponential"}),
    ("gossip", {"topology": "complete", "weights": "metropolis"}),
    ("sgp", {}),
    ("sgp", {"push_sum": True}),
]


def ids(cases):
    return [f"{name}-" + "-".join(f"{v}" for v in params.values()) for name, params in cases]


def build(name: str, params: dict, x: np.ndarray, seed: int) -> tuple[Protocol, State]:
    cls = protocols.get(name)
    ctx = Context(len(x), x.shape[1], 8, np.random.default_rng(seed))
    protocol = cls(cls.Params(name=name, **params), ctx)
    state = State(x=x.copy())
    protocol.init_state(state)
    return protocol, state


def run(protocol: Protocol, state: State, masks) -> list[tuple[np.ndarray, np.ndarray, RoundStats]]:
    """Run one round per mask: x before and after each round, and the round's stats."""
    history = []
    for t, mask in enumerate(masks):
        before = np.array(state.x, copy=True)
        stats = protocol.round(state, mask, t)
        history.append((before, np.array(state.x, copy=True), stats))
    return history


@st.composite
def scenarios(draw, max_peers: int = 30):
    n = draw(peer_counts(1, max_peers))
    x = draw(vectors(n, draw(dims)))
    return x, draw(schedules(n)), draw(seeds)


def scale(x: np.ndarray) -> np.ndarray:
    return np.abs(x).sum(axis=0) + 1e-300


def assert_absent_unchanged(before: np.ndarray, after: np.ndarray, mask: np.ndarray) -> None:
    assert np.array_equal(after[~mask], before[~mask])


@pytest.mark.parametrize(("name", "params"), DOUBLY_STOCHASTIC, ids=ids(DOUBLY_STOCHASTIC))
@given(case=scenarios())
def test_doubly_stochastic_protocols_keep_the_sum_and_var_and_skip_absent_peers(name, params, case):
    x, masks, seed = case
    protocol, state = build(name, params, x, seed)
    for mask, (before, after, stats) in zip(masks, run(protocol, state, masks), strict=True):
        assert_absent_unchanged(before, after, mask)
        assert np.all(np.abs(after.sum(axis=0) - before.sum(axis=0)) <= 1e-12 * scale(before))
        slack = 1e-12 * float(np.mean(before**2))
        assert after.var(axis=0).sum() <= before.var(axis=0).sum() * (1 + 1e-12) + slack
        assert stats.mean_drift == 0.0


@pytest.mark.parametrize(("name", "params"), DRIFTING, ids=ids(DRIFTING))
@given(case=scenarios())
def test_row_stochastic_protocols_report_drift_never_widen_range_and_skip_absent_peers(
    name, params, case
):
    x, masks, seed = case
    protocol, state = build(name, params, x, seed)
    for mask, (before, after, stats) in zip(masks, run(protocol, state, masks), strict=True):
        assert_absent_unchanged(before, after, mask)
        moved = np.linalg.norm(after.mean(axis=0) - before.mean(axis=0)) / np.sqrt(x.shape[1])
        assert abs(stats.mean_drift - moved) <= 1e-12 * float(np.abs(before).max() + 1e-300)
        slack = 1e-13 * float(np.abs(before).max() + 1e-300)
        assert np.all(after.max(axis=0) <= before.max(axis=0) + slack)
        assert np.all(after.min(axis=0) >= before.min(axis=0) - slack)


def test_uniform_gossip_drift_can_be_nonzero():
    x = np.arange(6, dtype=float).reshape(6, 1)
    protocol, state = build("gossip", {"topology": "ring"}, x, 0)
    stats = protocol.round(state, np.array([True, True, False, True, True, True]), 0)
    assert stats.mean_drift > 0


@given(case=scenarios())
def test_push_sum_keeps_the_sums_of_x_and_w_and_skips_absent_peers(case):
    x, masks, seed = case
    protocol, state = build("sgp", {"push_sum": True}, x, seed)
    for t, mask in enumerate(masks):
        before = state.x.copy()
        w_before = state.extra["w"].copy()
        stats = protocol.round(state, mask, t)
        assert_absent_unchanged(before, state.x, mask)
        assert_absent_unchanged(w_before, state.extra["w"], mask)
        assert np.all(np.abs(state.x.sum(axis=0) - before.sum(axis=0)) <= 1e-12 * scale(before))
        assert abs(float(state.extra["w"].sum()) - len(x)) <= 1e-12 * len(x)
        assert np.all(state.extra["w"] > 0)
        assert stats.mean_drift == 0.0


@pytest.mark.parametrize(("name", "params"), FAMILIES, ids=ids(FAMILIES))
@given(case=scenarios())
def test_equal_vectors_stay_equal(name, params, case):
    x, masks, seed = case
    x[:] = x[0]
    protocol, state = build(name, params, x, seed)
    run(protocol, state, masks)
    estimate = protocol.estimate(state)
    if name == "sgp" and params.get("push_sum"):
        np.testing.assert_allclose(estimate, x, rtol=1e-12, atol=1e-12)
    else:
        assert np.array_equal(estimate, x)


@pytest.mark.parametrize(("name", "params"), FAMILIES, ids=ids(FAMILIES))
@given(case=scenarios())
def test_the_same_seed_gives_identical_runs(name, params, case):
    x, masks, seed = case
    runs = []
    for _ in range(2):
        protocol, state = build(name, params, x, seed)
        stats = [s for _, _, s in run(protocol, state, masks)]
        runs.append((protocol.estimate(state), stats))
    assert np.array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]


@pytest.mark.parametrize(
    ("name", "params"),
    [("all_reduce", {}), ("gossip", {"topology": "complete", "weights": "metropolis"})],
)
@given(data=st.data())
def test_relabelling_peers_permutes_the_result_of_symmetric_protocols(name, params, data):
    x, masks, seed = data.draw(scenarios())
    perm = data.draw(permutations(len(x)))
    protocol, state = build(name, params, x, seed)
    relabelled, state_perm = build(name, params, x[perm], seed)
    for t, mask in enumerate(masks):
        stats = protocol.round(state, mask, t)
        assert relabelled.round(state_perm, mask[perm], t) == stats
    tolerance = 1e-13 * float(np.abs(x).max() + 1e-300)
    np.testing.assert_allclose(state_perm.x, state.x[perm], rtol=0, atol=tolerance)
