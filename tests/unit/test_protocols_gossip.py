"""Synchronous gossip: weights, absent neighbours, drift and traffic."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from protocols.contract import Context, State
from protocols.gossip import Gossip, GossipParams, column_excess, gossip_weights
from protocols.graphs import graph_edges, neighbour_table


def build(n: int, dim: int = 1, **params) -> tuple[Gossip, State]:
    protocol = Gossip(GossipParams(**params), Context(n, dim, 8, np.random.default_rng(0)))
    return protocol, State(x=np.random.default_rng(1).normal(size=(n, dim)))


def dense(neighbours: np.ndarray, weights: np.ndarray) -> np.ndarray:
    n = len(neighbours)
    w = np.zeros((n, n))
    np.add.at(
        w, (np.repeat(np.arange(n), neighbours.shape[1]), neighbours.ravel()), weights.ravel()
    )
    return w + np.diag(1 - weights.sum(axis=1))


def test_uniform_ring_gossip_averages_each_peer_with_its_two_neighbours():
    protocol, st = build(6, topology="ring")
    x = st.x.copy()
    stats = protocol.round(st, np.ones(6, dtype=bool), 0)
    expected = (np.roll(x, 1, axis=0) + x + np.roll(x, -1, axis=0)) / 3
    np.testing.assert_allclose(st.x, expected, rtol=1e-14)
    assert stats.messages == 12
    assert stats.bytes_sent == 12 * 8
    assert stats.mean_drift == 0.0  # a regular graph: uniform is doubly stochastic here


def test_absent_neighbours_are_skipped():
    protocol, st = build(5, topology="ring")
    x = st.x.copy()
    present = np.array([True, False, True, True, True])
    stats = protocol.round(st, present, 0)
    np.testing.assert_allclose(st.x[0], (x[0] + x[4]) / 2, rtol=1e-14)
    np.testing.assert_allclose(st.x[2], (x[2] + x[3]) / 2, rtol=1e-14)
    assert np.array_equal(st.x[1], x[1])
    assert stats.messages == 6


def test_metropolis_weights_are_symmetric_and_doubly_stochastic_on_a_star():
    graph = nx.star_graph(4)
    neighbours, valid = neighbour_table(graph_edges(graph), 5)
    weights = gossip_weights(neighbours, valid, np.ones(5, dtype=bool), "metropolis")
    w = dense(neighbours, weights)
    np.testing.assert_allclose(w, w.T)
    np.testing.assert_allclose(w.sum(axis=0), 1)
    assert w[0, 1] == pytest.approx(1 / 5)
    assert np.allclose(column_excess(neighbours, weights), 0)


def test_uniform_weights_on_an_irregular_graph_drift_and_say_so():
    graph = nx.star_graph(4)
    neighbours, valid = neighbour_table(graph_edges(graph), 5)
    weights = gossip_weights(neighbours, valid, np.ones(5, dtype=bool), "uniform")
    w = dense(neighbours, weights)
    np.testing.assert_allclose(w.sum(axis=1), 1)
    np.testing.assert_allclose(column_excess(neighbours, weights), w.sum(axis=0) - 1)
    assert np.abs(column_excess(neighbours, weights)).max() > 0.1


def test_metropolis_gossip_keeps_the_mean_under_absences():
    protocol, st = build(12, dim=2, topology="torus", weights="metropolis")
    total = st.x.sum(axis=0)
    present = np.ones(12, dtype=bool)
    present[[1, 6]] = False
    stats = protocol.round(st, present, 0)
    np.testing.assert_allclose(st.x.sum(axis=0), total, rtol=1e-13)
    assert stats.mean_drift == 0.0
