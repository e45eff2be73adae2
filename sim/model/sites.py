"""Sites and shared links of a scenario (``network.sites``, ``network.links``).

Every peer sits at a site: the one ``network.sites`` gives its class, else
:data:`~sim.model.scenario.models.DEFAULT_SITE`. The links join sites into an undirected
networkx graph; :func:`topology` turns it into the :class:`~sim.network.LinkGraph` the
flow network routes over (shortest path by latency, every link full duplex).
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np

from sim.core.errors import ScenarioError
from sim.model.scenario.models import DEFAULT_SITE, Network, Peers
from sim.network import LinkGraph


def class_sites(network: Network, peers: Peers) -> list[str]:
    """The site of each class of ``peers.classes`` (one site, ``default``, with none).

    Raises
    ------
    ScenarioError
        On ``network.sites.<name>`` when no class of ``peers.classes`` has that name.
    """
    names = [c.name for c in peers.classes or []]
    for name in network.sites:
        if name not in names:
            known = ", ".join(n for n in names if n) or "none named"
            raise ScenarioError(
                f"network.sites.{name}", name, f"a class name of peers.classes ({known})"
            )
    if not names:
        return [DEFAULT_SITE]
    return [network.sites.get(name, DEFAULT_SITE) if name else DEFAULT_SITE for name in names]


def site_graph(network: Network, peers: Peers) -> nx.Graph:
    """The sites (link ends first, in order, then the sites peers use) and links.

    Edges carry ``capacity`` (bytes/s) and ``latency`` (seconds).

    Raises
    ------
    ScenarioError
        On ``network.sites.<name>`` for an unknown class, or when two sites that peers
        use have no path between them over ``network.links``.
    """
    sites = class_sites(network, peers)
    graph = nx.Graph()
    for link in network.links:
        graph.add_edge(link.a, link.b, capacity=link.capacity, latency=link.latency)
    graph.add_nodes_from(sites)
    _check_paths(graph, sites, [c.name for c in peers.classes or []], set(network.sites))
    return graph


def _check_paths(
    graph: nx.Graph, sites: list[str], names: Sequence[str | None], mapped: set[str]
) -> None:
    """Every site peers use must reach the others; the first one on a link is the reference."""
    linked = [site for site in sites if graph.degree(site) > 0]
    first = linked[0] if linked else sites[0]
    reachable = nx.node_connected_component(graph, first)
    for k, site in enumerate(sites):
        if site in reachable:
            continue
        name = names[k]
        if name in mapped:
            joined = f"a site joined to site {first!r} by network.links"
            raise ScenarioError(f"network.sites.{name}", site, joined)
        who = f"class {name!r}" if name else f"peers.classes.{k} (unnamed)"
        where = f"unmapped, it sits at {DEFAULT_SITE!r}, which has no path to site {first!r}"
        raise ScenarioError("network.sites", None, f"a site for {who} ({where})")


def check_sites(network: Network, peers: Peers) -> None:
    """Check ``network.sites`` and ``network.links`` against ``peers`` (see :func:`site_graph`)."""
    site_graph(network, peers)


def routes_of(network: Network, peers: Peers, peer_class: np.ndarray) -> LinkGraph | None:
    """The shared links of a run as a :class:`LinkGraph`, or ``None`` without links.

    Parameters
    ----------
    network, peers
        The scenario's sections.
    peer_class
        Shape ``(n,)`` int: each peer's index into ``peers.classes`` (the peer table's
        ``class`` column; all 0 when there are no classes).
    """
    graph = site_graph(network, peers)
    if not network.links:
        return None  # every peer sits at one site (site_graph checked): no link is used
    sites = class_sites(network, peers)
    peer_node = [sites[k] for k in np.asarray(peer_class, dtype=np.int64).tolist()]
    return LinkGraph(graph, peer_node, duplex="full")


__all__ = ["check_sites", "class_sites", "routes_of", "site_graph"]
