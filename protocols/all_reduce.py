"""all_reduce: a global all-reduce that succeeds only when every peer is present.

Algorithm (rounds clock): if every peer is present this round, every peer gets the
exact global mean; otherwise nothing changes and the all-reduce is retried next round
("all-reduce with restarts"). Under ``bernoulli`` churn with probability p a round
succeeds with probability (1−p)^N.

Messages: a successful round is counted as one ring all-reduce over the N peers:
reduce-scatter then all-gather, each of N−1 steps in which every peer sends one chunk of
S/N bytes to its successor — 2(N−1)·S bytes and 2N(N−1) messages in all (S = vector
bytes). A failed round is cancelled at its start (absences are known) and costs nothing.

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| global sum Σ_i x_i | preserved (round-off) | all |
| every peer after a successful round | exact global mean (all rows equal) | none absent |
| state after a round with an absent peer | unchanged, bit for bit | any absence |
| var | never increases | all |
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from protocols._common import as_mask, ring_traffic
from protocols.base import Protocol, ProtocolParams
from protocols.contract import Context, RoundStats, State
from sim.kernels import Groups, group_mean


class AllReduceParams(ProtocolParams):
    """Parameters of ``all_reduce`` (none besides the name)."""

    name: Literal["all_reduce"] = "all_reduce"


class AllReduce(Protocol):
    """Global all-reduce with restarts: everyone averages, or nobody does."""

    Params = AllReduceParams
    description = "global all-reduce; succeeds only in rounds where every peer is present"
    invariants = frozenset({"sum", "hull", "drift_reported", "absent_unchanged"})

    def __init__(self, params: AllReduceParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        self._everyone = Groups.single(np.arange(ctx.n_peers), ctx.n_peers)

    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """Average over all peers if all are present; else leave the state untouched."""
        if not as_mask(present, self.ctx.n_peers).all():
            return RoundStats()
        state.x = group_mean(state.x, self._everyone)
        nbytes, messages = ring_traffic(self.ctx.n_peers, self.ctx.vector_bytes)
        return RoundStats(bytes_sent=nbytes, messages=messages)
