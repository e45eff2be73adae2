"""pairwise_gossip, push_sum and a2cid2 on the rounds clock: clocks, waves, kernels, rules."""

from __future__ import annotations

import array_api_strict as xps
import networkx as nx
import numpy as np
import pytest
import scipy.linalg

import protocols
from protocols._edge_clocks import PoissonClocks, edge_rates, wave_levels, waves
from protocols._spectra import graph_constants
from protocols.a2cid2 import A2cid2, A2cid2Params, block_decay_rate, default_eta_alpha
from protocols.contract import Context, State
from protocols.graphs import graph_edges
from protocols.pairwise_gossip import PairwiseGossip, PairwiseGossipParams
from protocols.push_sum import PushSum, PushSumParams
from sim.kernels import a2cid2_exchange, a2cid2_mix, mix_coefficient, push_half
from sim.kernels.mixing import put_rows


def build(cls, n: int, dim: int = 2, seed: int = 0, **params):
    protocol = cls(cls.Params(**params), Context(n, dim, 8, np.random.default_rng(seed)))
    state = State(x=np.random.default_rng(seed + 1).normal(size=(n, dim)))
    protocol.init_state(state)
    return protocol, state


# --- clocks and waves ---------------------------------------------------------------


def test_edge_rates_give_every_peer_of_a_regular_graph_rate_exchanges():
    edges = graph_edges(nx.cycle_graph(6))
    rates = edge_rates(edges, 6, rate=3.0)
    assert np.allclose(rates, 1.5)
    per_peer = np.bincount(edges.reshape(-1), np.repeat(rates, 2), minlength=6)
    assert np.allclose(per_peer, 3.0)


def test_edge_rates_average_the_inverse_degrees_of_the_ends():
    edges = graph_edges(nx.star_graph(3))  # hub 0 of degree 3, leaves of degree 1
    assert np.allclose(edge_rates(edges, 4, rate=2.0), 2.0 * (1 / 3 + 1) / 2)


def test_graph_edges_are_sorted_pairs_u_below_v():
    edges = graph_edges(nx.Graph([(3, 1), (2, 0), (1, 0)]))
    assert edges.tolist() == [[0, 1], [0, 2], [1, 3]]


def test_poisson_clocks_draw_sorted_times_in_the_window_and_valid_clocks():
    clocks = PoissonClocks(np.array([0.5, 2.0, 0.0, 1.5]))
    times, picked = clocks.ring(np.random.default_rng(3), duration=2.0)
    assert np.all(np.diff(times) >= 0)
    assert times.min() >= 0
    assert times.max() < 2.0
    assert set(picked.tolist()) <= {0, 1, 3}


def test_poisson_clocks_count_and_pick_in_proportion_to_rates():
    rates = np.array([1.0, 3.0])
    clocks = PoissonClocks(rates)
    rng = np.random.default_rng(11)
    draws = [clocks.ring(rng, duration=50.0)[1] for _ in range(40)]
    counts = np.array([d.size for d in draws])
    assert abs(counts.mean() - 200) < 4 * np.sqrt(200 / 40)
    share = np.concatenate(draws).mean()
    assert abs(share - 0.75) < 4 * np.sqrt(0.75 * 0.25 / counts.sum())


def test_poisson_clocks_without_rate_never_ring():
    times, picked = PoissonClocks(np.zeros(3)).ring(np.random.default_rng(0))
    assert times.size == 0
    assert picked.size == 0


def test_wave_levels_follow_each_peers_chain_of_events():
    i = np.array([0, 2, 1, 4, 0, 5])
    j = np.array([1, 3, 2, 5, 3, 6])
    # (0,1) (2,3) → 0; (1,2) after both → 1; (4,5) → 0; (0,3) after (0,1),(2,3) → 1;
    # (5,6) after (4,5) → 1
    assert wave_levels(i, j).tolist() == [0, 0, 1, 0, 1, 1]
    assert [w.tolist() for w in waves(i, j)] == [[0, 1, 3], [2, 4, 5]]


def test_waves_of_nothing_are_empty():
    assert waves(np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)) == []


# --- kernels -----------------------------------------------------------------------------


def test_mixing_closed_form_solves_the_ode():
    eta, elapsed = 0.7, 1.3
    x, x_tilde = np.array([[2.0, -1.0]]), np.array([[0.5, 3.0]])
    generator = eta * np.array([[-1.0, 1.0], [1.0, -1.0]])
    expected = scipy.linalg.expm(generator * elapsed) @ np.vstack((x, x_tilde))
    c = mix_coefficient(np.array([elapsed]), eta)
    x, x_tilde = a2cid2_mix(x, x_tilde, c)
    np.testing.assert_allclose(np.vstack((x, x_tilde)), expected, rtol=1e-14)


def test_exchange_moves_x_by_half_the_difference_and_x_tilde_by_alpha_tilde():
    x = np.array([[4.0], [0.0], [7.0]])
    x_tilde = np.array([[1.0], [1.0], [7.0]])
    c = np.zeros(2)
    x, x_tilde = a2cid2_exchange(x, x_tilde, np.array([0]), np.array([1]), c, 1.5)
    assert x.ravel().tolist() == [2.0, 2.0, 7.0]
    assert x_tilde.ravel().tolist() == [1.0 - 6.0, 1.0 + 6.0, 7.0]


def test_push_half_halves_the_sender_and_credits_the_target():
    x = np.array([[4.0], [1.0], [2.0]])
    assert push_half(x, np.array([0]), np.array([2])).ravel().tolist() == [2.0, 1.0, 4.0]


def test_kernels_give_the_same_values_on_array_api_strict():
    rng = np.random.default_rng(5)
    x, x_tilde = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    i, j, c = np.array([0, 4]), np.array([3, 1]), np.array([0.1, 0.0, 0.3, 0.2])
    ref = a2cid2_exchange(x.copy(), x_tilde.copy(), i, j, c, 0.8)
    got = a2cid2_exchange(xps.asarray(x), xps.asarray(x_tilde), i, j, c, 0.8)
    for expected, value in zip(ref, got, strict=True):
        assert np.array_equal(np.asarray(value), expected)
    assert np.array_equal(np.asarray(push_half(xps.asarray(x), i, j)), push_half(x.copy(), i, j))
    rows = np.array([5, 2])
    put = put_rows(xps.asarray(x), rows, xps.asarray(x_tilde[:2]))
    x[rows] = x_tilde[:2]
    assert np.array_equal(np.asarray(put), x)


# --- pairwise_gossip ---------------------------------------------------------------------


def test_registry_knows_the_three_protocols_with_their_module_names():
    for name in ("pairwise_gossip", "push_sum", "a2cid2"):
        cls = protocols.get(name)
        assert cls.Params(name=name).name == name
        assert cls.description


def test_pairwise_gossip_counts_two_messages_and_two_vectors_per_exchange():
    protocol, state = build(PairwiseGossip, 8, dim=4, topology="ring")
    stats = protocol.round(state, np.ones(8, dtype=bool), 0)
    exchanges = protocol.counters["exchanges"]
    assert exchanges == protocol.counters["rings"] > 0
    assert stats.messages == 2 * exchanges
    assert stats.bytes_sent == 2 * exchanges * 4 * 8


def test_pairwise_gossip_skips_rings_with_an_absent_end_and_never_finds_a_peer_busy():
    protocol, state = build(PairwiseGossip, 8, topology="ring", max_concurrent=1)
    x = state.x.copy()
    present = np.ones(8, dtype=bool)
    present[[2, 5]] = False
    for t in range(20):
        protocol.round(state, present, t)
    assert np.array_equal(state.x[[2, 5]], x[[2, 5]])
    counters = protocol.counters
    assert counters["skipped_absent"] > 0
    assert counters["skipped_busy"] == 0
    assert counters["rings"] == counters["exchanges"] + counters["skipped_absent"]


def test_pairwise_gossip_of_two_peers_gives_both_the_mean():
    protocol, state = build(PairwiseGossip, 2, topology="complete", rate=5.0)
    mean = state.x.mean(axis=0)
    protocol.round(state, np.ones(2, dtype=bool), 0)
    assert protocol.counters["exchanges"] > 0
    np.testing.assert_allclose(state.x, [mean, mean], rtol=1e-15)


def test_pairwise_gossip_rate_sets_the_mean_number_of_exchanges():
    protocol, state = build(PairwiseGossip, 40, topology="torus", rate=2.0)
    for t in range(50):
        protocol.round(state, np.ones(40, dtype=bool), t)
    expected = 50 * 40 * 2.0 / 2  # every peer in `rate` exchanges per unit time
    assert abs(protocol.counters["exchanges"] - expected) < 4 * np.sqrt(expected)


# --- push_sum ----------------------------------------------------------------------------


def test_push_sum_starts_with_unit_weights_and_estimates_x_over_w():
    protocol, state = build(PushSum, 5)
    assert np.array_equal(state.extra["w"], np.ones((5, 1)))
    state.extra["w"] = np.full((5, 1), 4.0)
    np.testing.assert_allclose(protocol.estimate(state), state.x / 4)


def test_push_sum_counts_one_message_of_a_vector_and_a_weight_per_push():
    protocol, state = build(PushSum, 8, dim=3, topology="ring")
    stats = protocol.round(state, np.ones(8, dtype=bool), 0)
    pushes = protocol.counters["pushes"]
    assert pushes > 0
    assert stats.messages == pushes
    assert stats.bytes_sent == pushes * (3 * 8 + 8)


def test_push_sum_sender_keeps_what_an_absent_target_would_have_received():
    protocol, state = build(PushSum, 2, topology="complete", rate=4.0)
    x, w = state.x.copy(), state.extra["w"].copy()
    present = np.array([True, False])
    protocol.round(state, present, 0)
    assert protocol.counters["skipped_absent"] > 0
    assert protocol.counters["pushes"] == 0
    assert np.array_equal(state.x, x)
    assert np.array_equal(state.extra["w"], w)


def test_push_sum_isolated_peers_have_nowhere_to_push(tmp_path):
    edges = tmp_path / "edges.txt"
    edges.write_text("0 1\n")
    protocol, state = build(PushSum, 3, topology="file", file=str(edges), rate=3.0)
    x2 = state.x[2].copy()
    protocol.round(state, np.ones(3, dtype=bool), 0)
    assert protocol.counters["skipped_isolated"] > 0
    assert np.array_equal(state.x[2], x2)
    assert state.extra["w"][2, 0] == 1.0


# --- a2cid2 ------------------------------------------------------------------------------


def test_a2cid2_starts_with_x_tilde_a_copy_of_x():
    _, state = build(A2cid2, 6)
    assert np.array_equal(state.extra["x_tilde"], state.x)
    assert state.extra["x_tilde"] is not state.x


@pytest.mark.parametrize(("n", "rate"), [(12, 1.0), (30, 2.5)])
def test_a2cid2_constants_on_a_ring_match_the_closed_forms(n, rate):
    protocol, _ = build(A2cid2, n, topology="ring", rate=rate)
    lambda2 = rate / 2 * 2 * (1 - np.cos(2 * np.pi / n))  # edge rate/2, cycle spectrum
    resistance = (n - 1) / n / (rate / 2)  # one edge in parallel with a path of n − 1
    info = protocol.describe()
    assert info["chi1"] == pytest.approx(1 / lambda2, rel=1e-10)
    assert info["chi2"] == pytest.approx(resistance / 2, rel=1e-10)
    assert info["eta"] == pytest.approx(1 / (2 * np.sqrt(info["chi1"] * info["chi2"])))
    assert info["alpha_tilde"] == pytest.approx(0.5 * np.sqrt(info["chi1"] / info["chi2"]))
    assert info["decay_rate_gossip"] == pytest.approx(1 / (2 * info["chi1"]))
    assert info["gain"] == pytest.approx(np.sqrt(info["chi1"] / info["chi2"]))


def test_a2cid2_on_the_complete_graph_has_no_gain():
    protocol, _ = build(A2cid2, 10, topology="complete")
    info = protocol.describe()
    assert info["chi1"] == pytest.approx(info["chi2"], rel=1e-12)
    assert info["alpha_tilde"] == pytest.approx(0.5, rel=1e-12)
    assert info["gain"] == pytest.approx(1.0, rel=1e-12)


def test_with_default_parameters_the_slowest_block_decays_at_exactly_eta():
    eta, alpha_tilde = default_eta_alpha(chi1=40.0, chi2=0.8)
    assert block_decay_rate(1 / 40.0, eta, alpha_tilde) == pytest.approx(eta, rel=1e-10)


@pytest.mark.parametrize("topology", ["ring", "torus", "exponential", "erdos_renyi"])
def test_sparse_constants_agree_with_dense_ones(topology):
    protocol, _ = build(A2cid2, 36, topology=topology, p=0.2)
    edges, rates = protocol.edges, protocol.rates
    dense = graph_constants(edges, rates, 36, dense_max=10**6, closed_form=False)
    sparse = graph_constants(
        edges, rates, 36, transitive=topology != "erdos_renyi", dense_max=1, closed_form=False
    )
    assert sparse.method == "sparse"
    assert dense.method == "dense"
    assert sparse.chi1 == pytest.approx(dense.chi1, rel=1e-7)
    assert sparse.chi2 == pytest.approx(dense.chi2, rel=1e-9)


def test_constants_of_a_disconnected_graph_are_the_slowest_components(tmp_path):
    edges = tmp_path / "edges.txt"
    edges.write_text("0 1\n1 2\n2 0\n3 4\n4 5\n5 6\n6 3\n")  # a triangle and a 4-cycle
    protocol, _ = build(A2cid2, 8, topology="file", file=str(edges))
    ring4, _ = build(A2cid2, 4, topology="ring")
    assert protocol.describe()["chi1"] == pytest.approx(ring4.describe()["chi1"])


def test_a2cid2_without_edges_is_plain_gossip_doing_nothing(tmp_path):
    edges = tmp_path / "edges.txt"
    edges.write_text("# nobody\n")
    protocol, state = build(A2cid2, 3, topology="file", file=str(edges))
    x = state.x.copy()
    assert (protocol.eta, protocol.alpha_tilde) == (0.0, 0.5)
    assert protocol.round(state, np.ones(3, dtype=bool), 0).messages == 0
    assert np.array_equal(state.x, x)


def test_a2cid2_with_eta_zero_and_alpha_tilde_half_is_pairwise_gossip():
    a2, state_a2 = build(A2cid2, 12, topology="ring", eta=0.0, alpha_tilde=0.5, seed=4)
    pg, state_pg = build(PairwiseGossip, 12, topology="ring", seed=4)
    for t in range(10):
        a2.round(state_a2, np.ones(12, dtype=bool), t)
        pg.round(state_pg, np.ones(12, dtype=bool), t)
    assert np.array_equal(state_a2.x, state_pg.x)
    assert np.array_equal(state_a2.extra["x_tilde"], state_pg.x)


def test_a2cid2_absent_peers_keep_mixing_but_never_change_x_plus_x_tilde():
    protocol, state = build(A2cid2, 10, topology="ring", seed=2)
    present = np.ones(10, dtype=bool)
    protocol.round(state, present, 0)
    state.extra["x_tilde"][3] += 1.0  # as if peer 3 had exchanged: x̃ ≠ x
    total = state.x + state.extra["x_tilde"]
    x3 = state.x[3].copy()
    present[3] = False
    protocol.round(state, present, 1)
    np.testing.assert_allclose((state.x + state.extra["x_tilde"])[3], total[3], rtol=1e-14)
    assert not np.array_equal(state.x[3], x3)


def test_a2cid2_counts_exchanges_like_pairwise_gossip():
    protocol, state = build(A2cid2, 16, dim=5, topology="exponential")
    stats = protocol.round(state, np.ones(16, dtype=bool), 0)
    assert stats.messages == 2 * protocol.counters["exchanges"]
    assert stats.bytes_sent == stats.messages * 5 * 8


def test_a2cid2_parameters_reject_negative_overrides():
    with pytest.raises(ValueError, match="eta"):
        A2cid2Params(eta=-1.0)
    with pytest.raises(ValueError, match="rate"):
        PairwiseGossipParams(rate=0.0)
    with pytest.raises(ValueError, match="max_concurrent"):
        PairwiseGossipParams(max_concurrent=0)
    assert PushSumParams().rate == 1.0
