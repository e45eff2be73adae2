"""Seeded statistical checks of the protocols against theory (validation.md §2).

Each test states its tolerance: a number of standard errors of the Monte-Carlo mean,
with the standard error estimated from the same trials (or known in closed form).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from protocols.all_reduce import AllReduce, AllReduceParams
from protocols.contract import Context, State
from protocols.gossip import Gossip, GossipParams
from protocols.random_groups import RandomGroups, RandomGroupsParams

#: Allowed deviation of a Monte-Carlo mean from theory, in standard errors.
Z = 4.0


@pytest.mark.parametrize(("n", "size"), [(64, 8), (70, 8), (30, 4)])
def test_random_groups_one_round_variance_factor_is_r_minus_1_over_n_minus_1(n, size):
    """E[var after / var before] = (r−1)/(N−1) for any x and any group sizes."""
    trials = 3000
    rng = np.random.default_rng(2024)
    protocol = RandomGroups(RandomGroupsParams(group_size=size), Context(n, 1, 8, rng))
    x0 = np.random.default_rng(7).normal(size=(n, 1))
    everyone = np.ones(n, dtype=bool)
    ratios = np.empty(trials)
    for k in range(trials):
        state = State(x=x0.copy())
        protocol.round(state, everyone, k)
        ratios[k] = state.x.var() / x0.var()
    r = n // size
    expected = (r - 1) / (n - 1)
    standard_error = ratios.std(ddof=1) / np.sqrt(trials)
    assert abs(ratios.mean() - expected) <= Z * standard_error, (ratios.mean(), expected)


@pytest.mark.parametrize(("n", "p"), [(16, 0.05), (64, 0.01)])
def test_all_reduce_succeeds_with_probability_one_minus_p_to_the_n(n, p):
    """Success frequency under bernoulli churn vs (1−p)^N, binomial standard error."""
    rounds = 4000
    churn = np.random.default_rng(99)
    protocol = AllReduce(AllReduceParams(), Context(n, 1, 8, np.random.default_rng(0)))
    state = State(x=np.random.default_rng(1).normal(size=(n, 1)))
    successes = 0
    for t in range(rounds):
        successes += protocol.round(state, churn.random(n) >= p, t).messages > 0
    expected = (1 - p) ** n
    standard_error = np.sqrt(expected * (1 - expected) / rounds)
    assert abs(successes / rounds - expected) <= Z * standard_error


@pytest.mark.parametrize(
    "params",
    [
        {"topology": "ring"},
        {"topology": "torus"},
        {"topology": "random_regular", "degree": 3},
        {"topology": "erdos_renyi", "p": 0.3},
    ],
)
def test_metropolis_gossip_contracts_at_least_by_the_spectral_radius(params):
    """‖x(t+1) − x̄‖ ≤ ρ ‖x(t) − x̄‖ with ρ = max(|λ₂|, |λ_N|) of the fixed W."""
    n = 24
    protocol = Gossip(
        GossipParams(weights="metropolis", **params), Context(n, 3, 8, np.random.default_rng(3))
    )
    w = nx.to_numpy_array(protocol.graph, nodelist=range(n))
    degree = w.sum(axis=1)
    w = w / (1 + np.maximum(degree[:, None], degree[None, :]))
    w += np.diag(1 - w.sum(axis=1))
    eigenvalues = np.sort(np.linalg.eigvalsh(w))
    rho = max(abs(eigenvalues[-2]), abs(eigenvalues[0]))
    state = State(x=np.random.default_rng(4).normal(size=(n, 3)))
    mean = state.x.mean(axis=0)
    everyone = np.ones(n, dtype=bool)
    for t in range(10):
        before = np.linalg.norm(state.x - mean)
        protocol.round(state, everyone, t)
        assert np.linalg.norm(state.x - mean) <= rho * before * (1 + 1e-12) + 1e-14
