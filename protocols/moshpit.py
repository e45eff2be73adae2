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
``load_balance``, ``matchmaking_time``, ``part_bytes`` and the timeouts are used on the
network clock only. ``compression`` applies on both clocks (on the rounds clock with
equal shares): senders' parts and reducers' results reach the other members dequantized.

Network clock (:mod:`protocols._moshpit_net`): matchmaking in simulated time (groups
assemble at ``group_size`` members or after ``matchmaking_time``; late stragglers miss
their group), then a butterfly all-reduce per group as flows, parts streamed in pieces
of ``part_bytes``, shares from load balancing. Members lost during the all-reduce
(preempted, or given up on after ``sender_timeout``/``reducer_timeout``) are handled by
the fault model: ``idealized`` — they keep their vectors and the others average among
themselves; ``partial`` — every piece averages the senders whose request arrived and
reaches the members whose reply arrived, the others keep their local values (the global
mean may drift: ``mean_drift``); ``abort`` — the group keeps its vectors and keys.
Client-mode peers (``peers.classes[].client``) reduce no part.

``schedule: async`` (network clock, :mod:`sim.engine.asynchronous`): every peer loops
over its local work and a step; a step declares the peer under its key
(:meth:`Moshpit.group_key`: its key, or on the fixed grid its line along axis
step mod d) and hivemind's matchmaking assembles groups one at a time
(:mod:`sim.engine.matchmaking`; ``matchmaking_latency``, ``averaging_timeout``). Each
group runs the same butterfly and fault models; its members re-key with the leader's
draws (hivemind's generalized index) instead of their positions.

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
| global sum (network clock) | preserved (round-off) | ``idealized``, ``abort``, no compression |
| each coordinate (network, ``partial``) | its piece's contributors' mean, or unchanged | all |

Reference: Ryabinin, Gorbunov, Plokhotnyuk, Pekhimenko, "Moshpit SGD:
Communication-Efficient Decentralized Training on Heterogeneous Unreliable Devices",
NeurIPS 2021.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from protocols import _grid
from protocols import _moshpit_net as net
from protocols._async_groups import LATENCY_TEXT, TIMEOUT_TEXT, Overhead, overhead_field
from protocols._butterfly import ButterflySetup, ShareCache, apply_pieces, compressed_round
from protocols._common import (
    Bytes,
    Compression,
    Seconds,
    as_mask,
    butterfly_traffic,
    shift_drift,
    wire_of,
)
from protocols.base import GroupProtocol, ProtocolParams
from protocols.contract import (
    IDLE_ROUND_S,
    Context,
    GroupPlan,
    RoundPlan,
    RoundStats,
    State,
)
from protocols.footprint import Footprint, butterfly_footprint
from sim.kernels import Groups, group_mean

_MAX_CELLS = 2**62


class MoshpitParams(ProtocolParams):
    """Parameters of ``moshpit``."""

    name: Literal["moshpit"] = "moshpit"
    group_size: int = Field(default=8, ge=1, description="target group size M")
    grid_dims: int = Field(default=2, ge=1, le=62, description="grid dimensions d")
    rekey: bool = Field(default=True, description="re-key by chunk index (false: fixed grid)")
    fault_model: Literal["idealized", "partial", "abort"] = "idealized"
    load_balance: bool = Field(default=True, description="LP part shares (network clock)")
    matchmaking_time: Seconds = Field(default=5.0, ge=0, description="seconds (network clock)")
    min_group_size: int = Field(default=2, ge=1, description="smallest group that averages")
    matchmaking_latency: Seconds | None = Field(default=None, ge=0, description=LATENCY_TEXT)
    averaging_timeout: Seconds | None = Field(default=None, ge=0, description=TIMEOUT_TEXT)
    allreduce_overhead: Overhead = overhead_field()
    part_bytes: Bytes = Field(default=512 * 1024, description="pipelining part (network clock)")
    sender_timeout: Seconds | None = Field(
        default=None, ge=0, description="seconds a reducer waits for a piece (null: forever)"
    )
    reducer_timeout: Seconds | None = Field(
        default=None, ge=0, description="seconds a member waits for a result (null: 2 × sender)"
    )
    compression: Compression = Field(default="none", description="wire compression")

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

    @property
    def reducer_timeout_s(self) -> float | None:
        """The reducer timeout in force: the given one, else 2 × ``sender_timeout``."""
        if self.reducer_timeout is not None:
            return self.reducer_timeout
        return None if self.sender_timeout is None else 2 * self.sender_timeout


def _groups_of(members: list[np.ndarray], n_peers: int) -> Groups:
    """Groups with the given members, in the given member order."""
    labels = np.full(n_peers, -1, dtype=np.int64)
    for k, rows in enumerate(members):
        labels[rows] = k
    visit = np.concatenate(members)
    rest = np.setdiff1d(np.arange(n_peers), visit, assume_unique=True)
    return Groups.from_labels(labels, np.concatenate([visit, rest]))


class Moshpit(GroupProtocol):
    """Moshpit All-Reduce (re-keyed or fixed grid): groups by key at once on the rounds
    clock (:meth:`round`), matchmaking and butterflies as flows in barrier rounds on the
    network clock (:meth:`plan`), or one group at a time under ``schedule: async``
    (:meth:`group_key`, :meth:`matchmaking`, :meth:`group_plan`)."""

    Params = MoshpitParams
    description = "Moshpit All-Reduce: groups on a virtual M^d grid, re-keyed every round"
    #: groups that averaged; groups that did not form (under ``min_group_size``, or no
    #: member able to reduce); groups cancelled by ``abort``; network clock: members
    #: lost or given up on inside a group, and flows cancelled by a timeout.
    counter_names = (
        "groups_formed", "groups_failed", "groups_aborted", "members_failed", "flows_timed_out",
    )  # fmt: skip
    invariants = frozenset({"sum", "hull", "drift_reported", "absent_unchanged"})

    @classmethod
    def footprint(cls, params: Any, n_peers: int, dim: int, itemsize: int, clock: str) -> Footprint:
        """Group means in place; a group's butterfly at a time through a compressing
        wire or, on the network clock, after a loss; flows: every piece of ``part_bytes``
        of every part, both ways."""
        g = max(1, min(params.group_size, n_peers))
        piece_coords = max(1, int(params.part_bytes) // itemsize)
        pieces = math.ceil(math.ceil(dim / g) / piece_coords)
        wire = wire_of(params)
        temporaries = not wire.exact or clock == "network"
        return butterfly_footprint(n_peers, g, dim, itemsize, wire, temporaries, float(pieces))

    def __init__(self, params: MoshpitParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        size, dims = params.group_size, params.grid_dims
        if params.rekey:
            self.keys = _grid.initial_keys(ctx.n_peers, size, dims, ctx.rng)
        else:
            self.cells = _grid.spread(ctx.n_peers, size**dims, ctx.rng)
            self.lines = [_grid.line_labels(self.cells, size, dims, a) for a in range(dims)]
            full = [Groups.from_labels(lab) for lab in self.lines]
            self._full_lines = [self._filtered(g, count=False) for g in full]
            self._full_failed = [
                g.n_groups - kept.n_groups for g, kept in zip(full, self._full_lines, strict=True)
            ]
        self._setup = ButterflySetup(
            ctx.dim,
            ctx.itemsize,
            params.part_bytes,
            self.wire,
            net.timeout_or_inf(params.sender_timeout),
            net.timeout_or_inf(params.reducer_timeout_s),
            ctx.wire_coords,
        )
        n = ctx.n_peers
        peers = ctx.peers
        if peers is None:
            bandwidth, client, self._delay_s = np.ones(n), np.zeros(n, bool), np.zeros(n)
        else:
            bandwidth = net.group_bandwidth(
                peers["upload_bytes_per_s"].to_numpy(), peers["download_bytes_per_s"].to_numpy()
            )
            client, self._delay_s = peers["client"].to_numpy(bool), peers["delay_s"].to_numpy()
        self._shares = ShareCache(bandwidth, ~client, ctx.dim, params.load_balance)
        self._equal = ShareCache(np.ones(n), np.ones(n, bool), ctx.dim, balance=False)

    def invariants_in_force(
        self, clock: str = "rounds", rejoin: str = "keep", schedule: str = "barrier"
    ) -> frozenset[str]:
        """``partial`` faults on the network clock average each piece over whoever it
        reached: the sum may move (it is reported), under either schedule. Under
        ``schedule: async`` each group's all-reduce is the barrier round's arithmetic
        over its members, so the rest holds as in barrier rounds, less
        ``drift_reported`` (no rounds)."""
        kept = super().invariants_in_force(clock, rejoin, schedule)
        if clock == "network" and self.params.fault_model == "partial":
            return kept - {"sum"}
        return kept

    def describe(self) -> dict[str, object]:
        """The grid: M^d cells, the groups of a round (the M^(d−1) keys, or lines of the
        fixed grid), peers per group on average, and whether the grid is full (N = M^d:
        exact mean after d rounds without failures)."""
        size, dims, n = self.params.group_size, self.params.grid_dims, self.ctx.n_peers
        groups = size ** (dims - 1)
        if self.params.rekey:
            shape = {"peers_per_key": n / groups}
        else:
            shape = {"peers_per_line": n / groups, "peers_per_cell": n / size**dims}
        kind = "re-keyed" if self.params.rekey else "fixed"
        return {
            "grid": f"{size}^{dims} = {size**dims} cells ({kind})",
            "groups_per_round": groups,
            **shape,
            "full_grid": n == size**dims,
        }

    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """Form this round's groups from the present peers and average each.

        The rounds clock's idealisation of :meth:`plan` (groups by key at once, no
        matchmaking in time), hence an override: it draws the round's shuffle from the
        generator exactly as :meth:`plan` does (one permutation when re-keying with
        d > 1), and on a full grid without failures both clocks give the same vectors."""
        mask = as_mask(present, self.ctx.n_peers)
        if self.params.rekey:
            groups = self._keyed_groups(mask)
        elif mask.all():
            axis = t % self.params.grid_dims
            groups = self._full_lines[axis]
            self.counters["groups_formed"] += groups.n_groups
            self.counters["groups_failed"] += self._full_failed[axis]
        else:
            groups = self._line_groups(mask, self.lines[t % self.params.grid_dims])
        if self.wire.exact:
            state.x = group_mean(state.x, groups)
            nbytes, messages = butterfly_traffic(groups.counts, self.ctx.vector_bytes)
            return RoundStats(bytes_sent=nbytes, messages=messages)
        return self._compressed(state, groups)

    def _compressed(self, state: State, groups: Groups) -> RoundStats:
        """Rounds clock with compression: every group's butterfly through the wire."""
        state.x, nbytes, messages, shift = compressed_round(
            state.x, groups, self._equal, self._setup
        )
        return RoundStats(bytes_sent=nbytes, messages=messages, mean_drift=self._drift(shift))

    def _drift(self, shift: np.ndarray) -> float:
        return shift_drift(shift, self.ctx.n_peers)

    # -- network clock ---------------------------------------------------------------------
    def plan(self, present: np.ndarray, t: int) -> RoundPlan:
        """Matchmaking, then a butterfly per assembled group (:mod:`protocols._moshpit_net`)."""
        mask = as_mask(present, self.ctx.n_peers)
        labels, rank = self._round_labels(mask, t)
        p = self.params
        matched = net.matchmake(
            labels, self._delay_s, rank, p.group_size, p.min_group_size, p.matchmaking_time
        )
        plans, flows = net.plan_groups(matched, self._shares, self._setup)
        self.counters["groups_failed"] += matched.too_small + len(matched.groups) - len(plans)

        def finish(state: State, lost: np.ndarray) -> RoundStats:
            if not plans:
                return RoundStats(wait_s=max(0.0, matched.latest_s - IDLE_ROUND_S))
            assert planned.delivered is not None
            assert planned.timed_out is not None
            return self._finish(state, plans, planned.delivered, planned.timed_out, lost)

        planned = RoundPlan(finish, lambda: flows)
        return planned

    def _round_labels(self, mask: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Keys (−1: absent) and the round's shuffle rank, drawn as on the rounds clock."""
        n = self.ctx.n_peers
        rank = np.arange(n)
        if self.params.rekey:
            if self.params.grid_dims > 1:
                rank[self.ctx.rng.permutation(n)] = np.arange(n)
            return np.where(mask, self.keys, -1), rank
        return np.where(mask, self.lines[t % self.params.grid_dims], -1), rank

    def _finish(
        self,
        state: State,
        plans: list[net.Butterfly],
        delivered: np.ndarray,
        timed_out: np.ndarray,
        lost: np.ndarray,
    ) -> RoundStats:
        """The round's arithmetic from what each group's flows achieved; clean groups on
        an exact wire are averaged together, in one batch."""
        self.counters["flows_timed_out"] += int(np.count_nonzero(timed_out))
        clean_groups: list[np.ndarray] = []
        shift = np.zeros(self.ctx.dim)
        for plan in plans:
            positions = np.arange(plan.members.size)
            _, batched, moved = self._settle_group(
                state, plan, delivered, timed_out, lost, positions
            )
            if batched:
                clean_groups.append(plan.members)
            elif moved is not None:
                shift += moved
        if clean_groups:
            state.x = group_mean(state.x, _groups_of(clean_groups, self.ctx.n_peers))
        return RoundStats(mean_drift=self._drift(shift))

    def _settle_group(
        self,
        state: State,
        plan: net.Butterfly,
        delivered: np.ndarray,
        timed_out: np.ndarray,
        lost: np.ndarray,
        chunks: np.ndarray,
    ) -> tuple[np.ndarray | None, bool, np.ndarray | None]:
        """One group's outcome: (failed (g,) bool, or None when ``abort`` cancelled it;
        ``batched``: a clean group on an exact wire, left for the caller to average;
        the sum's shift (dim,) when the butterfly ran here). Counts, runs the butterfly
        of a group that is not batched, and re-keys the members that did not fail with
        ``chunks`` ((g,) their new key indices)."""
        fault = self.params.fault_model
        request_ok, reply_ok, failed = net.outcome(plan, delivered, timed_out, lost)
        clean = bool(request_ok.all() and reply_ok.all() and not failed.any())
        self.counters["members_failed"] += int(np.count_nonzero(failed))
        if not clean and fault == "abort":
            self.counters["groups_aborted"] += 1
            return None, False, None
        self.counters["groups_formed"] += 1
        batched, moved = clean and self.wire.exact, None
        if not batched:
            if clean or fault == "idealized":
                contributes, receives = net.everyone_but(plan, failed)
            else:
                contributes, receives = net.contributions(
                    plan, request_ok, reply_ok, lost[plan.members]
                )
            state.x, moved = apply_pieces(
                state.x, plan.members, plan.bounds, plan.reducer, contributes, receives,
                self._setup,
            )  # fmt: skip
        self._rekey(plan.members[~failed], chunks[~failed])
        return failed, batched, moved

    # -- schedule: async -------------------------------------------------------------------
    def group_key(self, peer: int, step: int) -> int:
        """The peer's key (``rekey: true``); on the fixed grid its line along axis
        ``step`` mod d, offset by the axis so that lines of different axes never meet."""
        if self.params.rekey:
            return int(self.keys[peer])
        dims, size = self.params.grid_dims, self.params.group_size
        axis = step % dims
        return axis * size ** (dims - 1) + int(self.lines[axis][peer])

    def group_plan(
        self, members: np.ndarray, notify_s: np.ndarray, chunks: np.ndarray
    ) -> GroupPlan:
        """The group's streaming butterfly (:func:`protocols._moshpit_net.group_butterfly`)
        and its arithmetic, as one group of a barrier round's :meth:`_finish`; members
        that did not fail take their new keys from ``chunks``."""
        plan, flows = net.group_butterfly(members, notify_s, self._shares, self._setup)
        if plan is None:  # no member can reduce (all in client mode)
            self.counters["groups_failed"] += 1
        g, n = members.size, self.ctx.n_peers

        def settle(state: State, lost: np.ndarray) -> np.ndarray:
            if plan is None:
                return np.zeros(g, dtype=bool)
            planned = this()  # alive: the engine calls its plan's settle
            assert planned is not None
            assert planned.delivered is not None
            assert planned.timed_out is not None
            self.counters["flows_timed_out"] += int(np.count_nonzero(planned.timed_out))
            failed, batched, _ = self._settle_group(
                state, plan, planned.delivered, planned.timed_out, lost, chunks
            )
            if failed is None:
                return np.zeros(g, dtype=bool)
            if batched:
                state.x = group_mean(state.x, _groups_of([plan.members], n))
            return ~failed

        planned = GroupPlan(members, settle, lambda: flows)
        # a weak reference: settle holding the plan that holds settle would be a cycle,
        # keeping the group's flows and butterfly until the collector's next full pass
        this = weakref.ref(planned)
        return planned

    def count_too_small(self) -> None:
        """A gathering under ``min_group_size`` is a group that failed to form (as in
        barrier rounds' matchmaking)."""
        self.counters["groups_failed"] += 1

    def _rekey(self, members: np.ndarray, chunks: np.ndarray) -> None:
        if self.params.rekey and members.size:
            size, dims = self.params.group_size, self.params.grid_dims
            self.keys[members] = _grid.rekey(self.keys[members], chunks, size, dims)

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

    def _filtered(
        self, groups: Groups, aborted: np.ndarray | None = None, count: bool = True
    ) -> Groups:
        keep = groups.counts >= self.params.min_group_size
        counts = [int(np.count_nonzero(~keep)), 0]
        if aborted is not None:
            counts[1] = int(np.count_nonzero(aborted & keep))
            keep &= ~aborted
        if count:
            self.counters["groups_failed"] += counts[0]
            self.counters["groups_aborted"] += counts[1]
            self.counters["groups_formed"] += int(np.count_nonzero(keep))
        return groups if keep.all() else groups.subset(keep)
