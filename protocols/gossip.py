"""gossip: synchronous neighbourhood averaging on a fixed graph.

Algorithm (rounds clock): a topology (:mod:`protocols.graphs`) is built once. Each
round every present peer replaces x_i by a weighted mean of itself and its present
neighbours, all using the previous round's values (synchronous, y = W x). Absent peers
keep their vectors and are skipped by their neighbours.

- ``weights: uniform`` — equal weight 1/(1 + #present neighbours) on itself and each
  present neighbour (the paper's baseline). Row-stochastic only: on irregular graphs,
  or around absent peers, the global mean drifts; the drift is reported.
- ``weights: metropolis`` — Metropolis–Hastings on the present subgraph:
  w_ij = 1/(1 + max(d_i, d_j)) with d the present-subgraph degrees, self weight
  1 − Σ_j w_ij. Symmetric and doubly stochastic, hence mean-preserving; with a fixed W
  the error shrinks at least by ρ = max(|λ₂|, |λ_N|) per round.

``schedule: async`` (network clock; asynchronous SGP, :mod:`sim.engine.mailbox`): at
its own step a peer sends Q(x_i) to each of its neighbours, then mixes with the newest
value v_j received from each neighbour since its last step:
x_i ← x_i + Σ_j w_ij (v_j − x_i), with the full graph's weights (a peer does not know
who is present; Σ_j w_ij < 1, so the range never widens). The mean may drift.

Messages: every present peer sends its vector to each present neighbour (one message of
S bytes per directed present edge).

``compression`` (:mod:`sim.kernels.compression`): every present peer's vector is
quantized once, so all its neighbours decode the same row Q(x_j); a receiver mixes with
its own exact x_i: x_i ← x_i + Σ_k w_ik (Q(x_{n_ik}) − x_i). Each message costs
``wire_bytes(compression, dim, itemsize)`` instead of S.

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| global sum Σ_i x_i | preserved (round-off) with ``metropolis`` | all |
| global mean | may drift with ``uniform``; ``mean_drift`` reports it exactly | all |
| var | never increases with ``metropolis`` (doubly stochastic) | all |
| max − min per coordinate | never widens (row-stochastic) | all, both weights |
| absent peers' vectors; equal vectors | unchanged, bit for bit | all |
| global mean with compression | approximate: the wire's error shows in ``mean_drift`` | all |

The rows above hold with ``compression: none``; with compression only the absent
peers' vectors are guaranteed bit for bit (var and the range are not monotone either).
Under ``schedule: async`` the sum moves with ``metropolis`` too (each peer mixes stale
values one row at a time); the range and the absent peers' vectors hold as above.

References: Xiao & Boyd, "Fast linear iterations for distributed averaging", Systems &
Control Letters 53, 2004; Boyd et al., "Randomized gossip algorithms", 2006.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Literal

import numpy as np
from pydantic import Field

from protocols._common import Compression, as_mask, mean_drift, wire_of
from protocols._mailbox import mix_row, snapshot
from protocols.base import MailboxProtocol
from protocols.contract import Context, Flows, RoundPlan, RoundStats, State
from protocols.footprint import Footprint, graph_size, neighbour_footprint
from protocols.graphs import TopologyGraph, TopologyParams, neighbour_table, topology_edges
from sim.kernels import neighbour_mean
from sim.kernels._xp import column, namespace
from sim.kernels.compression import Wire


class GossipParams(TopologyParams):
    """Parameters of ``gossip``: a topology and the mixing weights."""

    name: Literal["gossip"] = "gossip"
    weights: Literal["uniform", "metropolis"] = "uniform"
    compression: Compression = Field(default="none", description="wire compression")


def gossip_weights(
    neighbours: np.ndarray, valid: np.ndarray, mask: np.ndarray, rule: str
) -> np.ndarray:
    """(N, K) weights of each present peer on each present neighbour (0 elsewhere)."""
    live = valid & mask[neighbours] & mask[:, None]
    degree = live.sum(axis=1)
    if rule == "uniform":
        return live / (1.0 + degree)[:, None]
    return live / (1.0 + np.maximum(degree[:, None], degree[neighbours]))


def column_excess(neighbours: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Column sums of W minus 1 for W_ii = 1 − Σ_k w_ik, W_{i, n_ik} += w_ik."""
    inflow = np.bincount(neighbours.reshape(-1), weights.reshape(-1), neighbours.shape[0])
    return inflow - weights.sum(axis=1)


def compressed_neighbour_mean(
    x: Any, neighbours: np.ndarray, weights: np.ndarray, wire: Wire
) -> tuple[Any, float]:
    """:func:`neighbour_mean` through a compressing wire, and the shift of the mean.

    Every row is quantized once (one message per sender, the same row for all its
    receivers); row i mixes its own exact x_i with its neighbours' decoded rows:
    y_i = x_i + Σ_k w_ik (Q(x_{n_ik}) − x_i). With xq = Q(x) this is
    x_i + (neighbour_mean(xq)_i − xq_i) + s_i (xq_i − x_i), s_i = Σ_k w_ik, so a row
    with zero weights (an absent peer) is unchanged bit for bit. A slot naming the row
    itself (no message) keeps the exact value, i.e. drops out. ``x`` is not modified.
    The shift is ‖Σ_i (y_i − x_i)‖ / N / sqrt(dim).
    """
    xp = namespace(x)
    weights = np.where(neighbours == np.arange(neighbours.shape[0])[:, None], 0.0, weights)
    xq = wire.receive(x)
    moved = neighbour_mean(xp.asarray(xq, copy=True), neighbours, weights) - xq
    y = x + moved + column(xp, x, weights.sum(axis=1)) * (xq - x)
    return y, wire_drift(x, y)


def wire_drift(x: Any, y: Any) -> float:
    """‖Σ_i (y_i − x_i)‖ / N / sqrt(dim): how far a step x → y moved the global mean."""
    xp = namespace(x)
    shift = xp.sum(y - x, axis=0)
    return float(xp.sqrt(xp.sum(shift * shift))) / x.shape[0] / math.sqrt(x.shape[1])


class Gossip(TopologyGraph, MailboxProtocol):
    """Synchronous gossip: each present peer averages with its present neighbours."""

    Params = GossipParams
    description = "synchronous neighbourhood averaging on a graph (uniform or Metropolis)"
    invariants = frozenset({"sum", "hull", "drift_reported", "absent_unchanged"})
    #: x, the accumulated neighbour sum, a neighbour's rows and their deviations; the
    #: wire adds the quantized copy, its working copy and the decoded step.
    state_arrays = 4.0
    compressed_arrays = 3.0

    @classmethod
    def footprint(cls, params: Any, n_peers: int, dim: int, itemsize: int, clock: str) -> Footprint:
        """Neighbourhood mixing over the graph, which is kept with its neighbour table."""
        graph = graph_size(params, n_peers)
        base = super().footprint(params, n_peers, dim, itemsize, clock)
        base = neighbour_footprint(base, graph, n_peers, dim, itemsize, wire_of(params))
        return replace(base, table_bytes=graph.table_bytes(n_peers))

    def __init__(self, params: GossipParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        self.edges = topology_edges(params, ctx.n_peers, ctx.rng)
        self.neighbours, self.valid = neighbour_table(self.edges, ctx.n_peers)
        everyone = np.ones(ctx.n_peers, dtype=bool)
        self._full = self._weights(everyone)
        self._message_bytes = self.wire.message_bytes(ctx.wire_coords, ctx.itemsize)

    def invariants_in_force(
        self, clock: str = "rounds", rejoin: str = "keep", schedule: str = "barrier"
    ) -> frozenset[str]:
        """``uniform`` weights are row-stochastic only: the sum may move (it is reported).
        Under ``schedule: async`` neither rule keeps the sum: each peer mixes, at its own
        step, the values that have reached it (stale ones included) with the full graph's
        weights, one row at a time, so no doubly stochastic W acts on the state and the
        mean drifts (``mean_drift`` measures it). The hull still holds (x_i moves to a
        convex combination of itself and values once held, Σ_j w_ij < 1), and absent
        peers are unchanged (a preemption settles the peer's messages as it goes down,
        :mod:`sim.engine.mailbox`)."""
        kept = super().invariants_in_force(clock, rejoin, schedule)
        if self.params.weights == "uniform" or schedule == "async":
            return kept - {"sum"}
        return kept

    def _weights(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        weights = gossip_weights(self.neighbours, self.valid, mask, self.params.weights)
        excess = np.zeros(0)
        if self.params.weights == "uniform":
            excess = column_excess(self.neighbours, weights)
        return weights, excess, int(np.count_nonzero(weights))

    def plan(self, present: np.ndarray, t: int) -> RoundPlan:
        """Every present peer sends its vector (through the wire) to each of its
        neighbours; then the peers not lost mix over the subgraph of those peers."""
        mask = as_mask(present, self.ctx.n_peers)

        def flows() -> Flows:
            sends = self.valid & mask[:, None]
            src = np.broadcast_to(np.arange(self.ctx.n_peers)[:, None], sends.shape)[sends]
            nbytes = np.full(src.size, float(self._message_bytes))
            return Flows(src, self.neighbours[sends], nbytes)

        def finish(state: State, lost: np.ndarray) -> RoundStats:
            return self._mix(state, mask & ~lost)

        return RoundPlan(finish, flows)

    def _mix(self, state: State, mask: np.ndarray) -> RoundStats:
        """One synchronous mixing step over the subgraph of the peers in ``mask``."""
        weights, excess, messages = self._full if mask.all() else self._weights(mask)
        if self.wire.exact:
            drift = mean_drift(state.x, excess)
            state.x = neighbour_mean(state.x, self.neighbours, weights)
        else:
            state.x, drift = compressed_neighbour_mean(state.x, self.neighbours, weights, self.wire)
        return RoundStats(
            bytes_sent=float(messages * self._message_bytes),
            messages=messages,
            mean_drift=drift,
        )

    # -- schedule: async (asynchronous SGP) ------------------------------------------------
    def out_neighbours(self, peer: int, step: int) -> np.ndarray:
        """The graph's neighbours of ``peer`` (every step)."""
        return self.neighbours[peer][self.valid[peer]]

    def mailbox_bytes(self) -> float:
        """One vector through the wire."""
        return float(self._message_bytes)

    def post(self, state: State, peer: int, sent: int) -> Any:
        """Q(x_peer); the sender keeps its rows."""
        return snapshot(state, peer, self.wire)

    def arrive(self, state: State, peer: int, payload: Any) -> bool:
        """Values wait in the mailbox."""
        return False

    def returned(self, state: State, peer: int, payload: Any) -> None:
        """Nothing was taken off the sender."""

    def mix(self, state: State, peer: int, mailbox: dict[int, Any]) -> None:
        """x_i ← x_i + Σ_j w_ij (v_j − x_i) over the senders in ``mailbox`` (full-graph
        weights)."""
        weights = self._full[0][peer]
        slots = self.neighbours[peer].tolist()
        terms = [
            (float(weights[k]), mailbox[j])
            for k, j in enumerate(slots)
            if self.valid[peer, k] and j in mailbox
        ]
        mix_row(state, peer, terms)
