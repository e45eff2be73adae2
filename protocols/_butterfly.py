"""Butterfly all-reduce inside groups: parts, pieces, and its arithmetic on a wire.

With g members and equal shares, member b reduces part b (S/g bytes). Reduce-scatter
(phase 0): every member a sends part b to member b, for every b ≠ a. All-gather
(phase 1): every reducer b sends its reduced part to every other member. Per direction
each member moves S·(1 + (g−2)/g) bytes, and the whole group 2·(g−1)·S bytes.

Part sizes in whole coordinates come from a :class:`ShareCache` (equal shares, or
moshpit's load balancing); :meth:`ButterflySetup.pieces` cuts parts into pieces of at
most ``part_bytes`` (:data:`PART_BYTES`, hivemind's 512 KiB, unless moshpit's
``part_bytes`` says otherwise); :func:`compressed_round` is the rounds
clock's arithmetic through a lossy wire (``random_groups``, ``moshpit``). The flows of
both protocols on the network clock come from one planner,
:func:`protocols._moshpit_net.plan_groups` (parts streamed in pieces, one gate per piece,
start times and timeouts).

With ``vector.wire_bytes`` the vector on the wire has more coordinates than the
simulated one: parts are cut into pieces on the wire (``part_bytes`` of the real vector,
the wire's bytes of the real coordinates), and each piece acts on the simulated
coordinates whose first wire coordinate it carries
(:func:`protocols.contract.simulated_offsets`), so a piece lost costs its proportional
share of the simulated part. The arithmetic then takes runs of consecutive pieces of a
part that share their fate as one piece (:func:`merged`): a sample of a few coordinates
per piece would otherwise be quantized on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from protocols._load_balance import lp_shares, part_bounds, whole_coordinates
from protocols.contract import simulated_offsets, wire_offsets
from sim.kernels import Groups
from sim.kernels.butterfly import butterfly_pieces
from sim.kernels.compression import Wire

#: Bytes of the uncompressed vector per piece: hivemind's ``part_size_bytes`` (512 KiB),
#: moshpit's default ``part_bytes`` and random_groups' piece size on the network clock.
PART_BYTES = 512 * 1024


@dataclass(frozen=True)
class ButterflySetup:
    """What the butterfly needs to know about the vector and the links.

    ``wire_coords`` is the coordinates of a whole vector on the wire
    (:attr:`protocols.contract.Context.wire_coords`); None: ``dim``.
    """

    dim: int
    itemsize: int
    part_bytes: int
    wire: Wire
    sender_timeout_s: float = math.inf
    reducer_timeout_s: float = math.inf
    wire_coords: int | None = None

    @property
    def piece_coords(self) -> int:
        """Coordinates on the wire per piece (at least one)."""
        return max(1, self.part_bytes // self.itemsize)

    @property
    def sampled(self) -> bool:
        """True when the wire carries more coordinates than are simulated."""
        return self.wire_coords is not None and self.wire_coords != self.dim

    def pieces(self, counts: np.ndarray) -> tuple[np.ndarray, ...]:
        """Parts of ``counts`` simulated coordinates cut into pieces of at most
        :attr:`piece_coords` wire coordinates: (bounds (P, 2) simulated coordinates,
        reducer (P,), first (P,) bool, width (P,) int64 wire coordinates of each piece);
        see :func:`pieces_of`. Without ``wire_coords`` the bounds are the pieces' own
        coordinates and ``width`` their width."""
        if not self.sampled:
            bounds, reducer, first = pieces_of(counts, self.piece_coords)
            return bounds, reducer, first, bounds[:, 1] - bounds[:, 0]
        assert self.wire_coords is not None
        dim, wire_coords = self.dim, self.wire_coords
        starts, stops = part_bounds(counts)
        wire_counts = wire_offsets(stops, dim, wire_coords) - wire_offsets(starts, dim, wire_coords)
        on_wire, reducer, first = pieces_of(wire_counts, self.piece_coords)
        bounds = simulated_offsets(on_wire, dim, wire_coords)
        return bounds, reducer, first, on_wire[:, 1] - on_wire[:, 0]


class ShareCache:
    """Part sizes per group composition (the LP is solved once per multiset of members)."""

    def __init__(self, bandwidth: np.ndarray, reducer: np.ndarray, dim: int, balance: bool) -> None:
        self.bandwidth, self.reducer, self.dim, self.balance = bandwidth, reducer, dim, balance
        self._cache: dict[bytes, np.ndarray] = {}
        #: the butterfly layouts of groups of two, by part sizes
        #: (:func:`protocols._moshpit_net.plan_groups`)
        self.layouts: dict[bytes, Any] = {}

    def counts(self, members: np.ndarray) -> np.ndarray | None:
        """(g,) coordinates each member reduces; None when no member can reduce."""
        b, can = self.bandwidth[members], self.reducer[members]
        order = np.lexsort((can, b))
        b, can = b[order], can[order]
        if members.size <= 2:  # every split takes one time: only who can reduce tells
            key = b"two" + (b > 0).tobytes() + can.tobytes()
        else:
            key = b.tobytes() + can.tobytes()
        sorted_counts = self._cache.get(key)
        if sorted_counts is None:
            sorted_counts = self._solve(b, can)
            self._cache[key] = sorted_counts
        if sorted_counts.size == 0:
            return None
        counts = np.empty_like(sorted_counts)
        counts[order] = sorted_counts
        return counts

    def _solve(self, bandwidth: np.ndarray, can: np.ndarray) -> np.ndarray:
        eligible = can & (bandwidth > 0)
        if not eligible.any():
            return np.zeros(0, dtype=np.int64)
        if self.balance:
            shares = lp_shares(bandwidth, float(self.dim), reducer=can)
        else:
            shares = eligible / eligible.sum()
        return whole_coordinates(shares, self.dim)


def pieces_of(counts: np.ndarray, piece_coords: int) -> tuple[np.ndarray, ...]:
    """Parts of ``counts`` coordinates cut into pieces of at most ``piece_coords``:
    (bounds (P, 2), reducer (P,): position of the part's reducer, first (P,) bool: the
    first piece of its part)."""
    starts, stops = part_bounds(counts)
    n_pieces = -(-counts // piece_coords)
    reducer = np.repeat(np.arange(counts.size), n_pieces)
    k = np.arange(reducer.size) - np.repeat(np.cumsum(n_pieces) - n_pieces, n_pieces)
    lo = starts[reducer] + k * piece_coords
    hi = np.minimum(lo + piece_coords, stops[reducer])
    return np.stack([lo, hi], axis=1), reducer, k == 0


def equal_pieces_per_part(dim: int, group_size: int, piece_coords: int) -> float:
    """Mean pieces per part when ``dim`` coordinates are split equally over
    ``group_size`` parts (⌊dim/g⌋ or one more) and cut into pieces of ``piece_coords``;
    an empty part (dim < g) has none."""
    q, r = divmod(dim, max(1, group_size))
    whole = r * -(-(q + 1) // piece_coords) + (group_size - r) * -(-q // piece_coords)
    return whole / max(1, group_size)


def merged(
    bounds: np.ndarray, reducer: np.ndarray, contributes: np.ndarray, receives: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Pieces for the arithmetic: runs of consecutive pieces of one part (same reducer,
    adjacent bounds) with the same ``contributes`` and ``receives`` rows made one piece;
    pieces of no simulated coordinate dropped. Every coordinate keeps its reducer and
    masks, so the exact arithmetic is unchanged; a lossy wire quantizes each run once.

    Returns (bounds (Q, 2), reducer (Q,), contributes (Q, g), receives (Q, g)).
    """
    keep = bounds[:, 1] > bounds[:, 0]
    bounds, reducer = bounds[keep], reducer[keep]
    contributes, receives = contributes[keep], receives[keep]
    if bounds.shape[0] < 2:
        return bounds, reducer, contributes, receives
    same = (
        (reducer[1:] == reducer[:-1])
        & (bounds[1:, 0] == bounds[:-1, 1])
        & (contributes[1:] == contributes[:-1]).all(axis=1)
        & (receives[1:] == receives[:-1]).all(axis=1)
    )
    head = np.flatnonzero(np.concatenate([[True], ~same]))
    tail = np.concatenate([head[1:], [bounds.shape[0]]]) - 1
    runs = np.stack([bounds[head, 0], bounds[tail, 1]], axis=1)
    return runs, reducer[head], contributes[head], receives[head]


def apply_pieces(
    x: Any,
    members: np.ndarray,
    bounds: np.ndarray,
    reducer: np.ndarray,
    contributes: np.ndarray,
    receives: np.ndarray,
    setup: ButterflySetup,
) -> tuple[Any, np.ndarray]:
    """:func:`~sim.kernels.butterfly.butterfly_pieces` of one group through
    ``setup.wire``; on a sampled vector (``setup.sampled``) over :func:`merged` pieces."""
    if setup.sampled:
        bounds, reducer, contributes, receives = merged(bounds, reducer, contributes, receives)
    return butterfly_pieces(x, members, bounds, reducer, contributes, receives, setup.wire)


def compressed_round(
    x: Any, groups: Groups, shares: ShareCache, setup: ButterflySetup
) -> tuple[Any, float, int, np.ndarray]:
    """Every group's butterfly through ``setup.wire``, everyone delivered (the rounds
    clock's arithmetic on a lossy wire): (x, bytes, messages, shift of the global sum).

    Parts come from ``shares``, cut into pieces of ``setup.part_bytes`` as on the
    network clock; each piece of a group of g travels in g − 1 requests and as many
    replies, each one message of the piece's wire bytes.
    """
    shift = np.zeros(setup.dim)
    nbytes, messages = 0.0, 0
    for start, count in zip(groups.starts.tolist(), groups.counts.tolist(), strict=True):
        members = groups.order[start : start + count]
        counts = shares.counts(members)
        if counts is None:
            continue
        bounds, reducer, _, width = setup.pieces(counts)
        everyone = np.ones((bounds.shape[0], count), dtype=bool)
        x, moved = apply_pieces(x, members, bounds, reducer, everyone, everyone, setup)
        shift += moved
        piece_bytes = setup.wire.nbytes(width, setup.itemsize)
        nbytes += 2 * (count - 1) * float(piece_bytes.sum())
        messages += 2 * (count - 1) * bounds.shape[0]
    return x, nbytes, messages, shift


def without(groups: Groups, lost: np.ndarray) -> Groups:
    """The same groups, member order kept, minus the rows where ``lost`` is true."""
    labels = groups.peer_group.copy()
    labels[lost] = -1
    visit = groups.members
    rest = np.setdiff1d(np.arange(groups.n_peers), visit, assume_unique=True)
    return Groups.from_labels(labels, np.concatenate([visit, rest]))
