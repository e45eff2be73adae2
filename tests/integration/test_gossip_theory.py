"""Seeded statistical checks of asynchronous gossip and A²CiD² against theory (validation §2).

Many independent runs are simulated at once as R disjoint copies of one small graph in a
single protocol (``topology: file``): the edge clocks of different copies are
independent Poisson processes, so each copy is one run. Means over copies are compared
with the expected dynamics; each test states its tolerance in standard errors (Z) of the
Monte-Carlo mean, estimated from the same copies.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.linalg

from protocols.a2cid2 import A2cid2, A2cid2Params
from protocols.contract import Context, State
from protocols.pairwise_gossip import PairwiseGossip, PairwiseGossipParams, apply_exchanges

#: Allowed deviation of a Monte-Carlo mean from theory, in standard errors (the checks
#: below make at most a few dozen comparisons, so a false alarm has probability < 1e-3).
Z = 4.5


def copies(tmp_path: Path, graph: nx.Graph, count: int) -> str:
    """Write the edge list of ``count`` disjoint copies of ``graph``; return its path."""
    n = graph.number_of_nodes()
    lines = [f"{u + k * n} {v + k * n}" for k in range(count) for u, v in graph.edges()]
    path = tmp_path / "copies.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def rate_laplacian(graph: nx.Graph, rate: float) -> np.ndarray:
    """Λ = Σ λ_ij (e_i − e_j)(e_i − e_j)ᵀ with λ_ij = rate·(1/d_i + 1/d_j)/2 (dense)."""
    n, degree = graph.number_of_nodes(), dict(graph.degree())
    lap = np.zeros((n, n))
    for i, j in graph.edges():
        lam = rate * (1 / degree[i] + 1 / degree[j]) / 2
        lap[[i, j], [i, j]] += lam
        lap[i, j] -= lam
        lap[j, i] -= lam
    return lap


def expected_generator(lap: np.ndarray, eta: float, alpha_tilde: float) -> np.ndarray:
    """A of d/dt E[(x, x̃)] = A E[(x, x̃)] (derived in docs/design-gossip.md)."""
    eye = np.eye(len(lap))
    return np.block(
        [[-eta * eye - lap / 2, eta * eye], [eta * eye - alpha_tilde * lap, -eta * eye]]
    )


def start(protocol, n_copies: int, x0: np.ndarray, x_tilde0: np.ndarray | None = None) -> State:
    state = State(x=np.tile(x0, n_copies).reshape(-1, 1))
    protocol.init_state(state)
    if x_tilde0 is not None:
        state.extra["x_tilde"] = np.tile(x_tilde0, n_copies).reshape(-1, 1)
    return state


def assert_mean_matches(runs: np.ndarray, expected: np.ndarray) -> None:
    """Every coordinate's mean over runs (rows) is within Z standard errors of theory."""
    error = runs.std(axis=0, ddof=1) / np.sqrt(len(runs))
    z = np.abs(runs.mean(axis=0) - expected) / error
    assert np.all(z <= Z), (z.max(), runs.mean(axis=0), expected)


# --- randomized gossip -------------------------------------------------------------------


def test_pairwise_gossip_mean_follows_exp_of_minus_laplacian_t_over_2(tmp_path):
    """E[x(t)] = exp(−Λt/2)·x(0) on an irregular graph (rates from the degrees)."""
    graph, rate, n_copies = nx.lollipop_graph(4, 3), 1.5, 3000
    n = graph.number_of_nodes()
    x0 = np.array([3.0, -1.0, 0.0, 2.0, -2.0, 1.0, 5.0])
    params = PairwiseGossipParams(
        topology="file", file=copies(tmp_path, graph, n_copies), rate=rate
    )
    protocol = PairwiseGossip(params, Context(n * n_copies, 1, 8, np.random.default_rng(1)))
    state = start(protocol, n_copies, x0)
    lap = rate_laplacian(graph, rate)
    everyone = np.ones(n * n_copies, dtype=bool)
    for t in range(4):
        protocol.round(state, everyone, t)
        if t + 1 in (1, 2, 4):
            expected = scipy.linalg.expm(-lap * (t + 1) / 2) @ x0
            assert_mean_matches(state.x.reshape(n_copies, n), expected)


# --- A²CiD² ------------------------------------------------------------------------------

RING = 16


def ring_a2cid2(tmp_path: Path, n_copies: int, seed: int) -> A2cid2:
    path = copies(tmp_path, nx.cycle_graph(RING), n_copies)
    ctx = Context(RING * n_copies, 1, 8, np.random.default_rng(seed))
    return A2cid2(A2cid2Params(topology="file", file=path), ctx)


def test_a2cid2_mean_follows_the_expected_block_dynamics(tmp_path):
    """E[(x, x̃)(t)] = exp(A t)·(x(0), x(0)) on a ring of 16, A from η, α̃ and Λ."""
    n_copies = 2000
    protocol = ring_a2cid2(tmp_path, n_copies, seed=2)
    phase = 2 * np.pi * np.arange(RING) / RING
    x0 = np.cos(phase) + 0.3 * np.sin(2 * phase) + 0.5
    state = start(protocol, n_copies, x0)
    generator = expected_generator(
        rate_laplacian(nx.cycle_graph(RING), 1.0), protocol.eta, protocol.alpha_tilde
    )
    everyone = np.ones(RING * n_copies, dtype=bool)
    for t in range(30):
        protocol.round(state, everyone, t)
        if t + 1 in (3, 10, 20, 30):
            expected = scipy.linalg.expm(generator * (t + 1)) @ np.concatenate((x0, x0))
            assert_mean_matches(state.x.reshape(n_copies, RING), expected[:RING])
            assert_mean_matches(state.extra["x_tilde"].reshape(n_copies, RING), expected[RING:])


def test_on_a_ring_the_slowest_expected_mode_decays_at_eta_against_1_over_2chi1(tmp_path):
    """Eigenvalues of A: slowest rate η; of −Λ/2: 1/(2χ₁); η is √(χ₁/χ₂) times faster."""
    protocol = ring_a2cid2(tmp_path, 1, seed=0)
    info = protocol.describe()
    lap = rate_laplacian(nx.cycle_graph(RING), 1.0)
    rates = -np.linalg.eigvals(expected_generator(lap, info["eta"], info["alpha_tilde"])).real
    slowest = np.min(rates[rates > 1e-9])
    assert slowest == pytest.approx(info["eta"], rel=1e-8)
    gossip = np.sort(np.linalg.eigvalsh(lap / 2))[1]
    assert gossip == pytest.approx(1 / (2 * info["chi1"]), rel=1e-10)
    assert slowest / gossip == pytest.approx(np.sqrt(info["chi1"] / info["chi2"]), rel=1e-8)
    assert slowest / gossip > 3.5


def slow_mode_rate(runs: np.ndarray, mode: np.ndarray, elapsed: float) -> tuple[float, float]:
    """−ln(mean projection on ``mode``)/t over runs, and its standard error (delta method)."""
    projection = runs @ mode / (mode @ mode)
    mean, error = projection.mean(), projection.std(ddof=1) / np.sqrt(len(runs))
    return -np.log(mean) / elapsed, error / (mean * elapsed)


def test_simulated_slow_mode_decays_at_eta_for_a2cid2_and_1_over_2chi1_for_gossip(tmp_path):
    """From the slow eigenvector of A (x̃ = μ₂/(2η)·x on the cos mode), E[x] = e^(−ηt)x(0).

    For pairwise gossip from the same x(0), E[x] = e^(−μ₂t/2)x(0). The rates measured
    from the averaged runs must agree with η and 1/(2χ₁) within Z standard errors.
    """
    n_copies = 2000
    protocol = ring_a2cid2(tmp_path, n_copies, seed=3)
    info = protocol.describe()
    mu2, eta = 1 / info["chi1"], info["eta"]
    mode = np.cos(2 * np.pi * np.arange(RING) / RING)
    state = start(protocol, n_copies, mode, mu2 / (2 * eta) * mode)
    everyone = np.ones(RING * n_copies, dtype=bool)
    for t in range(15):
        protocol.round(state, everyone, t)
    rate, error = slow_mode_rate(state.x.reshape(n_copies, RING), mode, 15.0)
    assert abs(rate - eta) <= Z * error, (rate, eta, error)

    gossip = PairwiseGossip(
        PairwiseGossipParams(topology="file", file=protocol.params.file),
        Context(RING * n_copies, 1, 8, np.random.default_rng(4)),
    )
    state = start(gossip, n_copies, mode)
    for t in range(30):
        gossip.round(state, everyone, t)
    rate, error = slow_mode_rate(state.x.reshape(n_copies, RING), mode, 30.0)
    assert abs(rate - 1 / (2 * info["chi1"])) <= Z * error, (rate, 1 / (2 * info["chi1"]), error)


def test_on_the_complete_graph_a2cid2_is_plain_pairwise_gossip():
    """χ₁ = χ₂ there: α̃ = ½, x̃ stays x, and the runs coincide with pairwise gossip."""
    n, dim = 16, 3
    x0 = np.random.default_rng(0).normal(size=(n, dim))
    a2 = A2cid2(A2cid2Params(topology="complete"), Context(n, dim, 8, np.random.default_rng(9)))
    pg = PairwiseGossip(
        PairwiseGossipParams(topology="complete"), Context(n, dim, 8, np.random.default_rng(9))
    )
    assert a2.describe()["gain"] == pytest.approx(1.0, rel=1e-12)
    sa, sp = State(x=x0.copy()), State(x=x0.copy())
    a2.init_state(sa)
    everyone = np.ones(n, dtype=bool)
    for t in range(20):
        a2.round(sa, everyone, t)
        pg.round(sp, everyone, t)
    np.testing.assert_allclose(sa.x, sp.x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sa.extra["x_tilde"], sa.x, rtol=0, atol=1e-12)


# --- push–pull aggregation ---------------------------------------------------------------


def test_push_pull_cycles_on_the_complete_graph_shrink_variance_by_1_over_2_sqrt_e():
    """Jelasity, Montresor, Babaoglu (ACM TOCS 2005): E[σ²_{k+1}]/E[σ²_k] → 1/(2√e).

    Cycle model: in each cycle the N nodes, in a uniformly random order, each start one
    exchange with a uniformly random other node; an exchange averages the pair at once
    (pairwise_gossip's kernel, in order). The factor is the N → ∞ limit; we allow Z
    standard errors of the mean ratio plus 2/N for the finite size.
    """
    n, runs, cycles = 10_000, 10, 4
    rng = np.random.default_rng(2005)
    ratios = []
    for _ in range(runs):
        x = rng.normal(size=(n, 1))
        for _ in range(cycles):
            before = x.var()
            initiators = rng.permutation(n)
            partners = (initiators + rng.integers(1, n, n)) % n  # uniform among the others
            x = apply_exchanges(x, initiators, partners)
            ratios.append(x.var() / before)
    ratios_arr = np.array(ratios)
    error = ratios_arr.std(ddof=1) / np.sqrt(ratios_arr.size)
    expected = 1 / (2 * np.sqrt(np.e))
    assert abs(ratios_arr.mean() - expected) <= Z * error + 2 / n, (ratios_arr.mean(), error)
