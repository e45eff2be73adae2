"""random_pairs: each round the present peers pair up at random, and each pair averages.

Algorithm: the peers present when a round starts are shuffled (seeded) and paired in
order, (p_0, p_1), (p_2, p_3), ...: a uniformly random perfect matching; with an odd
count the last peer sits the round out. Both ends of a pair replace their vectors by
the pair's mean, as x_i ← x_i − (x_i − x_j)/2 and x_j ← x_j + (x_i − x_j)/2 (the
pairwise exchange of ``sim.kernels.pairwise``). Absent peers keep their vectors. On the
network clock a pair averages only if neither end was lost during the round.

Expected variance: a pair is matched with probability p = 1/(N−1) for an even number
N of present peers, 1/N for an odd one, and E[var after] = (1 − N·p/2)·var before:
(N−2)/(2(N−1)) for N even, exactly 1/2 for N odd (everyone present).

Messages: each pair swaps its vectors: 2 messages of S bytes (S = dim × itemsize, or
the wire's bytes for one vector with ``compression``). With compression each end uses
its own exact value and the other's decoded one, so the global sum moves by the wire's
error, reported as ``mean_drift``.

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| global sum Σ_i x_i | preserved (round-off) | all; ``compression: none`` |
| every x_i | stays in the per-coordinate [min, max] of the inputs | all; ``compression: none`` |
| absent and lost peers' vectors, and their partners' | unchanged, bit for bit | all |
| E[var after] / var before | (N−2)/(2(N−1)) for N even, 1/2 for N odd | none |
| global sum with compression | moves by the wire's error (``mean_drift``) | all |
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

import numpy as np
from pydantic import Field

from protocols._common import Compression, as_mask, shift_drift, wire_of
from protocols.base import BarrierProtocol, ProtocolParams
from protocols.contract import Context, Flows, RoundPlan, RoundStats, State
from protocols.footprint import Footprint
from sim.core.backend import to_numpy
from sim.kernels._xp import namespace
from sim.kernels.pairwise import exchange_differences, move_pairs


class RandomPairsParams(ProtocolParams):
    """Parameters of ``random_pairs``."""

    name: Literal["random_pairs"] = "random_pairs"
    compression: Compression = Field(default="none", description="wire compression")


class RandomPairs(BarrierProtocol):
    """Each round, a random perfect matching of the present peers; each pair averages."""

    Params = RandomPairsParams
    description = "each round the present peers pair up at random and each pair averages"
    invariants = frozenset({"sum", "hull", "drift_reported", "absent_unchanged"})
    counter_names = ("pairs_averaged", "pairs_broken")
    #: Memory, in (N, dim) arrays: x, both ends' rows, their difference and its half;
    #: a lossy wire adds the rows sent, as decoded, and the codec's working copies.
    state_arrays = 2.5
    compressed_arrays = 5.0

    @classmethod
    def footprint(cls, params: Any, n_peers: int, dim: int, itemsize: int, clock: str) -> Footprint:
        """Two flows of one vector per pair and round."""
        base = super().footprint(params, n_peers, dim, itemsize, clock)
        flows = 2 * (n_peers // 2)
        nbytes = wire_of(params).message_bytes(dim, itemsize)
        return replace(
            base, flows_per_round=flows, flows_in_flight=flows, round_bytes_per_peer=nbytes
        )

    def __init__(self, params: RandomPairsParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        self.message_bytes = self.wire.message_bytes(ctx.wire_coords, ctx.itemsize)

    def plan(self, present: np.ndarray, t: int) -> RoundPlan:
        """Draw this round's pairs; each end sends its vector to the other; then the
        pairs with no end lost average."""
        rows = self.ctx.rng.permutation(np.flatnonzero(as_mask(present, self.ctx.n_peers)))
        half = rows.size // 2
        i, j = rows[0 : 2 * half : 2], rows[1 : 2 * half : 2]

        def flows() -> Flows:
            nbytes = np.full(2 * half, float(self.message_bytes))
            return Flows(np.concatenate((i, j)), np.concatenate((j, i)), nbytes)

        def finish(state: State, lost: np.ndarray) -> RoundStats:
            whole = ~(lost[i] | lost[j])  # neither end lost: the pair averages
            averaged = int(np.count_nonzero(whole))
            self.counters["pairs_averaged"] += averaged
            self.counters["pairs_broken"] += half - averaged
            drift = self.average(state, i[whole], j[whole])
            nbytes = 2.0 * half * self.message_bytes
            return RoundStats(bytes_sent=nbytes, messages=2 * half, mean_drift=drift)

        return RoundPlan(finish, flows)

    def average(self, state: State, i: np.ndarray, j: np.ndarray) -> float:
        """Average the pairs (i_p, j_p) through the wire; return how far the global mean
        moved (0 on an exact wire, where every pair keeps its sum)."""
        d_i, d_j = exchange_differences(state.x, i, j, self.wire)
        state.x = move_pairs(state.x, i, j, d_i, d_j, 0.5)
        if self.wire.exact:
            return 0.0
        shift = to_numpy(namespace(d_i).sum(d_j - d_i, axis=0)) / 2
        return shift_drift(shift, self.ctx.n_peers)
