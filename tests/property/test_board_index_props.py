"""The matchmaking board's index (:mod:`sim.engine._board_index`) against the scan.

A search must ask the same leader as the straightforward scan of the key's board
(``Matchmaker._candidates``, kept as the reference behind
``sim.engine.matchmaking.ENABLED``). Checked on drawn histories of one key: declarations
(replacing a peer's earlier one) that become visible later, withdrawals that take effect
later, expirations, time steps of zero (ties on every bound), and searches by seekers of
drawn ranks that remember what they tried, several at one instant. Then whole
matchmaking swarms (drawn as in ``test_matchmaking_props``, with preemptions) run with
the switch on and off: the same declarations, groups, outcomes and counters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine import matchmaking
from sim.engine._board_index import Entry, KeyIndex, Rank
from tests.property import test_matchmaking_props as props
from tests.property.test_matchmaking_props import Swarm, simulate, swarms

STEPS = [0.0, 0.0, 0.25, 0.5, 1.0]  # time steps; zero often, so bounds tie with now
DELAYS = [0.0, 0.25, 0.5, 1.0, 2.0]  # expirations, visibility and withdrawal delays


def scan(
    board: dict[int, Entry], now: float, seeker: int, rank: Rank, tried: set[tuple[int, float]]
) -> tuple[Rank, int] | None:
    """The reference: the filter of ``Matchmaker._candidates``, the first after sorting."""
    found = sorted(
        (e.rank, peer)
        for peer, e in board.items()
        if peer != seeker
        and e.visible_s <= now < e.withdrawn_s
        and e.expiration > now
        and e.rank < rank
        and (peer, e.expiration) not in tried
    )
    return found[0] if found else None


@dataclass
class History:
    """One key's board, its index, and every seeker's tried set."""

    ids: list[int]
    now: float = 0.0
    board: dict[int, Entry] = field(default_factory=dict)
    index: KeyIndex = field(default_factory=KeyIndex)
    tried: dict[int, set[tuple[int, float]]] = field(default_factory=dict)
    searches: int = 0
    found: int = 0

    def declare(self, peer: int, expires: float, latency: float) -> None:
        expiration = self.now + expires
        entry = Entry(expiration, (expiration, self.ids[peer]), self.now + latency)
        self.board[peer] = entry
        self.index.add(peer, entry)
        self.tried[peer] = set()  # a new declaration starts a new search

    def withdraw(self, peer: int, delay: float) -> None:
        entry = self.board.get(peer)
        if entry is not None:
            entry.withdrawn_s = min(entry.withdrawn_s, self.now + delay)

    def search(self, seeker: int, ahead: float, extra: list[int]) -> None:
        """``seeker`` ranked ``ahead`` after now searches; ``extra`` peers' current
        declarations (and a redirect's ``inf``) are added to what it tried first."""
        own = self.board.get(seeker)
        rank = (
            own.rank if own is not None and ahead < 0 else (self.now + abs(ahead), self.ids[seeker])
        )
        tried = self.tried.setdefault(seeker, set())
        for peer in extra:
            entry = self.board.get(peer)
            tried.add((peer, entry.expiration if entry is not None else math.inf))
        expected = scan(self.board, self.now, seeker, rank, tried)
        assert self.index.first(self.now, seeker, rank, tried, self.board) == expected
        self.searches += 1
        if expected is not None:
            self.found += 1
            tried.add((expected[1], expected[0][0]))  # as _search does


PEERS = 8
operations = st.one_of(
    st.tuples(
        st.just("declare"),
        st.integers(0, PEERS - 1),
        st.sampled_from(DELAYS),
        st.sampled_from(DELAYS),
    ),
    st.tuples(st.just("withdraw"), st.integers(0, PEERS - 1), st.sampled_from(DELAYS)),
    st.tuples(st.just("advance"), st.sampled_from(STEPS)),
    st.tuples(
        st.just("search"),
        st.integers(0, PEERS - 1),
        st.sampled_from([-1.0, *DELAYS, 5.0]),  # negative: the seeker's own declaration
        st.lists(st.integers(0, PEERS - 1), max_size=3),
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    ids=st.permutations(range(PEERS)),
    ops=st.lists(operations, min_size=1, max_size=80),
)
def test_the_index_finds_the_scans_first_candidate(ids, ops):
    h = History(list(ids))
    for op in ops:
        if op[0] == "declare":
            h.declare(op[1], op[2], op[3])
        elif op[0] == "withdraw":
            h.withdraw(op[1], op[2])
        elif op[0] == "advance":
            h.now += op[1]
        else:
            h.search(op[1], op[2], op[3])
    # and once more every seeker, at the end
    for seeker in range(PEERS):
        h.search(seeker, 5.0, [])


def test_each_filter_of_the_scan_holds_in_the_index():
    """A pinned history: a later-visible declaration, a withdrawal taking effect later,
    an expiration, a replaced declaration, the seeker's own and its tried ones."""
    h = History(list(range(PEERS)))
    h.declare(1, 2.0, 0.0)  # rank (2, 1)
    h.declare(2, 1.0, 0.5)  # rank (1, 2), visible at 0.5
    h.declare(3, 1.5, 0.0)  # rank (1.5, 3)
    h.declare(0, 0.5, 0.0)  # rank (0.5, 0), the seeker's own below
    index, board = h.index, h.board
    seeker_rank = (3.0, 7)
    assert index.first(0.0, 7, seeker_rank, set(), board) == ((0.5, 0), 0)
    assert index.first(0.0, 0, seeker_rank, set(), board) == ((1.5, 3), 3)  # not its own
    h.now = 0.5  # 0 expired, 2 visible
    assert index.first(0.5, 7, seeker_rank, set(), board) == ((1.0, 2), 2)
    assert index.first(0.5, 7, seeker_rank, {(2, 1.0)}, board) == ((1.5, 3), 3)
    assert index.first(0.5, 7, (1.2, 7), {(2, 1.0)}, board) is None  # ranks after it
    h.withdraw(2, 0.25)  # gone at 0.75
    assert index.first(0.5, 7, seeker_rank, set(), board) == ((1.0, 2), 2)
    assert index.first(0.75, 7, seeker_rank, set(), board) == ((1.5, 3), 3)
    h.now = 0.75
    h.declare(3, 2.0, 0.25)  # replaces (1.5, 3); visible at 1.0
    assert index.first(0.75, 7, seeker_rank, set(), board) == ((2.0, 1), 1)
    assert index.first(1.0, 7, seeker_rank, set(), board) == ((2.0, 1), 1)  # id 1 < 3
    assert index.first(1.0, 7, seeker_rank, {(1, 2.0)}, board) == ((2.75, 3), 3)
    assert index.first(2.75, 7, seeker_rank, set(), board) is None  # all expired
    assert len(index) == 0  # the dead ones were dropped


FIELDS = ("n", "keys", "rules", "dht_s", "route", "client", "start_s", "duration_s", "outages")


def run_swarm(swarm: Swarm, seed: int, indexed: bool) -> tuple[Swarm, matchmaking.Matchmaker]:
    """A fresh copy of ``swarm`` simulated with the switch set; and its matchmaker (the
    reference scan must run only with the switch off)."""
    makers: list[matchmaking.Matchmaker] = []

    class Recorded(matchmaking.Matchmaker):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            makers.append(self)

        def _candidates(self, s: Any) -> Any:
            assert not indexed
            return super()._candidates(s)

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(matchmaking, "ENABLED", indexed)
        monkeypatch.setattr(props, "Matchmaker", Recorded)
        out = simulate(Swarm(**{k: getattr(swarm, k) for k in FIELDS}), seed)
    (maker,) = makers
    assert (maker.index is not None) == indexed
    return out, maker


def groups_of(s: Swarm) -> list[tuple[object, ...]]:
    return [
        (
            g.id,
            g.leader,
            g.key,
            g.members.tolist(),
            g.chunks.tolist(),
            g.notify_s.tolist(),
            g.at_s,
            end,
        )
        for g, end in s.groups
    ]


def outcomes_of(s: Swarm) -> list[tuple[object, ...]]:
    return [
        (p, start, deadline, None if o is None else (o[0], None if o[1] is None else o[1].id))
        for p, start, deadline, o in s.seeks
    ]


@settings(max_examples=80, deadline=None)
@given(swarm=swarms(), seed=st.integers(0, 2**16))
def test_swarms_are_the_same_with_and_without_the_index(swarm, seed):
    scanned, reference = run_swarm(swarm, seed, False)
    indexed, maker = run_swarm(swarm, seed, True)
    assert maker.counts == reference.counts
    for name in ("led", "tokens", "attempts"):
        assert np.array_equal(getattr(maker, name), getattr(reference, name)), name
    assert indexed.declared == scanned.declared
    assert groups_of(indexed) == groups_of(scanned)
    assert outcomes_of(indexed) == outcomes_of(scanned)
    assert indexed.down_s == scanned.down_s
    assert np.array_equal(indexed.ids, scanned.ids)  # type: ignore[attr-defined]
