"""Communication graphs for the gossip family, built with networkx from seeded draws.

Topologies (``topology:`` in a protocol's parameters), on peers 0 … N−1:

| name | graph |
| --- | --- |
| ``ring`` | cycle i — i+1 (mod N) |
| ``torus`` | periodic 2-D grid a×b, a·b = N, a the largest divisor ≤ √N (prime N: ring) |
| ``complete`` | every pair |
| ``random_regular`` | uniform random ``degree``-regular graph (N·degree even, degree < N) |
| ``exponential`` | i — i+2^k (mod N) for k = 0 … ⌊log₂(N−1)⌋ (undirected) |
| ``erdos_renyi`` | G(N, p): each pair independently with probability ``p`` (may be disconnected) |
| ``file`` | an edge list ``u v`` per line (``#`` comments; extra columns ignored), peers 0 … N−1 |

A bad edge-list file is one :class:`EdgeListError` naming ``protocol.file``, the line and
the value (a line with one field, a peer out of range or not an integer, bytes that are
not UTF-8).

Graphs are simple: self-loops and repeated edges are dropped, and every peer is a node
(isolated peers just never mix). Random graphs draw one integer seed from the
protocol's generator and hand it to networkx, so they are reproducible per run.

The protocols use a topology as its sorted edge table (:func:`topology_edges`). The
fixed topologies (ring, torus, complete, exponential) compute it with numpy, the same
edges :func:`build_graph`'s networkx graph has (a test compares them), without building
the graph: a ring of 4096 peers took networkx 13 ms. :func:`graph_from_edges` gives the
networkx graph back where one is wanted.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal

import networkx as nx
import numpy as np
from pydantic import Field, model_validator

from protocols._common import Probability
from protocols.base import ProtocolParams
from protocols.contract import Context
from sim.core.errors import ScenarioError
from sim.core.sets import unique_ints

TopologyName = Literal[
    "ring", "torus", "complete", "random_regular", "exponential", "erdos_renyi", "file"
]


class TopologyParams(ProtocolParams):
    """The topology fields shared by graph-based protocols (subclasses add ``name``)."""

    topology: TopologyName = "ring"
    degree: int = Field(default=4, ge=1, description="degree of random_regular")
    p: Probability = Field(
        default=0.1, gt=0, le=1, description="edge probability of erdos_renyi (e.g. 10%)"
    )
    file: str | None = Field(default=None, description="edge-list path for topology: file")

    @model_validator(mode="after")
    def _file_given(self) -> TopologyParams:
        if self.topology == "file" and not self.file:
            raise ValueError("topology 'file' needs 'file': the path of an edge list")
        return self


def build_graph(params: TopologyParams, n_peers: int, rng: np.random.Generator) -> nx.Graph:
    """The simple undirected graph ``params`` describes, on nodes 0 … n_peers−1 (each
    builder makes a new ``nx.Graph``, completed here in place: no copy)."""
    graph = _BUILDERS[params.topology](params, n_peers, rng)
    graph.remove_edges_from(list(nx.selfloop_edges(graph)))
    graph.add_nodes_from(range(n_peers))
    return graph


class TopologyGraph:
    """What the graph-based protocols share: ``edges``, their topology's edge table
    (:func:`topology_edges`), and :attr:`graph`, the networkx graph of it, built on first
    use (the protocols run on the table; the graph is for users and tests)."""

    edges: np.ndarray
    ctx: Context

    @cached_property
    def graph(self) -> nx.Graph:
        """The topology as a networkx graph on peers 0 … N−1."""
        return graph_from_edges(self.edges, self.ctx.n_peers)


def topology_edges(params: TopologyParams, n_peers: int, rng: np.random.Generator) -> np.ndarray:
    """(E, 2) intp: the edges (u, v), u < v, in sorted order, of the graph
    :func:`build_graph` makes; computed with numpy for the fixed topologies (no draw
    from ``rng``, as theirs make none)."""
    fixed = _FIXED.get(params.topology)
    if fixed is not None:
        return fixed(n_peers)
    return graph_edges(build_graph(params, n_peers, rng))


def graph_edges(graph: nx.Graph) -> np.ndarray:
    """(E, 2) intp array of the graph's edges (u, v), u < v, in sorted order."""
    edges = np.sort(np.array(list(graph.edges()), dtype=np.intp).reshape(-1, 2), axis=1)
    order = np.lexsort((edges[:, 1], edges[:, 0]))
    return edges[order]


def graph_from_edges(edges: np.ndarray, n_peers: int) -> nx.Graph:
    """The networkx graph on peers 0 … n_peers−1 with ``edges``."""
    graph = nx.Graph()
    graph.add_nodes_from(range(n_peers))
    graph.add_edges_from(edges.tolist())
    return graph


def neighbour_table(edges: np.ndarray, n_peers: int) -> tuple[np.ndarray, np.ndarray]:
    """The graph of ``edges`` ((E, 2), as :func:`topology_edges`) as a padded neighbour
    table (ELL form).

    Returns
    -------
    neighbours
        (n_peers, K) intp, K the largest degree: row i lists i's neighbours in
        increasing order, padded with i itself.
    valid
        (n_peers, K) bool, true on real neighbours.
    """
    edges = np.asarray(edges, dtype=np.intp).reshape(-1, 2)
    edges = edges[edges[:, 0] != edges[:, 1]]
    src = np.concatenate((edges[:, 0], edges[:, 1]))
    dst = np.concatenate((edges[:, 1], edges[:, 0]))
    by_src = np.lexsort((dst, src))
    src, dst = src[by_src], dst[by_src]
    degree = np.bincount(src, minlength=n_peers)
    width = int(degree.max()) if n_peers else 0
    slot = np.arange(src.size) - np.repeat(np.cumsum(degree) - degree, degree)
    neighbours = np.repeat(np.arange(n_peers, dtype=np.intp)[:, None], width, axis=1)
    valid = np.zeros((n_peers, width), dtype=bool)
    neighbours[src, slot] = dst
    valid[src, slot] = True
    return neighbours, valid


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**32))


def _ring(params: TopologyParams, n: int, rng: np.random.Generator) -> nx.Graph:
    return nx.cycle_graph(n)


def _torus_shape(n: int) -> tuple[int, int]:
    """(rows, cols) of the torus on n peers: rows the largest divisor of n ≤ √n."""
    rows = max(a for a in range(1, int(np.sqrt(n)) + 1) if n % a == 0) if n else 1
    return rows, (n // rows if n else 0)


def _torus(params: TopologyParams, n: int, rng: np.random.Generator) -> nx.Graph:
    rows, cols = _torus_shape(n)
    grid = nx.grid_2d_graph(rows, cols, periodic=True)
    return nx.relabel_nodes(grid, {(r, c): r * cols + c for r, c in grid.nodes})


def _complete(params: TopologyParams, n: int, rng: np.random.Generator) -> nx.Graph:
    return nx.complete_graph(n)


def _random_regular(params: TopologyParams, n: int, rng: np.random.Generator) -> nx.Graph:
    if params.degree >= n or (n * params.degree) % 2:
        raise ScenarioError(
            "protocol.degree",
            params.degree,
            f"a degree below peers.count ({n}) with peers.count × degree even",
        )
    return nx.random_regular_graph(params.degree, n, seed=_seed(rng))


def _exponential(params: TopologyParams, n: int, rng: np.random.Generator) -> nx.Graph:
    graph = nx.empty_graph(n)
    if n >= 2:
        peers = np.arange(n)
        for k in range((n - 1).bit_length()):
            graph.add_edges_from(zip(peers.tolist(), ((peers + 2**k) % n).tolist(), strict=True))
    return graph


def _erdos_renyi(params: TopologyParams, n: int, rng: np.random.Generator) -> nx.Graph:
    return nx.gnp_random_graph(n, params.p, seed=_seed(rng))


class EdgeListError(ScenarioError):
    """An edge-list file that cannot be read: names ``protocol.file``, the line, the value."""

    def __init__(self, path: Path, line: int | None, expected: str, got: str) -> None:
        super().__init__("protocol.file", got, expected)
        where = str(path) if line is None else f"{path} line {line}"
        self.args = (f"protocol.file: {where}: expected {expected}, got {got}",)


def read_edge_list(path: Path, n: int) -> list[tuple[int, int]]:
    """The edges ``u v`` of an edge-list file, in file order, on peers 0 … n−1.

    One edge per line: two integers, then anything (ignored); ``#`` starts a comment;
    blank lines are skipped.

    Raises
    ------
    EdgeListError
        On an unreadable or non-UTF-8 file, or the first line that is not an edge of
        two peers in range (naming the line).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EdgeListError(path, None, "a readable edge-list file", exc.strerror or "") from None
    except UnicodeDecodeError:
        raise EdgeListError(path, None, "UTF-8 text", "bytes that are not UTF-8") from None
    edges: list[tuple[int, int]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) < 2:
            raise EdgeListError(path, number, "an edge 'u v' (two peers)", repr(line.strip()))
        ends = [_peer(path, number, field, n) for field in fields[:2]]
        edges.append((ends[0], ends[1]))
    return edges


def _peer(path: Path, line: int, field: str, n: int) -> int:
    try:
        peer = int(field)
    except ValueError:
        peer = -1
    if not (field.isascii() and 0 <= peer < n):
        raise EdgeListError(path, line, f"peers in 0 … {n - 1}", repr(field))
    return peer


def _from_file(params: TopologyParams, n: int, rng: np.random.Generator) -> nx.Graph:
    graph = nx.Graph()
    graph.add_edges_from(read_edge_list(Path(str(params.file)), n))
    return graph


def _simple(u: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    """The simple graph of the pairs (u_k, v_k) of peers below ``n``: (E, 2) intp,
    u < v, sorted, no self-loops or repeats (one int64 key u·n + v per pair)."""
    low, high = np.minimum(u, v).astype(np.int64), np.maximum(u, v).astype(np.int64)
    keys = unique_ints((low * n + high)[low != high])
    return np.stack(np.divmod(keys, max(n, 1)), axis=1).astype(np.intp).reshape(-1, 2)


def _ring_edges(n: int) -> np.ndarray:
    peers = np.arange(n)
    return _simple(peers, (peers + 1) % max(n, 1), n)


def _torus_edges(n: int) -> np.ndarray:
    """nx.grid_2d_graph(rows, cols, periodic=True): wrap-around only along a side of
    three or more."""
    rows, cols = _torus_shape(n)
    r, c = np.divmod(np.arange(n), max(cols, 1))
    u, v = [], []
    down = r + 1 < rows if rows <= 2 else np.ones(n, dtype=bool)
    u.append((r * cols + c)[down])
    v.append((((r + 1) % rows) * cols + c)[down])
    right = c + 1 < cols if cols <= 2 else np.ones(n, dtype=bool)
    u.append((r * cols + c)[right])
    v.append((r * cols + (c + 1) % max(cols, 1))[right])
    return _simple(np.concatenate(u), np.concatenate(v), n)


def _complete_edges(n: int) -> np.ndarray:
    u, v = np.triu_indices(n, 1)
    return np.stack((u, v), axis=1).astype(np.intp).reshape(-1, 2)


def _exponential_edges(n: int) -> np.ndarray:
    if n < 2:
        return np.zeros((0, 2), dtype=np.intp)
    peers = np.arange(n)
    hops = [(peers + 2**k) % n for k in range((n - 1).bit_length())]
    return _simple(np.tile(peers, len(hops)), np.concatenate(hops), n)


#: The fixed topologies' edge tables, computed without networkx (:func:`topology_edges`).
_FIXED = {
    "ring": _ring_edges,
    "torus": _torus_edges,
    "complete": _complete_edges,
    "exponential": _exponential_edges,
}

_BUILDERS = {
    "ring": _ring,
    "torus": _torus,
    "complete": _complete,
    "random_regular": _random_regular,
    "exponential": _exponential,
    "erdos_renyi": _erdos_renyi,
    "file": _from_file,
}
