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


@st.composite
def pair_sequences(
    draw: st.DrawFn, n_peers: int, max_size: int = 40
) -> tuple[np.ndarray, np.ndarray]:
    """(i, j): two (K,) intp arrays with i_k ≠ j_k, in event order (pairs may share peers)."""
    ends = st.integers(0, n_peers - 1)
    pairs = draw(st.lists(st.tuples(ends, ends).filter(lambda p: p[0] != p[1]), max_size=max_size))
    table = np.array(pairs, dtype=np.intp).reshape(-1, 2)
    return table[:, 0].copy(), table[:, 1].copy()


@st.composite
def event_times(draw: st.DrawFn, size: int) -> np.ndarray:
    """(size,) sorted float64 times in [0, 1) (ties allowed)."""
    times = draw(hnp.arrays(np.float64, size, elements=st.floats(0, 1, exclude_max=True)))
    return np.sort(times)


# --- load balancing and compression (issue 4) -------------------------------------------

#: A few round bandwidths (bytes/s) so that draws contain ties, plus 0 and infinity.
ROUND_BANDWIDTHS = (1.25e6, 1.25e7, 1.25e8, 1.25e9)


def bandwidth_values() -> st.SearchStrategy[float]:
    """One member's bandwidth in bytes/s: 0, ``inf``, a round value or anything in 1e5 … 1e10."""
    return st.one_of(
        st.sampled_from((0.0, float("inf"), *ROUND_BANDWIDTHS)),
        st.floats(1e5, 1e10, allow_nan=False, allow_infinity=False),
    )


@st.composite
def group_bandwidths(
    draw: st.DrawFn, min_members: int = 1, max_members: int = 8
) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth_bytes_per_s, reducer): (g,) float64 and bool, at least one member that
    can reduce (bandwidth > 0 and ``reducer`` true)."""
    g = draw(st.integers(min_members, max_members))
    bandwidth = np.array(draw(st.lists(bandwidth_values(), min_size=g, max_size=g)))
    reducer = np.array(draw(st.lists(st.booleans(), min_size=g, max_size=g)))
    lucky = draw(st.integers(0, g - 1))
    reducer[lucky] = True
    if bandwidth[lucky] == 0:
        bandwidth[lucky] = draw(st.sampled_from(ROUND_BANDWIDTHS))
    return bandwidth, reducer


@st.composite
def share_vectors(draw: st.DrawFn, max_members: int = 8) -> np.ndarray:
    """(g,) float64 shares ≥ 0 summing to 1 (up to round-off), some exactly 0."""
    g = draw(st.integers(1, max_members))
    raw = draw(hnp.arrays(np.float64, g, elements=st.one_of(st.just(0.0), st.floats(1e-3, 1.0))))
    raw[draw(st.integers(0, g - 1))] = 1.0
    return raw / raw.sum()


@st.composite
def messages(draw: st.DrawFn, max_messages: int = 3, max_coords: int = 600) -> np.ndarray:
    """An (n_messages, n_coords) float64 batch of messages (rows), with repeated values."""
    m = draw(st.integers(1, max_messages))
    n = draw(st.integers(1, max_coords))
    repeated = st.sampled_from((0.0, 1.0, -2.5))
    return draw(hnp.arrays(np.float64, (m, n), elements=st.one_of(finite_floats(), repeated)))


# -- churn ----------------------------------------------------------------------------


def churn_sections() -> st.SearchStrategy[object]:
    """A ``churn`` section of a random model (``none``, ``bernoulli``, ``exponential``,
    ``waves`` on all peers) with times in seconds of modest size."""
    from sim.scenario.churn import BernoulliChurn, ExponentialChurn, NoChurn, WavesChurn

    times = st.floats(0.05, 10.0)
    return st.one_of(
        st.just(NoChurn()),
        st.builds(
            BernoulliChurn,
            model=st.just("bernoulli"),
            p=st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)),
            period=st.one_of(st.none(), times),
        ),
        st.builds(ExponentialChurn, model=st.just("exponential"), mtbf=times, mttr=times),
        st.builds(
            WavesChurn,
            model=st.just("waves"),
            rate=st.floats(0.05, 5.0),
            fraction=st.floats(0.01, 1.0),
            duration=times,
        ),
    )


@st.composite
def trace_rows(draw: st.DrawFn, n_peers: int) -> list[tuple[int, float, float]]:
    """Rows ``(peer, down_s, up_s)`` of a valid churn trace, shuffled.

    A peer's intervals never overlap but may touch (a gap of 0: they merge on loading);
    the last may end at ``inf``. Times are multiples of 0.25 s, so changes of different
    peers often fall on the same instant.
    """
    rows: list[tuple[int, float, float]] = []
    for peer in range(n_peers):
        t = draw(st.integers(0, 8))
        for _ in range(draw(st.integers(0, 3))):
            down = t + draw(st.integers(0, 4))
            t = down + draw(st.integers(1, 4))
            rows.append((peer, down / 4, t / 4))
        if draw(st.booleans()):
            rows.append((peer, (t + draw(st.integers(0, 4))) / 4, float("inf")))
    return draw(st.permutations(rows))
