"""gossip: synchronous neighbourhood averaging on a fixed graph.

Algorithm (rounds clock): a topology (:mod:`protocols.topology`) is built once. Each
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

Messages: every present peer sends its vector to each present neighbour (one message of
S bytes per directed present edge).

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| global sum Σ_i x_i | preserved (round-off) with ``metropolis`` | all |
| global mean | may drift with ``uniform``; ``mean_drift`` reports it exactly | all |
| var | never increases with ``metropolis`` (doubly stochastic) | all |
| max − min per coordinate | never widens (row-stochastic) | all, both weights |
| absent peers' vectors; equal vectors | unchanged, bit for bit | all |

References: Xiao & Boyd, "Fast linear iterations for distributed averaging", Systems &
Control Letters 53, 2004; Boyd et al., "Randomized gossip algorithms", 2006.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from protocols._common import as_mask, mean_drift
from protocols.base import Context, Protocol, RoundStats, State
from protocols.topology import TopologyParams, build_graph, neighbour_table
from sim.kernels import neighbour_mean


class GossipParams(TopologyParams):
    """Parameters of ``gossip``: a topology and the mixing weights."""

    name: Literal["gossip"] = "gossip"
    weights: Literal["uniform", "metropolis"] = "uniform"


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


class Gossip(Protocol):
    """Synchronous gossip: each present peer averages with its present neighbours."""

    Params = GossipParams
    description = "synchronous neighbourhood averaging on a graph (uniform or Metropolis)"
    network_clock = True

    def __init__(self, params: GossipParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        self.graph = build_graph(params, ctx.n_peers, ctx.rng)
        self.neighbours, self.valid = neighbour_table(self.graph, ctx.n_peers)
        everyone = np.ones(ctx.n_peers, dtype=bool)
        self._full = self._plan(everyone)

    def _plan(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        weights = gossip_weights(self.neighbours, self.valid, mask, self.params.weights)
        excess = np.zeros(0)
        if self.params.weights == "uniform":
            excess = column_excess(self.neighbours, weights)
        return weights, excess, int(np.count_nonzero(weights))

    def round_messages(self, present: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Every present peer sends its vector to each of its neighbours."""
        sends = self.valid & as_mask(present, self.ctx.n_peers)[:, None]
        src = np.broadcast_to(np.arange(self.ctx.n_peers)[:, None], sends.shape)[sends]
        return src, self.neighbours[sends]

    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """One synchronous mixing step over the present subgraph."""
        mask = as_mask(present, self.ctx.n_peers)
        weights, excess, messages = self._full if mask.all() else self._plan(mask)
        drift = mean_drift(state.x, excess)
        state.x = neighbour_mean(state.x, self.neighbours, weights)
        return RoundStats(
            bytes_sent=float(messages * self.ctx.vector_bytes),
            messages=messages,
            mean_drift=drift,
        )
