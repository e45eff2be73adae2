"""What a protocol's run costs, declared per protocol for the resource guards.

:meth:`protocols.base.Protocol.footprint` returns a :class:`Footprint` from the
protocol's parameters and the run's sizes alone — nothing is built or allocated — and
:mod:`sim.engine.resources` turns it into a peak-memory and an event-count estimate before a run
starts. The figures are upper bounds of what the code holds at its peak (read from the
kernels, then checked against measurement in ``tests/integration/test_resources.py``):
a count of (N, dim) arrays, bytes of host tables, and the flows a round sends.

Helpers here give the shared parts: the butterfly's flows (``random_groups``,
``moshpit``) and the bytes of a gossip graph (networkx objects and the neighbour tables
built from them).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import Any

from sim.kernels._xp import GATHER_ELEMENTS
from sim.kernels.compression import Wire

#: Bytes of a networkx graph per node and per edge (dict-of-dicts adjacency; measured
#: with tracemalloc: 650 B per node of a ring, 270–380 B per edge of complete, random
#: and exponential graphs; rounded up).
GRAPH_NODE_BYTES = 1024
GRAPH_EDGE_BYTES = 400
#: Bytes per edge of a fixed topology's tables built with numpy (no networkx graph,
#: :func:`~protocols.graphs.topology_edges`): the pairs and their sort (measured with
#: tracemalloc: 48–97 B per edge) and a neighbour table's sort by source (98–112 B per
#: edge on top of the 16 B edge table kept); rounded up.
EDGE_BUILD_BYTES = 128
#: Bytes per slot of a padded neighbour table: neighbours (intp), valid (bool), and the
#: float64 weights and their temporaries rebuilt each round.
NEIGHBOUR_SLOT_BYTES = 40
#: Bytes per edge of an (E, 2) edge table with its (E,) rates (edge-clock protocols).
EDGE_TABLE_BYTES = 24


@dataclass(frozen=True)
class Footprint:
    """A protocol's resource needs for a run, estimated before the run is built.

    Attributes
    ----------
    state_arrays
        (N, dim) arrays of the state's dtype alive at the peak of a round: x, the
        protocol's own arrays (x̃, ...), the round's temporaries and the estimate the
        recorder reads (x / w).
    float64_arrays
        (N, dim) float64 arrays alive at that peak whatever the state's dtype (sums
        computed in float64).
    table_bytes
        Host tables the protocol keeps (graphs, neighbour and edge tables), bytes.
    flows_per_round
        Network clock, barrier rounds: flows one round sends.
    flows_per_s
        Network clock, continuous time: flows started per second of simulated time.
    flows_in_flight
        Network clock: the most flows in flight at once.
    round_bytes_per_peer
        Network clock, barrier rounds: bytes a peer sends in one round (with the
        peers' bandwidth, a lower bound of a round's duration).
    planned_rings
        Network clock, continuous time: the most rings one closed-form segment plans
        (:func:`protocols._solo_exchanges.settings.segment_rings`), each held until the
        segment is applied.
    """

    state_arrays: float = 1.0
    float64_arrays: float = 0.0
    table_bytes: float = 0.0
    flows_per_round: float = 0.0
    flows_per_s: float = 0.0
    flows_in_flight: float = 0.0
    round_bytes_per_peer: float = 0.0
    planned_rings: float = 0.0

    def with_network_of(self, wire: Footprint) -> Footprint:
        """This footprint's memory (arrays, tables) with the flows and bytes of ``wire``:
        the footprint of the same protocol computed for the vector on the wire
        (``vector.wire_bytes``), whose sizes set the pieces and the bytes of the flows
        while the arrays hold ``dim`` coordinates."""
        return replace(self, **{name: getattr(wire, name) for name in NETWORK_FIELDS})


#: The :class:`Footprint` fields set by the vector on the wire rather than the simulated one.
NETWORK_FIELDS = ("flows_per_round", "flows_per_s", "flows_in_flight", "round_bytes_per_peer")


@dataclass(frozen=True)
class GraphSize:
    """Expected size of a topology's graph: undirected ``edges``, the largest degree, and
    whether it is built as a networkx graph (the random and file topologies; the fixed
    ones are numpy tables only)."""

    edges: float
    max_degree: float
    networkx: bool = True

    def table_bytes(self, n_peers: int, neighbour_table: bool = True) -> float:
        """Bytes of building the graph (networkx, or the fixed topologies' numpy tables)
        and, optionally, its padded neighbour table."""
        if self.networkx:
            nbytes = GRAPH_NODE_BYTES * n_peers + GRAPH_EDGE_BYTES * self.edges
        else:
            nbytes = EDGE_BUILD_BYTES * self.edges
        if neighbour_table:
            nbytes += NEIGHBOUR_SLOT_BYTES * n_peers * self.max_degree
        return nbytes


def graph_size(params: Any, n_peers: int) -> GraphSize:
    """:class:`GraphSize` of the topology of ``params`` (a ``TopologyParams``) on
    ``n_peers`` peers; an edge-list file counts one edge per line of its size."""
    n = float(n_peers)
    top = max(n - 1, 0.0)
    if n < 2:
        return GraphSize(0.0, 0.0)
    topology = params.topology
    if topology == "ring":
        return GraphSize(n, min(2.0, top), networkx=False)
    if topology == "torus":
        return GraphSize(2 * n, min(4.0, top), networkx=False)
    if topology == "complete":
        return GraphSize(n * top / 2, top, networkx=False)
    if topology == "random_regular":
        return GraphSize(n * params.degree / 2, float(params.degree))
    if topology == "exponential":
        steps = int(n_peers - 1).bit_length()
        return GraphSize(n * steps, min(2.0 * steps, top), networkx=False)
    if topology == "erdos_renyi":
        mean = params.p * top
        return GraphSize(mean * n / 2, min(top, mean + 4 * math.sqrt(mean) + 1))
    return _file_graph_size(str(params.file), n_peers)


def _file_graph_size(path: str, n_peers: int) -> GraphSize:
    """An edge list has at most one edge per line of at least ``u v\\n`` with peer numbers
    of up to len(str(N − 1)) digits; a missing file counts as empty (building the graph
    reports it)."""
    try:
        size_bytes = os.path.getsize(path)
    except OSError:
        return GraphSize(0.0, 0.0)
    line_bytes = 2 * len(str(max(n_peers - 1, 0))) + 2
    edges = min(size_bytes / line_bytes, n_peers * (n_peers - 1) / 2)
    return GraphSize(edges, max(0.0, min(n_peers - 1.0, 2 * edges / max(n_peers, 1) * 4)))


def neighbour_footprint(
    base: Footprint, graph: GraphSize, n_peers: int, dim: int, itemsize: int, wire: Wire
) -> Footprint:
    """Synchronous neighbourhood mixing (``gossip``, ``sgp``): a small state is gathered
    at once, (N, K, dim) twice over (the gather and its weighted deviations) for the K
    neighbour slots; every edge carries one message each way per round."""
    gathered = n_peers * graph.max_degree * dim <= GATHER_ELEMENTS
    arrays = base.state_arrays
    if gathered and graph.max_degree > 1:
        arrays = max(arrays, base.state_arrays - 2 + 2 * graph.max_degree)
    flows = 2 * graph.edges
    return replace(
        base,
        state_arrays=arrays,
        flows_per_round=flows,
        flows_in_flight=flows,
        round_bytes_per_peer=flows / max(n_peers, 1) * wire.message_bytes(dim, itemsize),
    )


def wave_share(n_peers: int) -> float:
    """Share of the rows one wave of disjoint exchanges touches at most, as the kernels'
    temporaries see it: all of them for two peers, about half beyond (rate·N/2 Poisson
    exchanges put ≈ 0.43·N rows in the first, largest wave)."""
    return min(1.0, 0.5 + 1.0 / max(n_peers, 1))


def exchange_footprint(
    base: Footprint,
    n_peers: int,
    rate: float,
    in_flight: float,
    clock: str,
    snapshot_rows: float,
    replay_arrays: float,
) -> Footprint:
    """Continuous-time exchanges (edge clocks, push-sum): ``rate`` flows per peer per
    second (an exchange of two flows involves two peers; a push one flow, one sender),
    at most ``in_flight`` at once, each holding ``snapshot_rows`` rows of the state on
    the network clock (what was sent, taken at its start). On the rounds clock the
    exact-target tracker keeps a round's row changes for its replay
    (:mod:`sim.engine.observe.replay`): ``replay_arrays`` float64 (N, dim) arrays per unit of
    ``rate`` (measured), for a round with three standard deviations more rings."""
    extra = in_flight / max(n_peers, 1) * snapshot_rows if clock == "network" else 0.0
    replay = 0.0
    if clock == "rounds" and n_peers:
        rings = rate * n_peers
        replay = replay_arrays * (rings + 3 * math.sqrt(rings)) / n_peers
    return replace(
        base,
        state_arrays=base.state_arrays + extra,
        float64_arrays=base.float64_arrays + replay,
        flows_per_s=rate * n_peers,
        flows_in_flight=in_flight,
    )


def butterfly_footprint(
    n_peers: int,
    group_size: int,
    dim: int,
    itemsize: int,
    wire: Wire,
    group_temporaries: bool,
    pieces_per_part: float = 1.0,
) -> Footprint:
    """Group means in place (``random_groups``, ``moshpit``); with ``group_temporaries``
    (a compressing wire, or lost members on the network clock) a group's butterfly
    holds its rows before and after (state dtype, and float64 for the sum's shift) and
    the pieces in transit: at most a group's share of the state, four times over in the
    state's dtype and three in float64.

    In flight at once: one request and one reply per (sender, reducer) pair, each a
    stream of pieces one after the other, so 2·N·(g−1) flows. (Before replies were
    streams, a reducer whose uplink was slower than its senders' piled up every reply
    piece of a part as a flow of its own.)"""
    share = group_fraction(n_peers, group_size) if group_temporaries else 0.0
    g = max(1, min(group_size, n_peers))
    flows = butterfly_flows(n_peers, g, pieces_per_part)
    return Footprint(
        state_arrays=1.0 + 4 * share,
        float64_arrays=3 * share,
        flows_per_round=flows,
        flows_in_flight=min(flows, 2.0 * n_peers * (g - 1)),
        round_bytes_per_peer=2 * (g - 1) / g * wire.message_bytes(dim, itemsize),
    )


def butterfly_flows(n_peers: int, group_size: int, pieces_per_part: float = 1.0) -> float:
    """Flows of one round of butterfly all-reduces over groups of ``group_size``: per
    group of g, every member sends every other member's part (g·(g−1) requests of each
    piece) and gets it back reduced (as many replies), i.e. 2·N·(g−1) per piece of a
    part."""
    g = max(1, min(group_size, n_peers))
    return 2.0 * n_peers * (g - 1) * pieces_per_part


def group_fraction(n_peers: int, group_size: int) -> float:
    """Share of the state one group holds: temporaries made group by group (a butterfly
    through a compressing wire, a group that lost members) never exceed it."""
    return min(1.0, group_size / max(1, n_peers))
