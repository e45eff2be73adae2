"""The fixed topologies' edge tables computed with numpy are networkx's, edge for edge."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.gossip import GossipParams
from protocols.graphs import build_graph, graph_edges, graph_from_edges, topology_edges

FIXED = ["ring", "torus", "complete", "exponential"]


def _both(topology: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    params = GossipParams(topology=topology)
    networkx = graph_edges(build_graph(params, n, np.random.default_rng(0)))
    return networkx, topology_edges(params, n, np.random.default_rng(0))


@settings(max_examples=150)
@given(st.sampled_from(FIXED), st.integers(0, 300))
def test_fixed_topologies_have_networkx_edges(topology, n):
    networkx, table = _both(topology, n)
    assert table.dtype == networkx.dtype
    assert table.shape == networkx.shape
    assert np.array_equal(table, networkx)


@pytest.mark.parametrize("topology", FIXED)
@pytest.mark.parametrize("n", [1024, 1031, 4096])  # 1031 is prime: the torus is a ring
def test_fixed_topologies_have_networkx_edges_at_size(topology, n):
    networkx, table = _both(topology, n)
    assert np.array_equal(table, networkx)


@pytest.mark.parametrize("topology", ["random_regular", "erdos_renyi"])
def test_random_topologies_are_networkx_draws(topology):
    params = GossipParams(topology=topology, degree=3, p=0.2)
    expected = graph_edges(build_graph(params, 40, np.random.default_rng(5)))
    assert np.array_equal(topology_edges(params, 40, np.random.default_rng(5)), expected)


def test_the_graph_of_the_table_is_the_built_graph():
    params = GossipParams(topology="torus")
    built = build_graph(params, 36, np.random.default_rng(0))
    table = topology_edges(params, 36, np.random.default_rng(0))
    graph = graph_from_edges(table, 36)
    assert sorted(graph.nodes) == sorted(built.nodes)
    assert {frozenset(e) for e in graph.edges} == {frozenset(e) for e in built.edges}
