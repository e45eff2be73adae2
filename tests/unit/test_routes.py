"""LinkGraph builders: shapes, degrees, reproducibility, file input and errors."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from pydantic import ValidationError

from protocols.gossip import GossipParams
from protocols.graphs import build_graph, graph_edges, neighbour_table
from sim.core.errors import ScenarioError


def graph(n: int, seed: int = 0, **params) -> nx.Graph:
    return build_graph(GossipParams(**params), n, np.random.default_rng(seed))


def degrees(g: nx.Graph) -> set[int]:
    return {d for _, d in g.degree}


@pytest.mark.parametrize(
    ("n", "params", "edges", "degree_set"),
    [
        (5, {"topology": "ring"}, 5, {2}),
        (2, {"topology": "ring"}, 1, {1}),
        (1, {"topology": "ring"}, 0, {0}),
        (12, {"topology": "torus"}, 24, {4}),
        (7, {"topology": "torus"}, 7, {2}),
        (6, {"topology": "complete"}, 15, {5}),
        (10, {"topology": "random_regular", "degree": 3}, 15, {3}),
    ],
)
def test_builders_give_the_expected_shape(n, params, edges, degree_set):
    g = graph(n, **params)
    assert sorted(g.nodes) == list(range(n))
    assert g.number_of_edges() == edges
    assert degrees(g) == degree_set
    assert nx.number_of_selfloops(g) == 0


def test_exponential_graph_links_powers_of_two_both_ways():
    g = graph(8, topology="exponential")
    assert sorted(g[0]) == [1, 2, 4, 6, 7]
    assert degrees(g) == {5}


def test_random_graphs_are_reproducible_per_seed():
    for params in (
        {"topology": "random_regular", "degree": 4},
        {"topology": "erdos_renyi", "p": 0.3},
    ):
        assert nx.utils.graphs_equal(graph(20, 7, **params), graph(20, 7, **params))
        assert not nx.utils.graphs_equal(graph(20, 7, **params), graph(20, 8, **params))


def test_impossible_random_regular_degree_names_the_key():
    with pytest.raises(ScenarioError, match=r"protocol\.degree"):
        graph(5, topology="random_regular", degree=3)


def test_edge_list_files_are_read_and_isolated_peers_kept(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("# a path\n0 1\n1 2 {}\n")
    g = graph(4, topology="file", file=str(path))
    assert sorted(g.edges) == [(0, 1), (1, 2)]
    assert 3 in g.nodes


def test_bad_edge_list_files_name_the_key(tmp_path):
    with pytest.raises(ScenarioError, match=r"protocol\.file"):
        graph(4, topology="file", file=str(tmp_path / "missing.txt"))
    path = tmp_path / "g.txt"
    path.write_text("0 9\n")
    with pytest.raises(ScenarioError, match="peers in 0"):
        graph(4, topology="file", file=str(path))


def test_file_topology_needs_a_path():
    with pytest.raises(ValidationError, match="needs 'file'"):
        GossipParams(topology="file")


@pytest.mark.parametrize("params", [{"degree": 0}, {"p": 0}, {"p": 1.5}, {"topology": "mesh"}])
def test_bad_topology_parameters_are_rejected(params):
    with pytest.raises(ValidationError):
        GossipParams(**params)


def test_neighbour_table_lists_sorted_neighbours_padded_with_self():
    g = nx.Graph([(0, 2), (0, 1), (3, 0)])
    g.add_node(4)
    neighbours, valid = neighbour_table(graph_edges(g), 5)
    assert neighbours.shape == (5, 3)
    assert neighbours[0].tolist() == [1, 2, 3]
    assert neighbours[1].tolist() == [0, 1, 1]
    assert valid[1].tolist() == [True, False, False]
    assert neighbours[4].tolist() == [4, 4, 4]
    assert not valid[4].any()


def test_neighbour_table_of_an_edgeless_graph_is_empty():
    neighbours, valid = neighbour_table(graph_edges(nx.empty_graph(3)), 3)
    assert neighbours.shape == valid.shape == (3, 0)
