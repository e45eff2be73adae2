"""One key's matchmaking board, indexed by rank (:mod:`sim.engine.matchmaking`).

A search asks for the earliest-ranked declaration under a key that the seeker may ask
to lead it: visible (``visible_s <= now < withdrawn_s``), not expired
(``expiration > now``), ranked before the seeker, not the seeker's own and not one it
already tried. Scanning and sorting the whole board at every search costs O(B log B)
for a board of B declarations (O(N²) over a run); :class:`KeyIndex` answers the same
question from two heaps:

- ``pending``: declarations not visible yet, by ``visible_s``; a search first moves the
  ones that became visible into ``heap``;
- ``heap``: visible declarations, by rank. A declaration that can never pass again
  (expired, withdrawn, or replaced on the board by the peer's newer declaration) is
  dropped when it reaches the top: time only moves forward, a withdrawal only comes
  earlier and a replaced declaration never returns. The seeker's own and its tried
  declarations are set aside while the search looks further, then pushed back.

A search costs O((1 + d + t) log B): d dead declarations dropped for good (amortised
against their pushes) and t of the seeker's tried ones stepped over. It returns the
scan's first candidate exactly (ranks are distinct: (expiration, distinct DHT id)).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

Rank = tuple[float, int]


@dataclass
class Entry:
    """One declaration on the board (the DHT)."""

    expiration: float
    rank: Rank
    visible_s: float
    withdrawn_s: float = math.inf


class KeyIndex:
    """The declarations made under one key, for :meth:`first`."""

    __slots__ = ("heap", "pending", "seq")

    def __init__(self) -> None:
        self.heap: list[tuple[Rank, int, int, Entry]] = []  # (rank, seq, peer, entry)
        self.pending: list[tuple[float, int, int, Entry]] = []  # (visible_s, seq, ...)
        self.seq = 0  # ties (one peer's two declarations of equal rank) never compare entries

    def add(self, peer: int, entry: Entry) -> None:
        """``peer`` declared ``entry`` (it replaces the peer's earlier one on the board)."""
        self.seq += 1
        heapq.heappush(self.pending, (entry.visible_s, self.seq, peer, entry))

    def first(
        self,
        now: float,
        seeker: int,
        rank: Rank,
        tried: set[tuple[int, float]],
        current: dict[int, Entry],
    ) -> tuple[Rank, int] | None:
        """The earliest ``(rank, peer)`` that ``seeker`` (ranked ``rank``, having tried
        ``tried``) may ask at ``now``, or None; ``current`` is the key's board (each
        peer's latest declaration)."""
        pending, heap = self.pending, self.heap
        while pending and pending[0][0] <= now:
            _, seq, peer, entry = heapq.heappop(pending)
            heapq.heappush(heap, (entry.rank, seq, peer, entry))
        aside = []
        found = None
        while heap:
            top = heap[0]
            r, _, peer, entry = top
            if not r < rank:
                break
            if (
                current.get(peer) is not entry
                or now >= entry.withdrawn_s
                or entry.expiration <= now
            ):
                heapq.heappop(heap)  # dead for good
            elif peer == seeker or (peer, entry.expiration) in tried:
                aside.append(heapq.heappop(heap))
            else:
                found = (r, peer)
                break
        for item in aside:
            heapq.heappush(heap, item)
        return found

    def __len__(self) -> int:
        return len(self.heap) + len(self.pending)
