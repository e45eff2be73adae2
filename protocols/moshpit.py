"""moshpit: Moshpit All-Reduce — small groups on a virtual M^d grid, re-formed each round.

Algorithm (rounds clock). ``rekey: true``: every peer carries a key of d−1 coordinates
in [0, M). Present peers with equal keys form a group and average (butterfly
all-reduce). Each member then drops its key's oldest coordinate and appends its chunk
index mod M — its position in the group's seeded, shuffled member order — so members
of one group never meet again the next round, and on a full grid (N = M^d) without
failures every peer holds the exact global mean after exactly d rounds. Initial keys:
on a full grid, peer i's key is the d−1 high base-M digits of i (the first groups are
blocks of M consecutive peers); otherwise keys are spread evenly over the M^(d−1) keys
(group sizes differ by at most one; a grid much larger than N gives small groups).
Absent peers keep their keys and vectors. With d = 1 there is one key: all present
peers form one group.

``rekey: false`` (the fixed grid of the paper's averaging experiment): every peer sits
at a fixed random cell of the M^d grid, distinct while N ≤ M^d; with N > M^d the peers
are spread over the cells as evenly as possible (each cell ⌊N/M^d⌋ or ⌈N/M^d⌉ peers, a
cell's peers share every line). Round t: present peers average over the present peers
of their line along axis t mod d.

Fault models on the rounds clock, where absences are known when the round starts:
``idealized`` and ``partial``: absent members simply skip (the others average among
themselves); ``abort``: a group (or line) with any absent member does not average this
round — its members keep their vectors and keys. A group with fewer than
``min_group_size`` present members also does not form (members keep vectors and keys).
``load_balance``, ``matchmaking_time`` and ``part_bytes`` are used on the network clock
only.

Messages: every group that forms runs a butterfly all-reduce: a group of g moves
2·(g−1)·S bytes in 2·g·(g−1) messages (S = vector bytes).

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| global sum Σ_i x_i | preserved (round-off) | all (rounds clock) |
| var | never increases | all |
| full grid, everyone present | exact global mean after d rounds, not before | none |
| absent peers' vectors and keys | unchanged | any absence |
| members of a group (rekey) | have distinct keys the next round (N ≤ M^d) | all |
| keys | stay in [0, M^(d−1)) | all |

Reference: Ryabinin, Gorbunov, Plokhotnyuk, Pekhimenko, "Moshpit SGD:
Communication-Efficient Decentralized Training on Heterogeneous Unreliable Devices",
NeurIPS 2021.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from protocols import _grid
from protocols._common import Bytes, Seconds, as_mask, butterfly_traffic
from protocols.base import Context, Protocol, ProtocolParams, RoundStats, State
from sim.kernels import Groups, group_mean

_MAX_CELLS = 2**62


class MoshpitParams(ProtocolParams):
    """Parameters of ``moshpit``."""

    name: Literal["moshpit"] = "moshpit"
    group_size: int = Field(default=8, ge=1, description="target group size M")
    grid_dims: int = Field(default=2, ge=1, description="grid dimensions d")
    rekey: bool = Field(default=True, description="re-key by chunk index (false: fixed grid)")
    fault_model: Literal["idealized", "partial", "abort"] = "idealized"
    load_balance: bool = Field(default=True, description="LP part shares (network clock)")
    matchmaking_time: Seconds = Field(default=5.0, ge=0, description="seconds (network clock)")
    min_group_size: int = Field(default=2, ge=1, description="smallest group that averages")
    part_bytes: Bytes = Field(default=512 * 1024, description="pipelining part (network clock)")

    @model_validator(mode="after")
    def _check_grid(self) -> MoshpitParams:
        if self.group_size**self.grid_dims > _MAX_CELLS:
            raise ValueError(
                f"group_size**grid_dims must be at most 2**62, "
                f"got {self.group_size}**{self.grid_dims}"
            )
        if self.min_group_size > self.group_size:
            raise ValueError(
                f"min_group_size must be at most group_size ({self.group_size}), "
                f"got {self.min_group_size}"
            )
        return self


class Moshpit(Protocol):
    """Moshpit All-Reduce on the rounds clock (re-keyed or fixed grid)."""

    Params = MoshpitParams
    description = "Moshpit All-Reduce: groups on a virtual M^d grid, re-keyed every round"

    def __init__(self, params: MoshpitParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        size, dims = params.group_size, params.grid_dims
        if params.rekey:
            self.keys = _grid.initial_keys(ctx.n_peers, size, dims, ctx.rng)
        else:
            self.cells = _grid.spread(ctx.n_peers, size**dims, ctx.rng)
            self.lines = [_grid.line_labels(self.cells, size, dims, a) for a in range(dims)]
            self._full_lines = [self._filtered(Groups.from_labels(lab)) for lab in self.lines]

    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """Form this round's groups from the present peers and average each."""
        mask = as_mask(present, self.ctx.n_peers)
        if self.params.rekey:
            groups = self._keyed_groups(mask)
        elif mask.all():
            groups = self._full_lines[t % self.params.grid_dims]
        else:
            groups = self._line_groups(mask, self.lines[t % self.params.grid_dims])
        state.x = group_mean(state.x, groups)
        nbytes, messages = butterfly_traffic(groups.counts, self.ctx.vector_bytes)
        return RoundStats(bytes_sent=nbytes, messages=messages)

    def _keyed_groups(self, mask: np.ndarray) -> Groups:
        size, dims = self.params.group_size, self.params.grid_dims
        visit = self.ctx.rng.permutation(self.ctx.n_peers) if dims > 1 else None
        groups = Groups.from_labels(np.where(mask, self.keys, -1), visit)
        groups = self._filtered(groups, self._aborted(mask, self.keys, groups))
        members = groups.members
        self.keys[members] = _grid.rekey(self.keys[members], groups.positions, size, dims)
        return groups

    def _line_groups(self, mask: np.ndarray, lines: np.ndarray) -> Groups:
        groups = Groups.from_labels(np.where(mask, lines, -1))
        return self._filtered(groups, self._aborted(mask, lines, groups))

    def _aborted(self, mask: np.ndarray, labels: np.ndarray, groups: Groups) -> np.ndarray:
        """(G,) true for the groups that lose their round under ``abort``."""
        if self.params.fault_model != "abort" or mask.all():
            return np.zeros(groups.n_groups, dtype=bool)
        assert groups.labels is not None
        return np.isin(groups.labels, labels[~mask])

    def _filtered(self, groups: Groups, aborted: np.ndarray | None = None) -> Groups:
        keep = groups.counts >= self.params.min_group_size
        if aborted is not None:
            keep &= ~aborted
        return groups if keep.all() else groups.subset(keep)
