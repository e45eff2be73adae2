"""Invariants of pairwise_gossip, push_sum and a2cid2 (module docstrings), and waves.

Waves must reproduce the one-by-one application of events; the protocols' sums must be
kept under any churn schedule, to float64 round-off (relative 1e-12).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import protocols
from protocols._edge_clocks import wave_levels, waves
from protocols.a2cid2 import apply_events
from protocols.contract import Context, State
from protocols.pairwise_gossip import apply_exchanges
from protocols.push_sum import apply_pushes
from sim.kernels import pairwise_delta, push_half
from tests.strategies import (
    dims,
    event_times,
    pair_sequences,
    peer_counts,
    schedules,
    seeds,
    vectors,
)

TOPOLOGIES = ["ring", "torus", "exponential", "erdos_renyi", "complete"]
#: Relative round-off allowed on conserved sums (validation.md §1).
REL = 1e-12


@st.composite
def events(draw: st.DrawFn, max_peers: int = 12) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, i, j): a state and a sequence of pairwise events on its rows."""
    n = draw(peer_counts(2, max_peers))
    i, j = draw(pair_sequences(n))
    return draw(vectors(n, draw(dims))), i, j


def build(name: str, params: dict, x: np.ndarray, seed: int) -> tuple[protocols.Protocol, State]:
    cls = protocols.get(name)
    protocol = cls(
        cls.Params(name=name, **params), Context(len(x), x.shape[1], 8, np.random.default_rng(seed))
    )
    state = State(x=x.copy())
    protocol.init_state(state)
    return protocol, state


def one_by_one_a2cid2(x, x_tilde, times, i, j, eta, alpha_tilde):
    """The A²CiD² rules applied event by event in plain numpy (the reference)."""
    x, x_tilde = x.copy(), x_tilde.copy()
    last = np.zeros(len(x))
    for t, a, b in zip(times, i, j, strict=True):
        for p in (a, b):
            c = -np.expm1(-2 * eta * (t - last[p])) / 2
            d = x_tilde[p] - x[p]
            x[p], x_tilde[p], last[p] = x[p] + c * d, x_tilde[p] - c * d, t
        m = x[a] - x[b]
        x[a], x[b] = x[a] - m / 2, x[b] + m / 2
        x_tilde[a], x_tilde[b] = x_tilde[a] - alpha_tilde * m, x_tilde[b] + alpha_tilde * m
    c = (-np.expm1(-2 * eta * (1 - last)) / 2)[:, None]
    d = x_tilde - x
    return x + c * d, x_tilde - c * d


# --- waves -----------------------------------------------------------------------------


@given(events())
def test_waves_hold_disjoint_pairs_and_keep_every_peers_order(case):
    _, i, j = case
    for wave in waves(i, j):
        ends = np.concatenate((i[wave], j[wave]))
        assert np.unique(ends).size == ends.size
    level = wave_levels(i, j)
    for peer in np.unique(np.concatenate((i, j))):
        mine = np.flatnonzero((i == peer) | (j == peer))
        assert np.all(np.diff(level[mine]) > 0)


@given(events())
def test_batched_pairwise_exchanges_equal_one_by_one_bit_for_bit(case):
    x, i, j = case
    expected = x.copy()
    for a, b in zip(i, j, strict=True):
        expected = pairwise_delta(expected, np.array([a]), np.array([b]))
    assert np.array_equal(apply_exchanges(x.copy(), i, j), expected)


@given(events())
def test_batched_pushes_equal_one_by_one_bit_for_bit(case):
    x, i, j = case
    w = np.ones((len(x), 1))
    ex, ew = x.copy(), w.copy()
    for a, b in zip(i, j, strict=True):
        ex = push_half(ex, np.array([a]), np.array([b]))
        ew = push_half(ew, np.array([a]), np.array([b]))
    got_x, got_w = apply_pushes(x.copy(), w.copy(), i, j)
    assert np.array_equal(got_x, ex)
    assert np.array_equal(got_w, ew)


@given(events(), st.data(), st.floats(0, 3), st.floats(0, 5))
def test_batched_a2cid2_events_equal_one_by_one(case, data, eta, alpha_tilde):
    x, i, j = case
    times = data.draw(event_times(i.size))
    x_tilde = x + data.draw(vectors(*x.shape))
    ref = one_by_one_a2cid2(x, x_tilde, times, i, j, eta, alpha_tilde)
    got = apply_events(x.copy(), x_tilde.copy(), times, i, j, eta, alpha_tilde)
    scale = max(1.0, *(float(np.abs(r).max()) for r in ref))
    for expected, value in zip(ref, got, strict=True):
        np.testing.assert_allclose(value, expected, rtol=0, atol=REL * scale)


# --- protocols under churn -------------------------------------------------------------


def run_schedule(protocol, state, masks):
    for t, mask in enumerate(masks):
        protocol.round(state, mask, t)


@pytest.mark.parametrize("topology", TOPOLOGIES)
@given(st.data(), seeds, st.one_of(st.none(), st.floats(0, 2)), st.floats(0, 4))
def test_a2cid2_keeps_the_mean_of_x_when_x_tilde_starts_at_x(topology, data, seed, eta, alpha):
    n = data.draw(peer_counts(2, 24))
    x = data.draw(vectors(n, data.draw(dims)))
    params = {"topology": topology, "p": 0.3, "rate": data.draw(st.floats(0.2, 3))}
    if eta is not None:
        params |= {"eta": eta, "alpha_tilde": alpha}
    protocol, state = build("a2cid2", params, x, seed)
    run_schedule(protocol, state, data.draw(schedules(n)))
    scale = max(1.0, float(np.abs(state.x).max()), float(np.abs(state.extra["x_tilde"]).max()))
    np.testing.assert_allclose(state.x.mean(axis=0), x.mean(axis=0), rtol=0, atol=REL * scale)
    total = state.x + state.extra["x_tilde"]
    np.testing.assert_allclose(total.sum(axis=0), 2 * x.sum(axis=0), rtol=0, atol=REL * n * scale)


@pytest.mark.parametrize("topology", TOPOLOGIES)
@given(st.data(), seeds)
def test_push_sum_keeps_both_sums_and_positive_weights(topology, data, seed):
    n = data.draw(peer_counts(2, 24))
    x = data.draw(vectors(n, data.draw(dims)))
    protocol, state = build("push_sum", {"topology": topology, "p": 0.3, "rate": 2.0}, x, seed)
    masks = data.draw(schedules(n))
    never = ~np.any(masks, axis=0)
    run_schedule(protocol, state, masks)
    scale = max(1.0, float(np.abs(x).max()))
    np.testing.assert_allclose(state.x.sum(axis=0), x.sum(axis=0), rtol=0, atol=REL * n * scale)
    np.testing.assert_allclose(state.extra["w"].sum(), n, rtol=REL)
    assert np.all(state.extra["w"] > 0)
    assert np.array_equal(state.x[never], x[never])
    assert np.all(state.extra["w"][never] == 1.0)


@pytest.mark.parametrize("topology", TOPOLOGIES)
@given(st.data(), seeds)
def test_pairwise_gossip_keeps_the_sum_and_never_increases_var(topology, data, seed):
    n = data.draw(peer_counts(2, 24))
    x = data.draw(vectors(n, data.draw(dims)))
    protocol, state = build("pairwise_gossip", {"topology": topology, "p": 0.3}, x, seed)
    scale = max(1.0, float(np.abs(x).max()))
    for t, mask in enumerate(data.draw(schedules(n))):
        before = state.x.copy()
        protocol.round(state, mask, t)
        assert np.array_equal(state.x[~mask], before[~mask])
        assert state.x.var(axis=0).sum() <= before.var(axis=0).sum() * (1 + REL) + REL * scale**2
        assert np.all(state.x.max(axis=0) <= before.max(axis=0) + REL * scale)
        assert np.all(state.x.min(axis=0) >= before.min(axis=0) - REL * scale)
    np.testing.assert_allclose(state.x.sum(axis=0), x.sum(axis=0), rtol=0, atol=REL * n * scale)
