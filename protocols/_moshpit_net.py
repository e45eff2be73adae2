"""moshpit on the network clock: matchmaking, then a streaming butterfly in every group.

Matchmaking (:func:`matchmake`). The peers present when a round starts arrive at
matchmaking after their straggler delay. Peers sharing a key gather in arrival order: a
group *assembles* when it reaches ``group_size`` members or ``matchmaking_time`` seconds
after its first member arrived, whichever comes first; later arrivals with that key start
the next group. A group smaller than ``min_group_size`` does not form: its members keep
their vectors and keys and try again next round. Members are fixed once they joined: a
member preempted before its group assembles is lost inside the all-reduce.

Butterfly (:func:`plan_groups`, the one butterfly planner: ``random_groups`` uses it
too, with its groups drawn at the round start, equal shares and no timeouts). Member
order inside a group is the round's seeded shuffle; the position is the member's chunk
index. Part j (``counts[j]`` coordinates, from load balancing or the equal split) is
reduced by member j and cut into pieces of at most ``part_bytes`` (of the uncompressed
vector on the wire: with ``vector.wire_bytes``, of the real vector, each piece acting on
its share of the simulated coordinates, :meth:`~protocols._butterfly.ButterflySetup.pieces`).
Per piece p of part j:

- *request* flows a → j for every member a ≠ j, each after a's previous piece of part j
  (a stream: only its first piece pays the route latency, the next piece leaves as soon
  as the previous one went through), all opening the gate of piece p;
- *reply* flows j → i behind that gate (the reducer reduced the piece once every request
  ended), each after i's own request of the piece (no reply to a request that failed)
  and after j's previous reply to i: the replies to one sender are a stream on one
  connection, as hivemind's ``rpc_aggregate_part`` answers on the request's stream, so
  a reducer with a slow uplink queues its replies on each connection instead of
  sending every ready piece as a flow of its own (docs/design.md, "Replies are
  streams").

Flows start when the group assembles (:func:`group_butterfly`, ``schedule: async``: a
request leaves when its sender learns of the group). A request still in flight
``sender_timeout`` after it started, or a reply ``reducer_timeout`` after, is cancelled:
the receiver gave up on a slow member. Bytes are those of the compressed piece.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from protocols._butterfly import ButterflySetup, ShareCache
from protocols._load_balance import member_bandwidth_bytes_per_s
from protocols.contract import Flows


@dataclass(frozen=True)
class Matched:
    """Groups of one round's matchmaking: members in chunk order and assembly times."""

    groups: list[np.ndarray]
    start_s: np.ndarray  # (G,) seconds after the round start
    latest_s: float  # when the last group (formed or not) closed its matchmaking
    too_small: int = 0  # gatherings that closed under ``min_size`` and did not form


def matchmake(
    labels: np.ndarray,
    arrival_s: np.ndarray,
    rank: np.ndarray,
    size: int,
    min_size: int,
    wait_s: float,
) -> Matched:
    """Form the round's groups.

    Parameters
    ----------
    labels
        (n,) int key of every peer, -1 for peers not taking part (absent).
    arrival_s
        (n,) seconds after the round start at which each peer arrives.
    rank
        (n,) distinct ints: the round's seeded shuffle (ties in arrival, member order).
    size, min_size, wait_s
        ``group_size``, ``min_group_size`` and ``matchmaking_time``.
    """
    take = np.flatnonzero(labels >= 0)
    order = take[np.lexsort((rank[take], arrival_s[take], labels[take]))]
    key, arrive = labels[order].tolist(), arrival_s[order].tolist()
    groups, starts, latest, too_small = [], [], 0.0, 0
    i, n = 0, order.size
    while i < n:
        deadline = arrive[i] + wait_s
        j = i + 1
        while j < n and j - i < size and key[j] == key[i] and arrive[j] <= deadline:
            j += 1
        full = j - i == size
        at = arrive[j - 1] if full else deadline
        latest = max(latest, at)
        if j - i >= min_size:
            members = order[i:j]
            groups.append(members[np.argsort(rank[members], kind="stable")])
            starts.append(at)
        else:
            too_small += 1
        i = j
    return Matched(groups, np.asarray(starts, dtype=float), latest, too_small)


@dataclass(frozen=True)
class Butterfly:
    """One group's butterfly: its pieces and the layout of its flows in the round's plan.

    Request k goes from ``members[sender[k]]`` to the reducer of piece ``piece[k]``; the
    reply with the same k goes back. Requests are flows ``first .. first + K − 1``,
    replies ``first + K .. first + 2K − 1``.
    """

    members: np.ndarray  # (g,) rows, chunk order
    bounds: np.ndarray  # (P, 2) simulated coordinates of each piece
    reducer: np.ndarray  # (P,) position of each piece's reducer
    piece: np.ndarray  # (K,) piece of request k
    sender: np.ndarray  # (K,) position of the sender of request k
    first: int
    width: np.ndarray  # (P,) coordinates of each piece on the wire

    @property
    def n_requests(self) -> int:
        """K, the number of requests (= replies)."""
        return int(self.piece.size)


def group_bandwidth(upload: np.ndarray, download: np.ndarray) -> np.ndarray:
    """b_i = min(upload, download) of every peer, bytes/s (see ``_load_balance``)."""
    return member_bandwidth_bytes_per_s(upload, download)


def plan_groups(
    matched: Matched, shares: ShareCache, setup: ButterflySetup
) -> tuple[list[Butterfly], Flows]:
    """Butterflies and flows of every group that can average (has a possible reducer)."""
    plans, chunks, first, gate = [], [], 0, 0
    for members, start_s in zip(matched.groups, matched.start_s.tolist(), strict=True):
        counts = shares.counts(members)
        if counts is None:
            continue
        layout = _layout(counts, shares, setup)
        plan = Butterfly(
            members, layout.bounds, layout.reducer, layout.piece, layout.sender, first,
            layout.width,
        )  # fmt: skip
        chunks.append(_flows(plan, layout, gate, start_s))
        plans.append(plan)
        first += 2 * plan.n_requests
        gate += layout.bounds.shape[0]
    return plans, _concat(chunks)


@dataclass(frozen=True)
class _Layout:
    """What a group's butterfly and flows are for its part sizes, whoever its members:
    the pieces (:meth:`ButterflySetup.pieces`), each request's piece and sender, the
    request each request follows in its stream (-1: none; numbered from 0), and the
    flows' bytes, timeouts and streamed flags. Read-only: groups of two share one."""

    bounds: np.ndarray
    reducer: np.ndarray
    width: np.ndarray
    piece: np.ndarray
    sender: np.ndarray
    receiver: np.ndarray  # (K,) position of request k's reducer
    previous: np.ndarray  # (K,) request k follows (0 … K − 1), -1: none
    nbytes: np.ndarray  # (2K,)
    timeout_s: np.ndarray  # (2K,)
    streamed: np.ndarray  # (2K,)
    none: np.ndarray  # (K,) -1


def _layout(counts: np.ndarray, shares: ShareCache, setup: ButterflySetup) -> _Layout:
    """The layout of a group with these part sizes; a group of two (its parts depend
    only on who may reduce: :meth:`ShareCache.counts`) reuses the one of its sizes."""
    key = counts.tobytes() if counts.size <= 2 else None
    if key is not None and key in shares.layouts:
        return shares.layouts[key]
    bounds, reducer, first_piece, width = setup.pieces(counts)
    g = counts.size
    piece, sender = np.nonzero(np.arange(g)[None, :] != reducer[:, None])
    k = piece.size
    index = np.full((bounds.shape[0], g), -1, dtype=np.intp)
    index[piece, sender] = np.arange(k)
    previous = np.where(first_piece[piece], -1, index[np.maximum(piece - 1, 0), sender])
    piece_bytes = setup.wire.nbytes(width, setup.itemsize)
    layout = _Layout(
        bounds=bounds, reducer=reducer, width=width, piece=piece, sender=sender,
        receiver=reducer[piece], previous=previous,
        nbytes=np.tile(piece_bytes[piece], 2),
        timeout_s=np.repeat([setup.sender_timeout_s, setup.reducer_timeout_s], k),
        streamed=np.tile(previous >= 0, 2), none=np.full(k, -1, dtype=np.intp),
    )  # fmt: skip
    for array in vars(layout).values():
        array.flags.writeable = False
    if key is not None:
        shares.layouts[key] = layout
    return layout


def _flows(plan: Butterfly, layout: _Layout, gate0: int, start_s: float) -> Flows:
    k, first = plan.n_requests, plan.first
    chained = layout.previous >= 0
    previous = np.where(chained, layout.previous + first, -1)
    peer_s, peer_r = plan.members[layout.sender], plan.members[layout.receiver]
    none = layout.none
    return Flows(
        src=np.concatenate([peer_s, peer_r]),
        dst=np.concatenate([peer_r, peer_s]),
        nbytes=layout.nbytes,
        opens=np.concatenate([gate0 + layout.piece, none]),
        waits=np.concatenate([none, gate0 + layout.piece]),
        after=np.concatenate([previous, first + np.arange(k)]),
        start_s=np.full(2 * k, start_s),
        timeout_s=layout.timeout_s,
        streamed=layout.streamed,
        previous=np.concatenate([none, np.where(chained, previous + k, -1)]),
    )


def _concat(chunks: list[Flows]) -> Flows:
    if not chunks:
        empty_i, empty_f = np.zeros(0, dtype=np.intp), np.zeros(0)
        empty_b = np.zeros(0, dtype=bool)
        return Flows(
            empty_i, empty_i, empty_f, empty_i, empty_i, empty_i, empty_f, empty_f, empty_b,
            empty_i,
        )  # fmt: skip
    return Flows(
        *(np.concatenate([getattr(c, f) for c in chunks]) for f in Flows.__dataclass_fields__)
    )


def outcome(
    plan: Butterfly, delivered: np.ndarray, timed_out: np.ndarray, lost: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What happened in one group: (request_ok (K,), reply_ok (K,), failed (g,)).

    A member *failed* when it was preempted during the round, when a reducer gave up on
    its request (sender timeout) or a member gave up on its reply (reducer timeout).
    """
    k, first = plan.n_requests, plan.first
    request_ok = delivered[first : first + k]
    reply_ok = delivered[first + k : first + 2 * k]
    failed = lost[plan.members].copy()
    failed[plan.sender[timed_out[first : first + k]]] = True
    failed[plan.reducer[plan.piece[timed_out[first + k : first + 2 * k]]]] = True
    return request_ok, reply_ok, failed


def contributions(
    plan: Butterfly, request_ok: np.ndarray, reply_ok: np.ndarray, lost_members: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``partial`` fault model: (contributes (P, g), receives (P, g)) from the flows.

    A piece averages its reducer and every sender whose request arrived; a member ends
    with the piece's mean when the reply arrived (the reducer: when it was not lost).
    Lost members keep their vectors.
    """
    n_pieces, g = plan.bounds.shape[0], plan.members.size
    own = np.zeros((n_pieces, g), dtype=bool)
    own[np.arange(n_pieces), plan.reducer] = True
    contributes, receives = own.copy(), own & ~lost_members[None, :]
    contributes[plan.piece, plan.sender] = request_ok
    receives[plan.piece, plan.sender] = reply_ok & ~lost_members[plan.sender]
    return contributes, receives


def everyone_but(plan: Butterfly, failed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``idealized``: every piece averages, and reaches, the members that did not fail."""
    mask = np.broadcast_to(~failed[None, :], (plan.bounds.shape[0], plan.members.size))
    return mask, mask


def timeout_or_inf(value: float | None) -> float:
    """A timeout in seconds, ``inf`` for none."""
    return math.inf if value is None else float(value)


def group_butterfly(
    members: np.ndarray, notify_s: np.ndarray, shares: ShareCache, setup: ButterflySetup
) -> tuple[Butterfly | None, Flows]:
    """One group's butterfly under ``schedule: async`` (``members`` in chunk order): its
    plan (None when no member can reduce) and flows, whose requests leave when their
    sender learns of the group, ``notify_s`` ((g,) seconds after the assembly)."""
    plans, flows = plan_groups(Matched([members], np.zeros(1), 0.0), shares, setup)
    if not plans:
        return None, flows
    plan = plans[0]
    assert flows.start_s is not None
    flows.start_s[: plan.n_requests] = notify_s[plan.sender]
    return plan, flows
