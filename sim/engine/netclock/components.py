"""A round's flows split into the parts that can meet nothing of each other (a barrier
round's groups run alone: :mod:`sim.engine.netclock.alone_rounds`).

Two flows are in one *component* when they share a peer (its links), or one waits for
the other (a gate both open or wait on, ``after``, ``previous``). Without shared links
(``network.links``), flows of different components use no common resource and wait for
nothing of each other, so each component's times follow from its own flows alone. A
Moshpit or random_groups round is one component per group, a ring all-reduce one in all.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from protocols.contract import Flows
from sim.core.sets import unique_ints


def labels(flows: Flows, n_peers: int) -> np.ndarray:
    """(n_flows,) int: each flow's component, numbered from 0 in the order of each
    component's first flow."""
    src = np.asarray(flows.src, dtype=np.int64)
    dst = np.asarray(flows.dst, dtype=np.int64)
    if src.size == 0:
        return np.zeros(0, dtype=np.int64)
    rows, cols = [src], [dst]  # nodes: the peers, then the gates
    n_gates = 0
    for gates in (flows.opens, flows.waits):
        if gates is not None:
            used = gates >= 0
            rows.append(src[used])
            cols.append(n_peers + np.asarray(gates[used], dtype=np.int64))
            n_gates = max(n_gates, int(gates.max(initial=-1)) + 1)
    for other in (flows.after, flows.previous):
        if other is not None:
            used = other >= 0
            rows.append(src[used])
            cols.append(src[other[used]])
    row, col = np.concatenate(rows), np.concatenate(cols)
    size = n_peers + n_gates
    graph = coo_matrix((np.ones(row.size, dtype=np.int8), (row, col)), shape=(size, size))
    _, node = connected_components(graph, directed=False)
    raw = node[src]
    # renumber by first flow, so that the order does not depend on scipy's numbering
    found, first = np.unique(raw, return_index=True)
    lookup = np.full(int(found[-1]) + 1, -1, dtype=np.int64)
    lookup[found[np.argsort(first, kind="stable")]] = np.arange(found.size)
    return lookup[raw]


def subset(flows: Flows, index: np.ndarray) -> Flows:
    """The flows ``index`` (ascending; closed: every flow and gate they refer to is among
    them or theirs alone) as a plan of their own: flow and gate numbers from 0, in the
    same order."""
    n = flows.src.size
    new = np.full(n, -1, dtype=np.int64)
    new[index] = np.arange(index.size)
    gates = [g[index] for g in (flows.opens, flows.waits) if g is not None]
    used = unique_ints(np.concatenate([g[g >= 0] for g in gates])) if gates else None

    def renumbered_gates(g: np.ndarray | None) -> np.ndarray | None:
        if g is None:
            return None
        assert used is not None
        g = g[index]
        return np.where(g >= 0, np.searchsorted(used, g), -1).astype(np.intp)

    def renumbered_flows(f: np.ndarray | None) -> np.ndarray | None:
        if f is None:
            return None
        f = f[index]
        return np.where(f >= 0, new[np.maximum(f, 0)], -1).astype(np.intp)

    def taken(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a[index]

    return Flows(
        src=flows.src[index], dst=flows.dst[index], nbytes=flows.nbytes[index],
        opens=renumbered_gates(flows.opens), waits=renumbered_gates(flows.waits),
        after=renumbered_flows(flows.after), start_s=taken(flows.start_s),
        timeout_s=taken(flows.timeout_s), streamed=taken(flows.streamed),
        previous=renumbered_flows(flows.previous),
    )  # fmt: skip


def split(flows: Flows, n_peers: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each component's flows (ascending indices) and peers (ascending), in the order of
    their first flows."""
    label = labels(flows, n_peers)
    if label.size == 0:
        return []
    order = np.argsort(label, kind="stable")
    cuts = np.flatnonzero(np.diff(label[order])) + 1
    parts = []
    for index in np.split(order, cuts):
        peers = unique_ints(np.concatenate([flows.src[index], flows.dst[index]]))
        parts.append((index, peers))
    return parts


__all__ = ["labels", "split", "subset"]
