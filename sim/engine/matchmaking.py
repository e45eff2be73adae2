"""hivemind's matchmaking in simulated time (``schedule: async``).

A peer that wants to average *declares* itself under its group key with an expiration,
now + ``matchmaking_time`` capped at its step's deadline. The declaration becomes
visible to the others ``matchmaking_latency`` (L) later, and the peer's own lookup
returns then. It asks the looking peers that rank earlier, by (expiration, DHT id), to
lead it: one at a time, earliest first, never the same declaration twice. A leader
accepts a request when it still leads (follows nobody), has the same key, an expiration
no later than the requester's, has not expired and has room; it assembles at once when
full. At its expiration it assembles with at least ``min_group_size`` members, or
disbands and declares again (a failed step once its deadline has passed). A leader that
is itself accepted by an earlier leader disbands its followers and redirects them to
that leader. Control messages (requests, replies, BEGIN, DISBANDED) take one route
latency each and move no bytes. Requests that reach a leader at one instant are decided
in rank order. A peer with no candidate waits; it is woken L after any newer declaration
that ranks earlier (instead of hivemind's polling). Client-mode peers never declare:
they only ask others to lead. A preempted peer's board entry stays until it expires
(requests to it are refused); its followers notice one route latency later.

Every transition is a SimPy timeout callback carrying the peer's token; a callback of a
stale token (the peer was preempted, or started a new attempt) does nothing, so an
interruption never lands mid-transition. A search finds its leader through a per-key
index of the board (:mod:`sim.engine._board_index`, O(log B) amortised); :data:`ENABLED`
False scans and sorts the key's whole board instead (the reference: the same leader).
The design's decisions: ``docs/design.md``, "Asynchronous swarms".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from protocols.contract import Matchmaking
from sim.engine._board_index import Entry as _Entry
from sim.engine._board_index import KeyIndex, Rank

LOOKING, REQUESTING, FOLLOWING, DONE = "looking", "requesting", "following", "done"
#: The switch, read when a :class:`Matchmaker` is built: True finds a search's leader
#: with a per-key index (:mod:`sim.engine._board_index`), False by scanning and sorting
#: the key's whole board (the reference; the same leader every time).
ENABLED = True

#: ``order(leader, members sorted by peer, rng, group_size) -> (members, chunks)``.
Order = Callable[[int, np.ndarray, np.random.Generator, int], tuple[np.ndarray, np.ndarray]]


def hivemind_order(
    leader: int, members: np.ndarray, rng: np.random.Generator, group_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """The leader's shuffle of ``members`` (sorted by peer, so that the draw does not
    depend on the order of acceptance), and each position's new key index: the p-th of
    g distinct buckets drawn from range(max(group_size, g)) (hivemind's generalized
    index), so that under-filled groups spread over all the buckets."""
    order = members[rng.permutation(members.size)]
    chunks = rng.choice(max(group_size, members.size), size=members.size, replace=False)
    return order, chunks


@dataclass
class Assembled:
    """A group as its leader assembled it."""

    id: tuple[int, int]  # (leader, how many groups it led before)
    leader: int
    key: int
    members: np.ndarray  # (g,) peers, chunk order
    chunks: np.ndarray  # (g,) each member's new key index
    notify_s: np.ndarray  # (g,) seconds from the assembly until the member knows (leader 0)
    at_s: float
    #: Set by ``on_assembled``: the engine's record of the group's all-reduce.
    handle: Any = None


@dataclass
class _Seeker:  # one peer's matchmaking for one step
    peer: int
    key: int
    deadline: float
    result: simpy.Event
    token: int
    expiration: float = math.inf
    rank: Rank = (math.inf, 0)
    state: str = LOOKING
    leader: int | None = None
    followers: list[tuple[int, int]] = field(default_factory=list)  # (peer, its token)
    tried: set[tuple[int, float]] = field(default_factory=set)
    first: bool = True


@dataclass(frozen=True)
class _Request:
    peer: int
    key: int
    expiration: float
    rank: Rank
    token: int


class Matchmaker:
    """The board and every peer's attempt; one per run.

    Parameters
    ----------
    env
        The run's environment.
    rules
        The protocol's :class:`~protocols.contract.Matchmaking`.
    key_of
        ``key_of(peer)``: the key the peer declares itself under now.
    route_s
        ``route_s(a, b)``: seconds a control message takes from a to b.
    dht_s
        (n,) L of every peer, seconds.
    ids
        (n,) distinct DHT ids (ties in expiration).
    client
        (n,) bool, client-mode peers (they never declare).
    present
        (n,) bool, shared with churn (a leader that is absent refuses).
    rng_of
        ``rng_of(leader)``: the leader's own generator (its shuffles).
    on_assembled
        Called with each :class:`Assembled` group at its assembly.
    order
        The leader's shuffle (:func:`hivemind_order`; tests inject barrier's).
    on_too_small
        Called when a leader's gathering closes under ``min_group_size``.
    """

    def __init__(
        self,
        env: simpy.Environment,
        rules: Matchmaking,
        key_of: Callable[[int], int],
        route_s: Callable[[int, int], float],
        dht_s: np.ndarray,
        ids: np.ndarray,
        client: np.ndarray,
        present: np.ndarray,
        rng_of: Callable[[int], np.random.Generator],
        on_assembled: Callable[[Assembled], None],
        order: Order = hivemind_order,
        on_too_small: Callable[[], None] | None = None,
    ) -> None:
        self.env, self.rules, self.key_of, self.route_s = env, rules, key_of, route_s
        self.dht_s, self.ids, self.client, self.present = dht_s, ids, client, present
        self.rng_of, self.on_assembled, self.order = rng_of, on_assembled, order
        self.on_too_small = on_too_small
        self.board: dict[int, dict[int, _Entry]] = {}
        #: Each key's index of its board (None: the switch was off, scan the board).
        self.index: dict[int, KeyIndex] | None = {} if ENABLED else None
        self.seekers: dict[int, _Seeker] = {}
        self.waiters: dict[int, set[int]] = {}
        self.inbox: dict[int, list[_Request]] = {}
        n = ids.size
        self.led = np.zeros(n, dtype=np.int64)
        self.tokens = np.zeros(n, dtype=np.int64)
        #: Declarations in each peer's current (or last) attempt.
        self.attempts = np.zeros(n, dtype=np.int64)
        self.counts = dict.fromkeys(
            ("declarations", "requests", "rejected", "disbanded", "assembled", "messages"), 0
        )
        #: Tests: called with (peer, time, expiration, deadline) at every declaration.
        self.on_declare: Callable[[int, float, float, float], None] | None = None

    # -- the peer's side -------------------------------------------------------------------
    def seek(self, peer: int, deadline: float) -> simpy.Event:
        """Start a step's matchmaking for ``peer``: the event succeeds with its
        :class:`Assembled` group, or with None once ``deadline`` has passed without
        one (its first declaration is always made)."""
        self.tokens[peer] += 1
        s = _Seeker(peer, self.key_of(peer), deadline, self.env.event(), int(self.tokens[peer]))
        self.seekers[peer] = s
        self.attempts[peer] = 0
        self._declare(s)
        return s.result

    def abandon(self, peer: int) -> None:
        """``peer`` was preempted: its attempt ends now (its event never fires); its
        followers notice a route latency later; its board entry stays until it expires."""
        self.tokens[peer] += 1
        s = self.seekers.pop(peer, None)
        if s is None:
            return
        self.waiters.get(s.key, set()).discard(peer)
        self._disband(s, None)

    # -- internals -------------------------------------------------------------------------
    def _later(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        self.env.timeout(delay).callbacks.append(lambda _event: fn(*args))

    def _message(self, a: int, b: int, fn: Callable[..., None], *args: Any) -> None:
        """A control message from a to b: ``fn(*args)`` one route latency later."""
        self.counts["messages"] += 1
        self._later(self.route_s(a, b), fn, *args)

    def _live(self, peer: int, token: int) -> _Seeker | None:
        s = self.seekers.get(peer)
        return s if s is not None and s.token == token else None

    def _declare(self, s: _Seeker) -> None:
        now = float(self.env.now)
        if not s.first and now >= s.deadline:
            self._finish(s, None)  # a failed step
            return
        s.first = False
        s.expiration = now + self.rules.time_s
        if s.deadline > now:
            s.expiration = min(s.expiration, s.deadline)
        s.rank = (s.expiration, int(self.ids[s.peer]))
        s.state, s.leader, s.tried = LOOKING, None, set()
        latency = float(self.dht_s[s.peer])
        self.counts["declarations"] += 1
        self.attempts[s.peer] += 1
        if self.on_declare is not None:
            self.on_declare(s.peer, now, s.expiration, s.deadline)
        if not self.client[s.peer]:  # client-mode peers never lead: they do not declare
            entry = _Entry(s.expiration, s.rank, now + latency)
            self.board.setdefault(s.key, {})[s.peer] = entry
            if self.index is not None:
                self.index.setdefault(s.key, KeyIndex()).add(s.peer, entry)
            for w in sorted(self.waiters.get(s.key, ())):  # wake who ranks after us
                ws = self.seekers.get(w)
                if ws is not None and ws.rank > s.rank:
                    self._later(latency + float(self.dht_s[w]), self._search, w, ws.token)
        self._later(latency, self._search, s.peer, s.token)
        self._later(s.expiration - now, self._expire, s.peer, s.token, s.expiration)

    def _first(self, s: _Seeker) -> tuple[Rank, int] | None:
        """The earliest-ranked declaration ``s`` may ask to lead it now, or None."""
        if self.index is None:
            found = self._candidates(s)
            return found[0] if found else None
        index = self.index.get(s.key)
        if index is None:
            return None
        return index.first(float(self.env.now), s.peer, s.rank, s.tried, self.board[s.key])

    def _candidates(self, s: _Seeker) -> list[tuple[Rank, int]]:
        """Every declaration ``s`` may ask now, earliest first (the reference scan)."""
        now = float(self.env.now)
        return sorted(
            (e.rank, peer)
            for peer, e in self.board.get(s.key, {}).items()
            if peer != s.peer
            and e.visible_s <= now < e.withdrawn_s
            and e.expiration > now
            and e.rank < s.rank
            and (peer, e.expiration) not in s.tried
        )

    def _search(self, peer: int, token: int) -> None:
        s = self._live(peer, token)
        if s is None or s.state != LOOKING:
            return
        self.waiters.get(s.key, set()).discard(peer)
        if self.env.now >= s.expiration:
            self._expire(peer, token, s.expiration)
            return
        found = self._first(s)
        if found is None:  # wait: for our expiration, or an earlier newcomer
            self.waiters.setdefault(s.key, set()).add(peer)
            return
        rank, leader = found
        s.tried.add((leader, rank[0]))
        self._request(s, leader)

    def _request(self, s: _Seeker, leader: int) -> None:
        s.state = REQUESTING
        self.counts["requests"] += 1
        request = _Request(s.peer, s.key, s.expiration, s.rank, s.token)
        self._message(s.peer, leader, self._arrive, leader, request)

    def _arrive(self, leader: int, request: _Request) -> None:
        box = self.inbox.setdefault(leader, [])
        box.append(request)
        if len(box) == 1:  # decide once every request of this instant is in
            self._later(0.0, self._decide, leader)

    def _decide(self, leader: int) -> None:
        for request in sorted(self.inbox.pop(leader), key=lambda r: r.rank):
            lead = self.seekers.get(leader)
            accepted = lead is not None and self._accepts(lead, request)
            if lead is not None and accepted:
                lead.followers.append((request.peer, request.token))
            else:
                self.counts["rejected"] += 1
            reply = (self._reply, request.peer, request.token, leader, accepted)
            self._message(leader, request.peer, *reply)
            if lead is not None and accepted and self._full(lead) and lead.state == LOOKING:
                self._assemble(lead)

    def _accepts(self, s: _Seeker, r: _Request) -> bool:
        self._prune(s)
        return (
            bool(self.present[s.peer])
            and s.state in (LOOKING, REQUESTING)
            and s.leader is None
            and s.key == r.key
            and s.expiration <= r.expiration
            and self.env.now < s.expiration
            and not self._full(s)
            and all(peer != r.peer for peer, _ in s.followers)
            and not (self.present[r.peer] and self.tokens[r.peer] != r.token)  # came back
        )

    def _full(self, s: _Seeker) -> bool:
        return len(s.followers) + 1 >= self.rules.group_size

    def _prune(self, s: _Seeker) -> None:
        """Drop followers that were preempted and came back since they joined: the new
        incarnation is not the member the leader accepted (an absent one stays, lost
        inside the all-reduce)."""
        s.followers = [
            (p, t) for p, t in s.followers if not (self.present[p] and self.tokens[p] != t)
        ]

    def _reply(self, peer: int, token: int, leader: int, accepted: bool) -> None:
        s = self._live(peer, token)
        if s is None or s.state != REQUESTING:
            return
        if not accepted:
            s.state = LOOKING
            self._prune(s)
            if self._full(s):  # filled up while it waited for this reply
                self._assemble(s)
            else:
                self._search(peer, token)
            return
        s.state, s.leader = FOLLOWING, leader
        self.waiters.get(s.key, set()).discard(peer)
        self._disband(s, leader)  # hand my followers to my leader

    def _expire(self, peer: int, token: int, expiration: float) -> None:
        s = self._live(peer, token)
        if s is None or s.state != LOOKING or s.expiration != expiration:
            return
        if self.client[peer]:  # it never led: nothing to assemble or disband
            self._declare(s)
            return
        self._prune(s)
        if len(s.followers) + 1 >= self.rules.min_group_size:
            self._assemble(s)
            return
        self._disband(s, None)
        self.counts["disbanded"] += 1
        if self.on_too_small is not None:
            self.on_too_small()
        self._withdraw([s.peer])
        self._declare(s)  # retry, or fail past the deadline

    def _disband(self, s: _Seeker, redirect: int | None) -> None:
        for f, _ in s.followers:
            self._message(s.peer, f, self._disbanded, f, s.peer, redirect)
        s.followers = []

    def _disbanded(self, peer: int, leader: int, redirect: int | None) -> None:
        s = self.seekers.get(peer)
        if s is None or s.state != FOLLOWING or s.leader != leader:
            return
        s.leader = None
        if redirect is not None and redirect != peer and self.env.now < s.expiration:
            entry = self.board.get(s.key, {}).get(redirect)
            s.tried.add((redirect, entry.expiration if entry else math.inf))
            self._request(s, redirect)
            return
        s.state = LOOKING
        self._search(peer, s.token)

    def _withdraw(self, peers: list[int]) -> None:
        """``peers`` are not looking any more (visible L later)."""
        now = float(self.env.now)
        for p in peers:
            s = self.seekers.get(p)
            entry = self.board.get(s.key if s is not None else self.key_of(p), {}).get(p)
            if entry is not None:
                entry.withdrawn_s = min(entry.withdrawn_s, now + float(self.dht_s[p]))

    def _assemble(self, s: _Seeker) -> None:
        members = np.sort(np.array([s.peer, *(p for p, _ in s.followers)], dtype=np.int64))
        order, chunks = self.order(s.peer, members, self.rng_of(s.peer), self.rules.group_size)
        notify = np.array([0.0 if m == s.peer else self.route_s(s.peer, m) for m in order.tolist()])
        now = float(self.env.now)
        group = Assembled(
            (s.peer, int(self.led[s.peer])), s.peer, s.key, order, chunks, notify, now
        )
        self.led[s.peer] += 1
        self.counts["assembled"] += 1
        self.counts["messages"] += members.size - 1  # BEGIN to every follower
        self._withdraw(order.tolist())
        tokens = dict(s.followers)
        tokens[s.peer] = s.token
        s.followers = []  # they are its members now
        for m, delay in zip(order.tolist(), notify.tolist(), strict=True):
            ms = self._live(m, tokens[m])
            if ms is None:
                continue  # preempted after it joined: lost inside the all-reduce
            ms.state = DONE
            self.waiters.get(ms.key, set()).discard(m)
            if delay == 0.0:
                self._finish(ms, group)
            else:
                self._later(delay, self._begin, m, ms.token, group)
        self.on_assembled(group)

    def _begin(self, peer: int, token: int, group: Assembled) -> None:
        s = self._live(peer, token)
        if s is not None:
            self._finish(s, group)

    def _finish(self, s: _Seeker, group: Assembled | None) -> None:
        """The attempt ends (a group, or None); followers it accepted while it waited for
        its own reply, if any, are disbanded (it joined another group)."""
        self._disband(s, None)
        if self.seekers.get(s.peer) is s:
            del self.seekers[s.peer]
        self.waiters.get(s.key, set()).discard(s.peer)
        s.state = DONE
        s.result.succeed(group)
