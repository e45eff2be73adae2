"""A group's routes as the loop of :mod:`sim.engine.netclock.alone` takes them
(:func:`group_routes`): each flow's route latency, its resources as indices into the
group's own capacities, and those capacities."""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.network import FlowNetwork

#: Groups with at least this many connections look their routes up in arrays
#: (:func:`_routes_of_pairs`), smaller ones one connection at a time (the same arrays).
VECTOR_ROUTES = 32


def group_routes(
    net: FlowNetwork, src: np.ndarray, dst: np.ndarray, local: np.ndarray, members: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Per flow: route latency, resources (n, W) as indices into the capacities, -1
    padded; and those capacities. One route look-up per connection, or all of them in
    arrays from :data:`VECTOR_ROUTES` connections on (``local``: each peer's index among
    the sorted ``members``)."""
    routes, g = net.routes, members.size
    key = local[src] * g + local[dst]
    if g * g <= 4 * key.size + 1024:  # the connections by a table over the members' pairs
        index = np.full(g * g, -1, dtype=np.int64)
        index[key] = 0
        pairs = np.flatnonzero(index == 0)
        index[pairs] = np.arange(pairs.size)
        inverse = index[key]
    else:
        pairs, inverse = np.unique(key, return_inverse=True)
    if pairs.size >= VECTOR_ROUTES and not routes.has_links:
        latency, table, cap = _routes_of_pairs(routes, members[pairs // g], members[pairs % g])
        return latency.take(inverse), table.take(inverse, axis=0), cap
    latency = np.empty(pairs.size)
    used: dict[int, int] = {}
    listed: list[list[int]] = []
    ends = zip(members[pairs // g].tolist(), members[pairs % g].tolist(), strict=True)
    for k, (a, b) in enumerate(ends):
        latency_s, resources = routes.route(a, b)
        latency[k] = latency_s
        listed.append([used.setdefault(r, len(used)) for r in resources])
    width = max(1, max(len(r) for r in listed))
    table = np.full((pairs.size, width), -1, dtype=np.int64)
    for k, local_r in enumerate(listed):
        table[k, : len(local_r)] = local_r
    capacity = routes.capacity_bytes_per_s
    cap = np.array([capacity[r] for r in used], dtype=np.float64)
    return latency.take(inverse), table.take(inverse, axis=0), cap


def _routes_of_pairs(
    routes: Any, src: np.ndarray, dst: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`group_routes`' arrays for the connections ``src → dst`` without shared links,
    vectorised: the same latencies (each end's, added, or the matrix's), each row's
    finite resources first (the source's upload, then the destination's download), and
    the resources numbered in the order they first appear, as the loop over
    :meth:`~sim.network.routes.Routes.route` numbers them."""
    n = routes.n
    capacity = np.asarray(routes.capacity_bytes_per_s, dtype=np.float64)
    per_peer = routes.latency_vector
    if per_peer is not None:
        lat = np.asarray(per_peer, dtype=np.float64)
        latency = lat[src] + lat[dst]
    else:
        latency = routes.latency_matrix[src, dst].astype(np.float64)
    ends = np.stack([src, n + dst], axis=1).astype(np.int64)
    finite = np.isfinite(capacity[ends])
    rows = np.where(finite, ends, -1)
    down_only = ~finite[:, 0] & finite[:, 1]
    rows[down_only] = rows[down_only][:, ::-1]
    rows = rows[:, : max(1, int(finite.sum(axis=1).max()))]
    flat = rows.ravel()
    valid = flat >= 0
    found = flat[valid]
    unique, first = np.unique(found, return_index=True)
    by_first = np.argsort(first, kind="stable")
    number = np.empty(unique.size, dtype=np.int64)
    number[by_first] = np.arange(unique.size)
    local = np.full(flat.size, -1, dtype=np.int64)
    local[valid] = number[np.searchsorted(unique, found)]
    return latency, local.reshape(rows.shape), capacity[unique[by_first]]


__all__ = ["VECTOR_ROUTES", "group_routes"]
