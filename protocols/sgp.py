"""sgp: Stochastic-Gradient-Push-style averaging on a time-varying exponential graph.

Algorithm (rounds clock). Let H = max(1, ⌊log₂(N−1)⌋) and, in round t, h = t mod H and
the offsets a = 2^h, b = 2^(h+1) (mod N).

- ``push_sum: false`` — every present peer i replaces x_i by the equal-weight mean of
  itself and the present peers among i+a and i+b (1/3 each when both are present);
  absent peers keep their vectors. Without absences W = (I + P_a + P_b)/3 is doubly
  stochastic (P shifts); with absences it is only row-stochastic and the drift of the
  mean is reported.
- ``push_sum: true`` — true push-sum: each peer holds a weight w_i (initially 1, in
  ``state.extra["w"]``, shape (N, 1)). Every present peer keeps 1/3 of (x_i, w_i) and
  pushes 1/3 to each present out-neighbour i+a, i+b; the share of an absent
  out-neighbour stays with the sender; absent peers neither send nor receive. The
  estimate is x_i / w_i; W is column-stochastic, so Σx and Σw are conserved.

For small N the two offsets may coincide with each other or with i (N = 2: b ≡ 0); the
weights are per slot, so a peer listed twice counts twice (N = 2 mixes 2/3 self, 1/3
other). N = 1 does nothing.

``schedule: async`` (network clock; asynchronous SGP, :mod:`sim.engine.mailbox`): at
its own step t_i (its step count) a peer uses the offsets of round t_i.

- ``push_sum: false`` — it sends Q(x_i) to i − a and i − b, then mixes with the newest
  value from each sender since its last step, equal weights:
  x_i ← (x_i + Σ_j v_j)/(1 + m) for m senders (1/3 each for two, as in rounds).
  Stale values are allowed; the mean may drift.
- ``push_sum: true`` — it keeps 1/3 of (x_i, w_i) and sends 1/3 to each of i + a and
  i + b; the receiver adds the share on delivery, a failed flow gives it back to the
  sender, and a share whose edge is busy (its previous share still in flight) or whose
  receiver is absent stays home. Σx and Σw over the peers and the shares in flight are
  conserved (round-off), under churn too: a peer's preemption settles its shares as it
  goes down (one it sent comes back to it, one delivered to it at that instant is
  added), so an absent peer's rows never change.

Messages: each present peer sends its vector (with push-sum also its weight, one more
coordinate) to each present out-neighbour other than itself.

``compression`` (:mod:`sim.kernels.compression`): every present peer's vector is
quantized once, so all its receivers decode the same row Q(x_j) (with push-sum the
share is Q(x_j)/3; the weight w travels exact); a peer keeps its own exact x_i for its
own term. A message costs ``wire_bytes(compression, dim, itemsize)`` (plus one exact
coordinate for w) instead of S.

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| Σ_i x_i and Σ_i w_i (push_sum) | preserved (round-off) | all |
| global mean (no push_sum) | preserved without absences; drift reported with them | absences |
| max − min of x per coordinate (no push_sum) | never widens (row-stochastic) | all |
| var (no push_sum, everyone present) | never increases (doubly stochastic) | none |
| absent peers' x (and w) | unchanged, bit for bit | any absence |
| global mean with compression | approximate: the wire's error shows in ``mean_drift`` | all |

The rows above hold with ``compression: none``; with compression Σ_i w_i is still
preserved and absent peers stay unchanged, the rows on x hold only approximately. Under
``schedule: async`` (no rounds) the push-sum sums count the shares in flight, and without
push-sum the mean drifts even with everyone present (``invariants_in_force``).

Reference: Assran, Loizou, Ballas, Rabbat, "Stochastic Gradient Push for Distributed
Deep Learning", ICML 2019; Kempe, Dobra, Gehrke, "Gossip-based computation of aggregate
information", FOCS 2003.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from protocols._common import Compression, as_mask, mean_drift, wire_of
from protocols._mailbox import add_share, mix_row, snapshot, take_shares
from protocols.base import MailboxProtocol, ProtocolParams
from protocols.contract import Context, Flows, RoundPlan, RoundStats, State
from protocols.footprint import Footprint, GraphSize, neighbour_footprint
from protocols.gossip import column_excess, compressed_neighbour_mean, wire_drift
from sim.kernels import ell_mix, neighbour_mean
from sim.kernels._xp import namespace


class SgpParams(ProtocolParams):
    """Parameters of ``sgp``."""

    name: Literal["sgp"] = "sgp"
    push_sum: bool = Field(default=False, description="true push-sum with weights w")
    compression: Compression = Field(default="none", description="wire compression")


def offsets(n_peers: int, t: int) -> tuple[int, int]:
    """The two out-neighbour offsets (2^h, 2^(h+1)) mod N of round t."""
    period = max(1, (n_peers - 1).bit_length() - 1) if n_peers > 1 else 1
    h = t % period
    return 2**h % n_peers, 2 ** (h + 1) % n_peers


class Sgp(MailboxProtocol):
    """Exponential-graph averaging, optionally as true push-sum."""

    Params = SgpParams
    description = "SGP-style mixing on a time-varying exponential graph (push_sum optional)"
    invariants = frozenset(
        {"sum", "weight_sum", "positive_weights", "hull", "drift_reported", "absent_unchanged"}
    )

    @classmethod
    def footprint(cls, params: Any, n_peers: int, dim: int, itemsize: int, clock: str) -> Footprint:
        """Mixing along two offsets (an (N, 2) table): as gossip on a 2-regular graph;
        push-sum's column-stochastic step holds one more array (the scaled x), and its
        compressed step two mixings (exact own terms, decoded received ones)."""
        wire = wire_of(params)
        if params.push_sum:
            arrays = 5.0 + (0.0 if wire.exact else 4.0)
        else:
            arrays = 4.0 + (0.0 if wire.exact else 3.0)
        graph = GraphSize(float(n_peers), min(2.0, max(n_peers - 1.0, 0.0)))
        base = Footprint(state_arrays=arrays)
        return neighbour_footprint(base, graph, n_peers, dim, itemsize, wire)

    def __init__(self, params: SgpParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        self._peers = np.arange(ctx.n_peers)
        self._vector_bytes = self.wire.message_bytes(ctx.wire_coords, ctx.itemsize)

    def init_state(self, state: State) -> None:
        """Add the push-sum weights w = 1 (shape (N, 1), the dtype of x) when enabled."""
        if self.params.push_sum:
            xp = namespace(state.x)
            state.extra["w"] = xp.ones_like(state.x[:, :1])

    def invariants_in_force(
        self, clock: str = "rounds", rejoin: str = "keep", schedule: str = "barrier"
    ) -> frozenset[str]:
        """Without push-sum there are no weights and, around absent peers, the mixing is
        row-stochastic only: the sum may move (it is reported); under ``schedule:
        async`` it moves even without absences (stale values, one row at a time).

        With push-sum under ``schedule: async`` a share leaves its sender at its step
        and reaches its receiver (or comes back) when its flow ends, so ``sum`` and
        ``weight_sum`` count the shares in flight: Σ over the peers' rows plus the
        shares on the wire is kept, under any churn (a failed share goes back to its
        sender, settled at the preemption that failed it). The hull of x/w holds (a
        received or returned share mixes in an estimate once held), weights stay
        positive (a step keeps 1/3 of w, arrivals only add) and absent peers are
        unchanged (:mod:`sim.engine.mailbox`). ``drift_reported`` does not apply (no
        rounds)."""
        kept = super().invariants_in_force(clock, rejoin, schedule)
        if self.params.push_sum:
            return kept
        return kept - {"sum", "weight_sum", "positive_weights"}

    def estimate(self, state: State) -> Any:
        """x / w with push-sum, else x."""
        if self.params.push_sum:
            return state.x / state.extra["w"]
        return state.x

    def _targets(self, t: int, sign: int) -> np.ndarray:
        """(N, 2) table of i + sign·offset (mod N) for the round's two offsets."""
        a, b = offsets(self.ctx.n_peers, t)
        return (self._peers[:, None] + sign * np.array([a, b])) % self.ctx.n_peers

    def plan(self, present: np.ndarray, t: int) -> RoundPlan:
        """Present peers send to i − offset (plain: the peers that pull from them) or to
        i + offset (push-sum), for the round's two offsets, never to themselves: a vector
        through the wire, plus one exact coordinate for the push-sum weight. Then the
        peers not lost mix along the two offsets."""
        mask = as_mask(present, self.ctx.n_peers)

        def flows() -> Flows:
            dst = self._targets(t, +1 if self.params.push_sum else -1)
            sends = mask[:, None] & (dst != self._peers[:, None])
            src = np.broadcast_to(self._peers[:, None], dst.shape)[sends]
            weight = self.ctx.itemsize if self.params.push_sum else 0
            return Flows(src, dst[sends], np.full(src.size, float(self._vector_bytes + weight)))

        def finish(state: State, lost: np.ndarray) -> RoundStats:
            return self._mix(state, mask & ~lost, t)

        return RoundPlan(finish, flows)

    def _mix(self, state: State, mask: np.ndarray, t: int) -> RoundStats:
        """One mixing step of the peers in ``mask`` along round ``t``'s two offsets."""
        if self.ctx.n_peers < 2:
            return RoundStats()
        if self.params.push_sum:
            return self._push_sum(state, mask, t)
        targets = self._targets(t, +1)
        live = mask[targets] & mask[:, None]
        weights = live / (1.0 + live.sum(axis=1))[:, None]
        if self.wire.exact:
            drift = 0.0 if mask.all() else mean_drift(state.x, column_excess(targets, weights))
            state.x = neighbour_mean(state.x, targets, weights)
        else:
            state.x, drift = compressed_neighbour_mean(state.x, targets, weights, self.wire)
        messages = int(np.count_nonzero(live & (targets != self._peers[:, None])))
        return RoundStats(float(messages * self._vector_bytes), messages, drift)

    def _push_sum(self, state: State, mask: np.ndarray, t: int) -> RoundStats:
        out = self._targets(t, +1)
        sends = mask[out] & mask[:, None]
        keep = np.where(mask, 1.0 - sends.sum(axis=1) / 3.0, 1.0)
        senders = self._targets(t, -1)
        receives = (mask[senders] & mask[:, None]) / 3.0
        drift = 0.0
        if self.wire.exact:
            state.x = ell_mix(state.x, senders, receives, keep)
        else:
            # own terms exact (a share a peer sends itself when an offset is ≡ 0 included),
            # received shares decoded: y_i = keep_i x_i + Σ_k r_ik Q(x)_{s_ik}
            x, self_slot = state.x, senders == self._peers[:, None]
            own_weights = keep + np.where(self_slot, receives, 0.0).sum(axis=1)
            xq = self.wire.receive(x)
            own = ell_mix(x, senders, np.zeros_like(receives), own_weights)
            received = np.where(self_slot, 0.0, receives)
            state.x = own + ell_mix(xq, senders, received, np.zeros_like(keep))
            drift = wire_drift(x, state.x)
        state.extra["w"] = ell_mix(state.extra["w"], senders, receives, keep)
        messages = int(np.count_nonzero(sends & (out != self._peers[:, None])))
        nbytes = messages * (self._vector_bytes + self.ctx.itemsize)
        return RoundStats(float(nbytes), messages, drift)

    # -- schedule: async (asynchronous SGP) ------------------------------------------------
    def out_neighbours(self, peer: int, step: int) -> np.ndarray:
        """i + a, i + b (push-sum) or i − a, i − b (mod N) for the offsets of round
        ``step``; nothing for N < 2."""
        if self.ctx.n_peers < 2:
            return np.zeros(0, dtype=np.intp)
        return self._targets(step, +1 if self.params.push_sum else -1)[peer]

    def mailbox_bytes(self) -> float:
        """One vector through the wire, plus one exact coordinate with push-sum."""
        return float(self._vector_bytes + (self.ctx.itemsize if self.params.push_sum else 0))

    def post(self, state: State, peer: int, sent: int) -> Any:
        """Push-sum: 1/3 of (x, w) per receiver, taken off ``peer``; else Q(x_peer)."""
        if self.params.push_sum:
            return take_shares(state, peer, sent, 2, self.wire)
        return snapshot(state, peer, self.wire)

    def arrive(self, state: State, peer: int, payload: Any) -> bool:
        """Push-sum: the receiver adds the (decoded) share now; else the mailbox."""
        if not self.params.push_sum:
            return False
        add_share(state, peer, payload[1], payload[2])
        return True

    def returned(self, state: State, peer: int, payload: Any) -> None:
        """Push-sum: the share goes back to its sender, exact."""
        if self.params.push_sum:
            add_share(state, peer, payload[0], payload[2])

    def mix(self, state: State, peer: int, mailbox: dict[int, Any]) -> None:
        """Equal weights 1/(1 + m) on itself and the m senders (plain mixing only; a
        push-sum mailbox is always empty)."""
        weight = 1.0 / (1.0 + len(mailbox))
        mix_row(state, peer, [(weight, mailbox[j]) for j in sorted(mailbox)])
