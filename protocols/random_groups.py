"""random_groups: fresh random groups of ``group_size`` every round, each averages.

Algorithm (rounds clock): the present peers are shuffled (seeded) and cut into
r = ⌊n_present/M⌋ groups of M consecutive peers; the n_present − r·M leftovers join
groups round-robin (leftover k joins group k mod r). Every group replaces its members'
vectors by the group mean. When fewer than M peers are present (r = 0) they form one
group together. Absent peers keep their vectors. With N present peers and M dividing N
the expected one-round variance factor is (r−1)/(N−1).

``schedule: async`` (network clock): every peer loops over its local work and a step; a
step's group forms by hivemind's matchmaking under one key (0 group bits): up to
``group_size`` peers, at least ``min_group_size``, ``matchmaking_time``,
``matchmaking_latency``, ``averaging_timeout``. Each group runs moshpit's butterfly
planner with equal shares (:func:`protocols._moshpit_net.group_butterfly`, pieces of
512 KiB as in barrier rounds) and averages without the members lost meanwhile. Barrier
rounds ignore these four parameters.

Messages: each group runs a butterfly all-reduce: a group of g moves 2·(g−1)·S bytes in
2·g·(g−1) messages (S = vector bytes). ``compression`` (fp16, uniform8, quantile8)
quantizes every part sent and every reduced part sent back (equal shares, one message
per part): the bytes shrink, the receivers use dequantized values, the reducer its own
exact ones (as moshpit's butterfly, ``sim.kernels.butterfly``).

Network clock: moshpit's butterfly (:func:`protocols._moshpit_net.plan_groups`), so that
the two differ only by how groups form. Parts in whole coordinates (equal split), each
streamed in pieces of 512 KiB of the uncompressed vector (hivemind's
``part_size_bytes``), one gate per piece: a reducer replies to a piece once every request
of that piece ended. No matchmaking: the groups are drawn when the round starts, and a
group starts its butterfly when its last member arrives (the largest straggler delay of
its members), as a full moshpit group assembles. No timeouts; members lost during the
round are left out (the others average among themselves: moshpit's ``idealized``).

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| global sum Σ_i x_i | preserved (round-off) | all; ``compression: none`` |
| var | never increases (a projection per group) | all; ``compression: none`` |
| absent peers' vectors | unchanged, bit for bit | any absence |
| equal vectors | unchanged, bit for bit | all; ``compression: none`` |
| E[var after] / var before | (r−1)/(N−1), everyone present, M divides N | none |
| global sum with compression | moves by the wire's error (``mean_drift``) | all |
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from protocols import _moshpit_net as net
from protocols._async_groups import LATENCY_TEXT, TIMEOUT_TEXT, Overhead, overhead_field
from protocols._butterfly import (
    PART_BYTES,
    ButterflySetup,
    ShareCache,
    compressed_round,
    equal_pieces_per_part,
    without,
)
from protocols._common import (
    Compression,
    Seconds,
    as_mask,
    butterfly_traffic,
    shift_drift,
    wire_of,
)
from protocols._moshpit_net import Matched, plan_groups
from protocols.base import GroupProtocol, ProtocolParams
from protocols.contract import (
    Context,
    Flows,
    GroupPlan,
    RoundPlan,
    RoundStats,
    State,
)
from protocols.footprint import Footprint, butterfly_footprint
from sim.kernels import Groups, group_mean


class RandomGroupsParams(ProtocolParams):
    """Parameters of ``random_groups``."""

    name: Literal["random_groups"] = "random_groups"
    group_size: int = Field(default=8, ge=1, description="peers per group M")
    compression: Compression = Field(default="none", description="wire compression")
    min_group_size: int = Field(
        default=2, ge=1, description="schedule async: smallest group that averages"
    )
    matchmaking_time: Seconds = Field(
        default=5.0, ge=0, description="schedule async: seconds a declaration lasts"
    )
    matchmaking_latency: Seconds | None = Field(default=None, ge=0, description=LATENCY_TEXT)
    averaging_timeout: Seconds | None = Field(default=None, ge=0, description=TIMEOUT_TEXT)
    allreduce_overhead: Overhead = overhead_field()

    @model_validator(mode="after")
    def _check_sizes(self) -> RandomGroupsParams:
        # only when given: the default 2 stays valid with group_size 1 (capped at it)
        if "min_group_size" in self.model_fields_set and self.min_group_size > self.group_size:
            raise ValueError(
                f"min_group_size must be at most group_size ({self.group_size}), "
                f"got {self.min_group_size}"
            )
        return self


def random_partition(rows: np.ndarray, group_size: int, n_peers: int) -> Groups:
    """Cut already-shuffled ``rows`` into groups of ``group_size``, leftovers round-robin.

    Group k gets rows[k·M : (k+1)·M] plus rows[r·M + l] for every leftover l ≡ k mod r;
    groups with an extra leftover come first (sizes non-increasing). Fewer than M rows
    make one group.
    """
    n, size = rows.size, group_size
    n_groups = max(1, n // size) if n else 0
    if n_groups == 0:
        return Groups.empty(n_peers)
    if n_groups == 1:
        return Groups.single(rows, n_peers)
    extra = -(-(n - n_groups * size) // n_groups)  # ceil(leftovers / r)
    table = np.full((n_groups, size + extra), -1, dtype=np.intp)
    table[:, :size] = rows[: n_groups * size].reshape(n_groups, size)
    leftovers = np.arange(n - n_groups * size)
    table[leftovers % n_groups, size + leftovers // n_groups] = rows[n_groups * size :]
    counts = np.count_nonzero(table >= 0, axis=1)
    starts = np.cumsum(counts) - counts
    return Groups(n_peers, table[table >= 0], starts, counts)


class RandomGroups(GroupProtocol):
    """Each round, random disjoint groups of ``group_size`` present peers average; under
    ``schedule: async`` groups of up to ``group_size`` form by matchmaking."""

    Params = RandomGroupsParams
    description = "each round the present peers are shuffled into groups that average"
    invariants = frozenset({"sum", "hull", "drift_reported", "absent_unchanged"})

    @classmethod
    def footprint(cls, params: Any, n_peers: int, dim: int, itemsize: int, clock: str) -> Footprint:
        """Group means in place; a compressing wire adds one group's butterfly at a
        time; flows (network clock): every piece of every part, both ways."""
        wire = wire_of(params)
        g = max(1, min(params.group_size, n_peers))
        pieces = equal_pieces_per_part(dim, g, max(1, PART_BYTES // itemsize))
        return butterfly_footprint(
            n_peers, params.group_size, dim, itemsize, wire, not wire.exact, pieces
        )

    def __init__(self, params: RandomGroupsParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        n, wire = ctx.n_peers, self.wire
        self._shares = ShareCache(np.ones(n), np.ones(n, bool), ctx.dim, balance=False)
        # the arithmetic through a lossy wire: one message per part (both clocks)
        coords = ctx.wire_coords
        self._setup = ButterflySetup(
            ctx.dim, ctx.itemsize, ctx.vector_bytes, wire, wire_coords=coords
        )
        # the flows (network clock): moshpit's pieces, equal shares, no timeouts
        self._flow_setup = ButterflySetup(
            ctx.dim, ctx.itemsize, PART_BYTES, wire, wire_coords=coords
        )
        peers = ctx.peers
        self._delay_s = np.zeros(n) if peers is None else peers["delay_s"].to_numpy(float)

    def groups(self, present: np.ndarray) -> Groups:
        """This round's groups: the present peers shuffled and cut (draws from the rng)."""
        rows = np.flatnonzero(as_mask(present, self.ctx.n_peers))
        rows = rows[self.ctx.rng.permutation(rows.size)]
        return random_partition(rows, self.params.group_size, self.ctx.n_peers)

    def plan(self, present: np.ndarray, t: int) -> RoundPlan:
        """Shuffle the present peers and cut them into groups; each group runs
        moshpit's butterfly all-reduce (its flows), then averages. Members lost mid-round
        are left out (the others average among themselves, as ``idealized`` faults)."""
        groups = self.groups(present)

        def flows() -> Flows:
            return self.flows(groups)

        def finish(state: State, lost: np.ndarray) -> RoundStats:
            return self.average(state, without(groups, lost) if lost.any() else groups)

        return RoundPlan(finish, flows)

    def flows(self, groups: Groups) -> Flows:
        """The flows of every group's butterfly (:func:`protocols._moshpit_net.plan_groups`).

        The groups are drawn at the round start (no matchmaking); a group starts when
        its last member arrives, after the largest straggler delay of its members. A
        group of one sends nothing."""
        starts, counts = groups.starts.tolist(), groups.counts.tolist()
        members = [groups.order[s : s + c] for s, c in zip(starts, counts, strict=True) if c > 1]
        start_s = np.array([self._delay_s[m].max() for m in members], dtype=float)
        _, flows = plan_groups(Matched(members, start_s, 0.0), self._shares, self._flow_setup)
        return flows

    def average(self, state: State, groups: Groups) -> RoundStats:
        """Replace every member's vector by its group's mean (through the wire)."""
        if not self.wire.exact:
            state.x, nbytes, messages, shift = compressed_round(
                state.x, groups, self._shares, self._setup
            )
            drift = shift_drift(shift, self.ctx.n_peers)
            return RoundStats(bytes_sent=nbytes, messages=messages, mean_drift=drift)
        state.x = group_mean(state.x, groups)
        nbytes, messages = butterfly_traffic(groups.counts, self.ctx.vector_bytes)
        return RoundStats(bytes_sent=nbytes, messages=messages)

    # -- schedule: async -------------------------------------------------------------------
    def group_key(self, peer: int, step: int) -> int:
        """One key for everyone (hivemind with no group bits)."""
        return 0

    def group_plan(
        self, members: np.ndarray, notify_s: np.ndarray, chunks: np.ndarray
    ) -> GroupPlan:
        """Moshpit's butterfly planner with equal shares; the group averages without the
        members lost meanwhile (they keep their vectors), as a barrier round does.
        ``chunks`` is unused: there are no keys."""
        _, flows = net.group_butterfly(members, notify_s, self._shares, self._flow_setup)
        groups = Groups.single(members, self.ctx.n_peers)

        def settle(state: State, lost: np.ndarray) -> np.ndarray:
            self.average(state, without(groups, lost) if lost[members].any() else groups)
            return ~lost[members]

        return GroupPlan(members, settle, lambda: flows)
