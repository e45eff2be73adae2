"""The Hypothesis strategies of the test suite (the one strategies module).

Everything a property test needs to draw: finite bounded vectors, peer counts, partitions
into groups, disjoint pairs, graphs and their neighbour tables, presence masks and
schedules, seeds. Strategies return plain numpy / networkx objects.
"""

from __future__ import annotations

from functools import lru_cache

import networkx as nx
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

#: Bound on generated coordinates: large enough to matter, small enough that sums of a
#: few hundred of them never lose more than round-off.
BOUND = 1e3

seeds = st.integers(min_value=0, max_value=2**32 - 1)
dims = st.integers(min_value=1, max_value=4)


def finite_floats(bound: float = BOUND) -> st.SearchStrategy[float]:
    """Finite float64 values in [−bound, bound] (no NaN, no infinity)."""
    return st.floats(-bound, bound, allow_nan=False, allow_infinity=False, width=64)


def peer_counts(min_value: int = 1, max_value: int = 40) -> st.SearchStrategy[int]:
    """Numbers of peers N."""
    return st.integers(min_value=min_value, max_value=max_value)


@lru_cache(maxsize=512)  # strategies are immutable: build each shape once
def vectors(n_peers: int, dim: int, bound: float = BOUND) -> st.SearchStrategy[np.ndarray]:
    """An (n_peers, dim) float64 state of finite bounded coordinates."""
    return hnp.arrays(np.float64, (n_peers, dim), elements=finite_floats(bound))


@st.composite
def states(draw: st.DrawFn, min_peers: int = 1, max_peers: int = 40) -> np.ndarray:
    """An (N, dim) float64 state with N and dim drawn too."""
    n = draw(peer_counts(min_peers, max_peers))
    return draw(vectors(n, draw(dims)))


@st.composite
def partitions(draw: st.DrawFn, n_peers: int, max_groups: int | None = None) -> np.ndarray:
    """(n_peers,) group labels in [−1, k): label −1 means "in no group"."""
    k = draw(st.integers(1, max_groups or max(1, n_peers)))
    return draw(hnp.arrays(np.int64, n_peers, elements=st.integers(-1, k - 1)))


@st.composite
def permutations(draw: st.DrawFn, n: int) -> np.ndarray:
    """A permutation of 0 … n−1 as an intp array."""
    return np.array(draw(st.permutations(range(n))), dtype=np.intp)


@st.composite
def disjoint_pairs(draw: st.DrawFn, n_peers: int) -> tuple[np.ndarray, np.ndarray]:
    """(i, j): two (P,) arrays of rows, all 2P distinct."""
    order = draw(permutations(n_peers))
    n_pairs = draw(st.integers(0, n_peers // 2))
    return order[:n_pairs], order[n_pairs : 2 * n_pairs]


@lru_cache(maxsize=512)
def presence(n_peers: int, min_present: int = 0) -> st.SearchStrategy[np.ndarray]:
    """(n_peers,) boolean presence mask with at least ``min_present`` present peers."""
    masks = hnp.arrays(np.bool_, n_peers, elements=st.booleans())
    if min_present == 0:
        return masks
    return masks.filter(lambda m: int(m.sum()) >= min_present)


@lru_cache(maxsize=512)
def schedules(n_peers: int, max_rounds: int = 6) -> st.SearchStrategy[list[np.ndarray]]:
    """A list of presence masks, one per round."""
    return st.lists(presence(n_peers), min_size=1, max_size=max_rounds)


@st.composite
def graphs(draw: st.DrawFn, n_peers: int) -> nx.Graph:
    """A simple undirected graph on nodes 0 … n_peers−1 (any edge set, maybe disconnected)."""
    pairs = [(i, j) for i in range(n_peers) for j in range(i + 1, n_peers)]
    graph = nx.empty_graph(n_peers)
    if pairs:
        graph.add_edges_from(draw(st.lists(st.sampled_from(pairs), unique=True)))
    return graph


@st.composite
def row_stochastic_tables(draw: st.DrawFn, n_peers: int) -> tuple[np.ndarray, np.ndarray]:
    """(neighbours, weights): an (N, K) ELL table whose rows have weights summing to ≤ 1."""
    k = draw(st.integers(1, 4))
    neighbours = draw(hnp.arrays(np.intp, (n_peers, k), elements=st.integers(0, n_peers - 1)))
    raw = draw(hnp.arrays(np.float64, (n_peers, k), elements=st.floats(0, 1)))
    scale = draw(st.floats(0, 1))
    weights = scale * raw / np.maximum(raw.sum(axis=1, keepdims=True), 1.0)
    return neighbours, weights
