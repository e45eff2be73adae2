"""Resources and routes: peers' NICs, optional shared links, and route latencies.

A *resource* is anything with a capacity that flows share: peer ``i``'s upload is
resource ``i``, its download resource ``n + i``, and the links of a :class:`LinkGraph`
follow. A route is the route latency (seconds) and the tuple of finite-capacity resources
a flow uses; infinite resources are left out since they never limit.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from sim.network.faults import NetworkError

Route = tuple[float, tuple[int, ...]]


class LinkGraph:
    """Shared links between peers (a passive description; :class:`Routes` compiles it).

    Parameters
    ----------
    graph
        A networkx graph of nodes (routers, sites, …) and links. Each edge may carry
        ``capacity`` (bytes/s, default ``inf``) and ``latency`` (seconds, default 0).
        In a ``DiGraph`` every edge is one resource; in an undirected graph every edge is
        a full-duplex link (one resource per direction), or one resource shared by both
        directions when ``duplex="half"``.
    peer_node
        Node of each peer: a sequence (peer ``i`` at ``peer_node[i]``) or a mapping from
        every peer index to its node. Several peers may share a node.
    duplex
        ``"full"`` (default) or ``"half"``; ignored for directed graphs.

    Notes
    -----
    A flow from ``a`` to ``b`` takes the shortest path by link latency (networkx Dijkstra,
    ties broken by the graph's insertion order, so deterministic) and uses the capacity of
    every finite link on it in addition to the source's upload and the destination's
    download; its route latency gains the sum of the path's link latencies.
    """

    def __init__(
        self,
        graph: nx.Graph,
        peer_node: Sequence[Hashable] | Mapping[int, Hashable],
        duplex: str = "full",
    ) -> None:
        if duplex not in ("full", "half"):
            raise NetworkError("LinkGraph(duplex)", duplex, "'full' or 'half'")
        if graph.is_multigraph():
            raise NetworkError("LinkGraph(graph)", type(graph).__name__, "a Graph or DiGraph")
        self.graph, self.duplex = graph, duplex
        if isinstance(peer_node, Mapping):
            self.peer_node = [peer_node[i] for i in range(len(peer_node))]
        else:
            self.peer_node = list(peer_node)
        for peer, node in enumerate(self.peer_node):
            if node not in graph:
                raise NetworkError(f"LinkGraph(peer_node[{peer}])", node, "a node of the graph")
        for u, v, data in graph.edges(data=True):
            _link_value(data, "capacity", math.inf, (u, v), positive=True)
            _link_value(data, "latency", 0.0, (u, v), positive=False)


def _link_value(data: dict[str, Any], key: str, default: float, edge: Any, positive: bool) -> float:
    value = float(data.get(key, default))
    bad = math.isnan(value) or value < 0 or (positive and value == 0)
    if bad or (key == "latency" and math.isinf(value)):
        expected = "a capacity > 0 in bytes/s" if positive else "a finite latency >= 0 in seconds"
        raise NetworkError(f"LinkGraph edge {edge!r} {key}", data.get(key), expected)
    return value


def _vector(name: str, values: Any, allow_inf: bool, positive: bool) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    bad = np.isnan(array) | (array <= 0 if positive else array < 0)
    if not allow_inf:
        bad |= np.isinf(array)
    if bad.any():
        what = "> 0 (inf allowed)" if allow_inf else "finite and >= 0"
        raise NetworkError(name, values, f"values {what}")
    return array


class Routes:
    """Compiled resources and routes of one network.

    Parameters
    ----------
    upload_bytes_per_s, download_bytes_per_s
        Shape ``(n,)`` float; capacities in bytes/s, ``> 0``, ``inf`` allowed.
    latency_s
        Shape ``(n,)``: one-way latency per peer, route latency ``lat[src] + lat[dst]``;
        or shape ``(n, n)``: route latency matrix. Seconds, finite, ``>= 0``.
    links
        Optional shared links (:class:`LinkGraph`).
    """

    def __init__(
        self,
        upload_bytes_per_s: Any,
        download_bytes_per_s: Any,
        latency_s: Any,
        links: LinkGraph | None = None,
    ) -> None:
        up = _vector("upload_bytes_per_s", upload_bytes_per_s, allow_inf=True, positive=True)
        down = _vector("download_bytes_per_s", download_bytes_per_s, allow_inf=True, positive=True)
        lat = _vector("latency_s", latency_s, allow_inf=False, positive=False)
        n = up.shape[0]
        if up.ndim != 1 or down.shape != (n,):
            raise NetworkError("download_bytes_per_s", down.shape, f"shape ({n},) like upload")
        if lat.shape not in ((n,), (n, n)):
            raise NetworkError("latency_s", lat.shape, f"shape ({n},) or ({n}, {n})")
        self.n = n
        self.capacity_bytes_per_s: list[float] = up.tolist() + down.tolist()
        self._up = [(i,) if math.isfinite(c) else () for i, c in enumerate(up.tolist())]
        self._down = [(n + i,) if math.isfinite(c) else () for i, c in enumerate(down.tolist())]
        self._lat_vector = lat.tolist() if lat.ndim == 1 else None
        self._lat_matrix = lat if lat.ndim == 2 else None
        self._links = _Links(links, self.capacity_bytes_per_s) if links else None
        if links is not None and len(links.peer_node) != n:
            raise NetworkError("links.peer_node", len(links.peer_node), f"{n} peers")

    @property
    def latency_vector(self) -> list[float] | None:
        """Each peer's latency (seconds; a route adds both ends'), or None when latencies
        were given per pair (:attr:`latency_matrix`)."""
        return self._lat_vector

    @property
    def latency_matrix(self) -> np.ndarray | None:
        """The (n, n) route latencies when given per pair, else None."""
        return self._lat_matrix

    @property
    def has_links(self) -> bool:
        """Whether routes cross shared links (:class:`~sim.network.routes.LinkGraph`)."""
        return self._links is not None

    def check_peer(self, where: str, peer: Any) -> int:
        """Return ``peer`` as an int, or raise :class:`NetworkError` if it is no peer index."""
        if type(peer) is int and 0 <= peer < self.n:
            return peer
        if (
            isinstance(peer, bool)
            or not isinstance(peer, int | np.integer)
            or not (0 <= peer < self.n)
        ):
            raise NetworkError(where, peer, f"a peer index in [0, {self.n})")
        return int(peer)

    def route(self, src: int, dst: int) -> Route:
        """Route latency (seconds) and the finite resources a flow ``src -> dst`` uses.

        A flow from a peer to itself is no exception: it uses the peer's upload and
        download and waits its route latency.
        """
        if self._lat_vector is not None:
            latency_s = self._lat_vector[src] + self._lat_vector[dst]
        else:
            assert self._lat_matrix is not None
            latency_s = float(self._lat_matrix[src, dst])
        resources = self._up[src] + self._down[dst]
        if self._links is None:
            return latency_s, resources
        link_latency_s, link_resources = self._links.path(src, dst)
        return latency_s + link_latency_s, resources + link_resources


class _Links:
    """The links of a :class:`LinkGraph` as resources, with shortest paths cached per node pair."""

    def __init__(self, links: LinkGraph, capacities: list[float]) -> None:
        self.links = links
        graph = links.graph
        self._resource: dict[tuple[Hashable, Hashable], int | None] = {}
        self._latency_s: dict[tuple[Hashable, Hashable], float] = {}
        for u, v, data in graph.edges(data=True):
            capacity = _link_value(data, "capacity", math.inf, (u, v), positive=True)
            latency_s = _link_value(data, "latency", 0.0, (u, v), positive=False)
            directions = [(u, v)] if graph.is_directed() else [(u, v), (v, u)]
            shared = None
            for edge in directions:
                self._latency_s[edge] = latency_s
                if not math.isfinite(capacity):
                    self._resource[edge] = None
                elif links.duplex == "half" and shared is not None:
                    self._resource[edge] = shared
                else:
                    shared = self._resource[edge] = len(capacities)
                    capacities.append(capacity)
        self._paths: dict[Hashable, dict[Hashable, list[Hashable]]] = {}
        self._routes: dict[tuple[Hashable, Hashable], Route] = {}

    def path(self, src: int, dst: int) -> Route:
        """Latency (seconds) and link resources of the shortest path between two peers."""
        a, b = self.links.peer_node[src], self.links.peer_node[dst]
        route = self._routes.get((a, b))
        if route is None:
            route = self._routes[(a, b)] = self._compute(a, b)
        return route

    def _compute(self, a: Hashable, b: Hashable) -> Route:
        paths = self._paths.get(a)
        if paths is None:
            graph = self.links.graph
            paths = self._paths[a] = nx.single_source_dijkstra_path(graph, a, weight=_weight)
        if b not in paths:
            raise NetworkError("links", (a, b), "a path between the peers' nodes")
        edges = list(zip(paths[b][:-1], paths[b][1:], strict=True))
        latency_s = math.fsum(self._latency_s[edge] for edge in edges)
        resources = tuple(r for edge in edges if (r := self._resource[edge]) is not None)
        return latency_s, resources


def _weight(u: Hashable, v: Hashable, data: dict[str, Any]) -> float:
    return float(data.get("latency", 0.0))
