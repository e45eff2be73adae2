"""Streams in chunks: a stream's pieces cost an event only where their end is seen.

A stream (pieces each ``after`` the previous one on one connection, see
:func:`sim.engine.netclock.round_state._continuations`) already runs as one fluid flow. Yet each
piece's end used to be an event: a ``done`` event, a clock callback, the next piece
resumed. In a butterfly most of these ends change nothing. A request piece opens its
piece's gate, and the gate releases the replies only when its *last* request ends.

The pieces of a stream open gates in order, and every stream of a *family* (the
requests to one reducer) opens the same gates in the same order. So gate p + 1 never
completes before gate p, and only the lowest incomplete gate of a family, its
*frontier*, can complete next. Its last request is among the streams that have not
passed it yet.

The clock therefore sends a stream as *chunks*, each one network flow carrying several
pieces (:meth:`sim.network.FlowNetwork.shorten` cuts a chunk back):

- a stream at the frontier sends the frontier piece alone, so its end is an event;
- a stream ahead of the frontier sends all its remaining pieces at once;
- when the frontier moves on, every stream that has not passed the new frontier piece
  is cut back to end exactly there.

The ends inside a chunk release nothing: the next piece is already moving, the replies
wait for the gate too, and the gate is not the frontier. They are counted, in order,
when the family next has an event (:meth:`Chains.catch_up`), or before a sample. Each
piece still counts as a flow and a message when it starts, and delivered when it ends.

A plan is chunked only when this reasoning holds (:meth:`Chains.build`), and only its
families of two streams or more (one stream alone has every piece at its frontier):

- every piece of a stream opens a gate, has bytes, and has no timeout;
- the streams of a family open the same gates in the same order, and nothing else
  opens them;
- every other flow after a stream piece also waits for that piece's gate.

The result is the piece-by-piece model's: the same flows delivered, counts and bytes,
and the same end times to round-off (``tests/property/test_stream_clock.py``). A chunk
adds the bytes of several pieces in one flow, so sums come in another order.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from protocols.contract import Flows


class Chains:
    """The streams of one plan, their families and where each chunk stands.

    Built by :meth:`build`; the clock (:class:`~sim.engine.netclock.NetworkClock`)
    calls :meth:`chunk` when a stream's next piece starts, :meth:`ended_by` to count
    the pieces a chunk has carried through, and :meth:`frontier_cuts` once a gate opens.
    """

    def __init__(
        self,
        flat: np.ndarray,
        lengths: list[int],
        cum: np.ndarray,
        family: list[int],
        members: list[list[int]],
        gates: list[list[int]],
        chain_of: np.ndarray,
        pos_of: np.ndarray,
    ) -> None:
        #: every stream's pieces (flows) in order, one stream after another (int64,
        #: :meth:`~sim.engine.netclock.round_state.RoundState.ended_run` reads them):
        #: stream c's from offset[c], lengths[c] of them; cum[k]: bytes of stream c's
        #: pieces up to flat[k]. Arrays, not lists: a round of millions of pieces keeps
        #: no Python int or float per piece.
        self.flat, self.lengths = flat, lengths
        self.offset = np.r_[0, np.cumsum(lengths, dtype=np.int64)].tolist()
        self.cum = packed("d", cum)
        #: family of each stream; members and gates (in order) of each family
        self.family, self.members, self.gates = family, members, gates
        #: per flow: its stream (-1: none) and its position in it
        self.chain_of = packed("q", chain_of)
        self.pos_of = packed("q", pos_of)
        n = len(lengths)
        #: per stream: pieces counted as ended; the current chunk's first and last
        #: piece (last -1: no chunk in flight) and its flow
        self.done = [0] * n
        self.first = [0] * n
        self.last = [-1] * n
        self.flow: list[Any] = [None] * n
        #: per family: position of its frontier gate
        self.frontier = [0] * len(members)
        #: the family of each of their gates; families with a gate opened since the
        #: clock last moved their frontiers (:meth:`gate_opened`)
        self.gate_family = {g: f for f, seq in enumerate(gates) for g in seq}
        self.touched: dict[int, None] = {}

    @classmethod
    def build(cls, flows: Flows, cont: np.ndarray, gate_left: Sequence[int]) -> Chains | None:
        """The streams of ``flows`` (``cont[i]``, intp: the flow continuing flow i's stream,
        -1 for none) in families, or None when the plan is outside what chunks handle
        (module docstring)."""
        if not gate_left or flows.opens is None:
            return None
        n = cont.size
        linked = np.flatnonzero(cont >= 0)
        if linked.size == 0:
            return None
        # each stream piece's first piece and position, by pointer jumping
        ptr = np.arange(n)
        ptr[cont[linked]] = linked
        depth = (ptr != np.arange(n)).astype(np.intp)
        while True:
            up = ptr[ptr]
            if np.array_equal(up, ptr):
                break
            depth += depth[ptr]
            ptr = up
        in_chain = np.zeros(n, dtype=bool)
        in_chain[linked] = True
        in_chain[cont[linked]] = True
        node = np.flatnonzero(in_chain)
        order = node[np.lexsort((depth[node], ptr[node]))]  # stream by stream, in order
        first = np.flatnonzero(np.r_[True, ptr[order[1:]] != ptr[order[:-1]]])
        length = np.diff(np.r_[first, order.size])
        opens, after, waits = flows.opens, flows.after, flows.waits
        if np.any(opens[order] < 0) or np.any(flows.nbytes[order] <= 0.0):
            return None
        if flows.timeout_s is not None and np.any(np.isfinite(flows.timeout_s[order])):
            return None
        # every flow after a stream piece (or its next piece on the connection, other
        # than its continuation) waits for its gate
        for links in (after, flows.previous):
            if links is None:
                continue
            j = np.flatnonzero(links >= 0)
            j = j[in_chain[links[j]]]
            j = j[cont[links[j]] != j]
            if waits is None or np.any(waits[j] != opens[links[j]]):
                return None
        n_chains = first.size
        cum = np.empty(order.size)  # each stream's cumulative bytes, set below
        family_of = np.empty(n_chains, dtype=np.intp)
        reps: list[tuple[int, np.ndarray]] = []  # (first stream, gates) of each family
        left = np.asarray(gate_left)
        for k in np.unique(length).tolist():  # streams of k pieces: rows of a table
            chains = np.flatnonzero(length == k)
            at = first[chains][:, None] + np.arange(k)
            cum[at] = np.cumsum(flows.nbytes[order[at]], axis=1)
            seqs, inverse = _distinct_rows(opens[order[at]])
            size = np.bincount(inverse, minlength=seqs.shape[0])
            # distinct gates, each opened only by this family's streams, once each
            if np.any(np.diff(np.sort(seqs, axis=1), axis=1) == 0):
                return None
            if np.any(left[seqs] != size[:, None]):
                return None
            lead = np.full(seqs.shape[0], n_chains)
            np.minimum.at(lead, inverse, chains)
            base = len(reps)
            family_of[chains] = base + inverse
            reps.extend(zip(lead.tolist(), seqs, strict=True))
        # families numbered by their first stream, as a scan of the streams in order would
        rank = np.argsort([r[0] for r in reps], kind="stable")
        renumber = np.empty(len(reps), dtype=np.intp)
        renumber[rank] = np.arange(len(reps))
        family_of = renumber[family_of]
        gate_rows = [reps[r][1] for r in rank.tolist()]
        # a family of one stream has every piece at its frontier: it stays a plain stream
        size = np.bincount(family_of, minlength=len(gate_rows))
        kept_families = np.flatnonzero(size >= 2)
        if kept_families.size == 0:
            return None
        kept = np.flatnonzero(size[family_of] >= 2)
        new_family = np.full(len(gate_rows), -1, dtype=np.intp)
        new_family[kept_families] = np.arange(kept_families.size)
        family = new_family[family_of[kept]].tolist()
        gates = [gate_rows[f].tolist() for f in kept_families.tolist()]
        members: list[list[int]] = [[] for _ in gates]
        for c, f in enumerate(family):
            members[f].append(c)
        new_chain = np.full(n_chains, -1, dtype=np.intp)
        new_chain[kept] = np.arange(kept.size)
        chain_of = np.full(n, -1, dtype=np.intp)
        chain_of[order] = new_chain[np.repeat(np.arange(n_chains), length)]
        pos_of = np.full(n, -1, dtype=np.intp)
        pos_of[order] = np.where(chain_of[order] >= 0, depth[order], -1)
        in_kept = np.repeat(size[family_of] >= 2, length)
        return cls(
            order[in_kept].astype(np.int64), length[kept].tolist(), cum[in_kept], family,
            members, gates, chain_of, pos_of,
        )  # fmt: skip

    def gate_opened(self, gate: int) -> None:
        """``gate`` opened (its last flow ended): its family's frontier may move on."""
        f = self.gate_family.get(gate)
        if f is not None:
            self.touched[f] = None

    def gated_elsewhere(self, c: int) -> bool:
        """Whether another stream of c's family has a chunk in flight that ends at the
        frontier piece, not yet counted: the frontier gate cannot open before that
        chunk's end (an event of its own), so nothing needs counting for it now."""
        f = self.family[c]
        p, last, done, flow = self.frontier[f], self.last, self.done, self.flow
        for other in self.members[f]:
            if last[other] == p and done[other] <= p and other != c and flow[other] is not None:
                return True
        return False

    def piece(self, c: int, t: int) -> int:
        """Piece t of stream c (a flow), -1 past the stream's last piece."""
        return self.flat.item(self.offset[c] + t) if t < self.lengths[c] else -1

    def chunk(self, c: int, t: int) -> int:
        """Piece t of stream c starts: the last piece of its chunk (t itself at the
        family's frontier, else the stream's last)."""
        last = t if t <= self.frontier[self.family[c]] else self.lengths[c] - 1
        self.first[c], self.last[c] = t, last
        return last

    def chunk_bytes(self, c: int, first: int, last: int) -> float:
        """Bytes of stream c's pieces first..last."""
        cum, at = self.cum, self.offset[c]
        return cum[at + last] - (cum[at + first - 1] if first else 0.0)

    def ended_by(self, c: int, moved: float, failed: bool = False) -> int:
        """Pieces of stream c's chunk before its last one whose bytes are through when the
        chunk has moved ``moved`` bytes: the next piece not ended (from ``done``). When
        the chunk ``failed`` at that instant, a piece whose last byte arrives at that very
        instant fails with it, as a flow of its own does when its end and a preemption
        fall on the same instant."""
        cum, at, first = self.cum, self.offset[c], self.first[c]
        base = cum[at + first - 1] if first else 0.0
        return pieces_through(cum, base, at + self.done[c], at + self.last[c], moved, failed) - at

    def frontier_cuts(self, f: int, gate_left: Sequence[int]) -> list[int]:
        """Move family f's frontier past its open gates; the streams with a chunk that
        has not passed it and goes beyond it (to cut back to end at it)."""
        gates, p = self.gates[f], self.frontier[f]
        while p < len(gates) and gate_left[gates[p]] == 0:
            p += 1
        self.frontier[f] = p
        if p == len(gates):
            return []
        done, last, flow = self.done, self.last, self.flow
        return [c for c in self.members[f] if done[c] <= p < last[c] and flow[c] is not None]


def packed(typecode: str, values: np.ndarray) -> array[Any]:
    """``values`` as an ``array`` of ``typecode`` (``"q"``: int64, ``"d"``: float64),
    read from Python one value at a time faster than a numpy array, and with no Python
    object per value as a list; one copy of the values (none more when they have the
    type already)."""
    dtype = np.int64 if typecode == "q" else np.float64
    out = array(typecode)
    out.frombytes(np.ascontiguousarray(values, dtype=dtype).data.cast("B"))
    return out


def pieces_through(
    cum: Sequence[float], base: float, t: int, last: int, moved: float, failed: bool = False
) -> int:
    """The first piece from t (before ``last``) whose bytes are not through once a chunk
    starting at cumulative bytes ``base`` moved ``moved`` bytes (``cum``: cumulative
    bytes of the pieces); when it ``failed`` at that instant, a piece whose last byte
    arrives at that very instant fails with it."""
    if failed:
        while t < last and cum[t] - base < moved:
            t += 1
        return t
    while t < last and cum[t] - base <= moved:
        t += 1
    return t


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_inverse=True)``: the distinct rows, sorted, and
    each row's index among them. Rows of gates: two streams of one family open the same
    gates, and no gate is another family's, so rows that differ differ in their first
    gate; where that holds, a 1-D unique of the first column gives the same answer
    without sorting whole rows (the general way, taken otherwise)."""
    _, index, inverse = np.unique(rows[:, 0], return_index=True, return_inverse=True)
    seqs = rows[index]
    if np.array_equal(seqs[inverse], rows):
        return seqs, inverse.reshape(-1)
    seqs, inverse = np.unique(rows, axis=0, return_inverse=True)
    return seqs, inverse.reshape(-1)
