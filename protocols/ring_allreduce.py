"""ring_allreduce: reduce-scatter then all-gather around a ring of the present peers.

Algorithm. The peers present when an attempt starts form a ring (in peer order); the
vector is cut into n chunks (n = ring size). Reduce-scatter: n−1 steps, in step k peer i
sends chunk (i − k) mod n to its successor; all-gather: n−1 more steps forwarding the
reduced chunks. On the network clock each peer sends to its successor on one connection,
in step order, one message at a time (a blocking send/receive per step, the textbook
ring): its message of step k leaves once the chunk of step k−1 arrived from its
predecessor (the data) and its own message of step k−1 ended (the connection).
``pipeline_chunks`` P > 1 cuts every chunk into P pieces sent as separate messages, in
(step, piece) order on the connection, each paying the route latency: piece c of step k
leaves once piece c of step k−1 arrived from the predecessor and the previous piece on
the connection ended. A message on a connection whose previous message failed (an end
was preempted) fails at once without sending: the connection is broken for the rest of
the attempt. On the rounds clock an attempt is instant and succeeds over the present
peers. On the network clock any loss of a member aborts the attempt: everyone keeps its
old vector, and the next attempt starts ``restart_delay`` seconds later with the peers
then present. Under ``schedule: async`` the ring is a collective
(:class:`sim.engine.collective.CollectiveEngine`): each attempt first waits for every
present peer's local work, max(``compute`` + ``delay``) over them.

``compression`` quantizes every message (:func:`sim.kernels.ring.ring_reduce`): each hop
of the reduce-scatter re-encodes the partial sum it forwards; the all-gather sends the
mean once, encoded, and the others forward those bytes, so every member but the chunk's
owner ends with the same dequantized mean. Chunks are whole coordinates (⌊dim/n⌋, one
more for the first dim mod n) when the wire compresses; their bytes are those of the
chunks of the vector on the wire (``vector.wire_bytes``: its coordinates split alike).

Messages: every step every member sends one chunk of S/n bytes to its successor:
2(n−1)·S/n bytes per member per attempt. Without other traffic or straggler delays an
attempt takes 2(n−1)·max_i(P·lat_i + S/(n·B_i)) over the connections i → i+1 (lat_i
the route latency, B_i = min(upload of i, download of i+1)): each connection carries one
message at a time, and the critical path stays on the slowest connection. With equal
latencies and P = 1: 2(n−1)·(lat + S/(n·B_min)).

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| global sum Σ_i x_i | preserved (round-off); with compression it moves (``mean_drift``) | all |
| members after a completed attempt | exact mean of the members (all rows equal) | none lost |
| state after an aborted attempt | unchanged, bit for bit | any member lost |
| absent peers' vectors | unchanged | all |
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from protocols._common import Compression, Seconds, as_mask, shift_drift, wire_of
from protocols._load_balance import whole_coordinates
from protocols.base import BarrierProtocol, ProtocolParams
from protocols.contract import Flows, RoundPlan, RoundStats, State
from protocols.footprint import Footprint
from sim.kernels import Groups, group_mean
from sim.kernels.ring import ring_reduce


class RingAllreduceParams(ProtocolParams):
    """Parameters of ``ring_allreduce``."""

    name: Literal["ring_allreduce"] = "ring_allreduce"
    restart_delay: Seconds = Field(default=1.0, ge=0, description="seconds after an abort")
    pipeline_chunks: int = Field(default=1, ge=1, description="pieces per chunk (network clock)")
    compression: Compression = Field(default="none", description="wire compression")


def ring_flows(members: np.ndarray, pieces: int = 1) -> tuple[np.ndarray, ...]:
    """(src, dst, chunk_fraction, opens, waits, after) of one attempt around ``members``.

    Flow (k, i, c) — step k, member i, piece c — has index (k·n + i)·P + c and opens the
    gate of its own index. It waits for flow (k−1, i−1, c), the piece it forwards (none
    in step 0): a gate, which opens when that flow ended, delivered or not. It comes
    after the previous flow on its connection i → i+1, (k, i, c−1), or (k−1, i, P−1) for
    c = 0 (none for the first): if that one failed, it fails at once without sending.
    """
    n = members.size
    flow = np.arange(2 * (n - 1) * n * pieces)
    step_member, c = np.divmod(flow, pieces)
    k, i = np.divmod(step_member, n)
    waits = np.where(k > 0, ((k - 1) * n + (i - 1) % n) * pieces + c, -1)
    previous_step = ((k - 1) * n + i) * pieces + pieces - 1  # (k − 1, i, P − 1)
    after = np.where(c > 0, flow - 1, np.where(k > 0, previous_step, -1))
    src, dst = members[i], members[(i + 1) % n]
    return src, dst, np.full(flow.size, 1.0 / (n * pieces)), flow, waits, after


class RingAllreduce(BarrierProtocol):
    """Ring all-reduce over the present peers; aborts and restarts on any loss."""

    Params = RingAllreduceParams
    description = "ring all-reduce of the present peers; any loss aborts, restart after a delay"
    invariants = frozenset({"sum", "hull", "drift_reported", "absent_unchanged"})
    #: schedule async: each attempt waits for every present peer's local work.
    collective = True

    @classmethod
    def footprint(cls, params: Any, n_peers: int, dim: int, itemsize: int, clock: str) -> Footprint:
        """The exact mean in place; through a compressing wire the ring's rows before
        and after, the chunks in transit and the owners' mask, and the sum's shift in
        float64 (both rows and their difference). Flows: 2(N − 1) steps of N chunks of
        ``pipeline_chunks`` pieces; each connection carries one at a time."""
        wire = wire_of(params)
        compressed = not wire.exact
        pieces = params.pipeline_chunks
        n = max(n_peers, 1)
        flows = 2.0 * (n - 1) * n * pieces
        return Footprint(
            state_arrays=4.0 if compressed else 1.0,
            float64_arrays=3.0 if compressed else 0.0,
            flows_per_round=flows,
            flows_in_flight=min(flows, float(n)),
            round_bytes_per_peer=2 * (n - 1) / n * wire.message_bytes(dim, itemsize),
        )

    def plan(self, present: np.ndarray, t: int) -> RoundPlan:
        """One attempt around the ring of the present peers, as a chain of flows. Any
        member lost aborts it (everyone keeps its vector; the next attempt starts
        ``restart_delay`` later); otherwise the members get their exact mean."""
        members = np.flatnonzero(as_mask(present, self.ctx.n_peers))
        if members.size < 2:
            return RoundPlan(lambda state, lost: RoundStats())

        def flows() -> Flows:
            pieces = self.params.pipeline_chunks
            src, dst, fraction, opens, waits, after = ring_flows(members, pieces)
            nbytes = fraction * self.ctx.vector_bytes
            if not self.wire.exact:  # whole coordinates (an exact wire: the fluid S/n)
                nbytes = self._compressed_bytes(members.size, opens.size)
            return Flows(src, dst, nbytes, opens, waits, after)

        def finish(state: State, lost: np.ndarray) -> RoundStats:
            if lost[members].any():  # abort: everyone keeps its vector
                return RoundStats(wait_s=self.params.restart_delay)
            return self._reduce(state, members)

        return RoundPlan(finish, flows)

    def _reduce(self, state: State, members: np.ndarray) -> RoundStats:
        """The ``members`` (two or more) get their exact mean (through the wire)."""
        if not self.wire.exact:
            counts = self._chunks(members.size)
            state.x, shift = ring_reduce(state.x, members, counts, self.wire)
            on_wire = self._chunks(members.size, self.ctx.wire_coords)
            nbytes = 2 * (members.size - 1) * self.wire.nbytes(on_wire, self.ctx.itemsize).sum()
            drift = shift_drift(shift, self.ctx.n_peers)
            return RoundStats(float(nbytes), 2 * members.size * (members.size - 1), drift)
        state.x = group_mean(state.x, Groups.single(members, self.ctx.n_peers))
        nbytes = 2 * (members.size - 1) * self.ctx.vector_bytes
        return RoundStats(float(nbytes), 2 * members.size * (members.size - 1))

    def _chunks(self, n: int, coords: int | None = None) -> np.ndarray:
        """Whole coordinates of each of the n chunks of ``coords`` coordinates (default
        ``dim``; the first ``coords`` mod n get one more)."""
        return whole_coordinates(np.full(n, 1.0 / n), self.ctx.dim if coords is None else coords)

    def _compressed_bytes(self, n: int, n_flows: int) -> np.ndarray:
        """Wire bytes of every flow of :func:`ring_flows` when the wire compresses."""
        pieces = self.params.pipeline_chunks
        step_member, piece = np.divmod(np.arange(n_flows), pieces)
        k, i = np.divmod(step_member, n)
        chunk = np.where(k < n - 1, i - k, i + 1 - (k - (n - 1))) % n
        coords = self._chunks(n, self.ctx.wire_coords)[chunk]
        coords = coords // pieces + (piece < coords % pieces)
        return self.wire.nbytes(coords, self.ctx.itemsize)
