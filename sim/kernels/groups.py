"""Disjoint groups of peers, described on the host for the group kernels.

A :class:`Groups` lists which rows (peers) average together. It is built once per round
by a protocol with numpy (sorting labels, reshaping a permutation) and handed to the
kernels in :mod:`sim.kernels.grouped`, which only ever read its index arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

import numpy as np


@dataclass(frozen=True, eq=False)
class Groups:
    """Disjoint groups of rows of an ``(n_peers, dim)`` state, largest groups first.

    Group ``k`` holds the rows ``order[starts[k] : starts[k] + counts[k]]``, in that
    order (the member order fixes the summation order and, for Moshpit, the chunk
    index). Groups are sorted by non-increasing size, so groups of similar sizes are
    neighbours (see :attr:`buckets`).

    Parameters
    ----------
    n_peers
        Rows of the state the groups index into.
    order
        (n,) intp: rows, each group's members contiguous.
    starts
        (G,) intp: offset of each group in ``order``.
    counts
        (G,) intp: size of each group, non-increasing, all ≥ 1.
    labels
        (G,) int64 or None: the label each group was built from (see
        :meth:`from_labels`), for protocols that need to map groups back to keys.
    """

    n_peers: int
    order: np.ndarray
    starts: np.ndarray
    counts: np.ndarray
    labels: np.ndarray | None = None

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_labels(cls, labels: np.ndarray, visit: np.ndarray | None = None) -> Groups:
        """Group the rows that share a label; rows labelled ``-1`` join no group.

        Parameters
        ----------
        labels
            (n_peers,) integer labels ≥ -1.
        visit
            Optional (n_peers,) permutation of the rows: members of a group are listed
            in the order they appear in ``visit`` (e.g. a seeded shuffle). Default: by
            row index.
        """
        labels = np.asarray(labels)
        rows = np.arange(labels.size) if visit is None else np.asarray(visit)
        lab = labels[rows]
        keep = lab >= 0
        rows, lab = rows[keep], lab[keep]
        if lab.size == 0:
            return cls.empty(labels.size)
        # Radix sort on the narrowest unsigned type: labels are usually small codes.
        narrow = lab.astype(np.min_scalar_type(int(lab.max())), copy=False)
        by_label = np.argsort(narrow, kind="stable")
        rows, lab = rows[by_label], lab[by_label]
        first = np.flatnonzero(np.concatenate(([True], lab[1:] != lab[:-1])))
        counts = np.diff(np.append(first, lab.size))
        by_size = np.argsort(-counts, kind="stable")
        return cls(
            n_peers=int(labels.size),
            order=rows,
            starts=first[by_size],
            counts=counts[by_size],
            labels=lab[first][by_size].astype(np.int64),
        )

    @classmethod
    def from_matrix(cls, members: np.ndarray, n_peers: int) -> Groups:
        """Equal-size groups given as a (G, M) matrix of distinct rows (one group per row)."""
        members = np.asarray(members)
        n_groups, size = members.shape
        return cls(
            n_peers=int(n_peers),
            order=members.reshape(-1),
            starts=np.arange(n_groups, dtype=np.intp) * size,
            counts=np.full(n_groups, size, dtype=np.intp),
        )

    @classmethod
    def single(cls, rows: np.ndarray, n_peers: int) -> Groups:
        """One group of the given rows (all peers: ``np.arange(n_peers)``)."""
        rows = np.asarray(rows, dtype=np.intp)
        if rows.size == 0:
            return cls.empty(n_peers)
        return cls(n_peers, rows, np.zeros(1, np.intp), np.array([rows.size], np.intp))

    @classmethod
    def empty(cls, n_peers: int) -> Groups:
        """No groups at all (every kernel is then a no-op)."""
        none = np.zeros(0, dtype=np.intp)
        return cls(int(n_peers), none, none, none, np.zeros(0, np.int64))

    def subset(self, keep: np.ndarray) -> Groups:
        """Only the groups where the (G,) boolean ``keep`` is true (order preserved)."""
        keep = np.asarray(keep, dtype=bool)
        labels = None if self.labels is None else self.labels[keep]
        return Groups(self.n_peers, self.order, self.starts[keep], self.counts[keep], labels)

    # -- derived index arrays (all cached) ------------------------------------------------

    @property
    def n_groups(self) -> int:
        """Number of groups G."""
        return int(self.counts.size)

    @property
    def max_size(self) -> int:
        """Size of the largest group (0 without groups)."""
        return int(self.counts[0]) if self.counts.size else 0

    @cached_property
    def member_group(self) -> np.ndarray:
        """(n,) group index of each entry of :attr:`members`."""
        return np.repeat(np.arange(self.n_groups), self.counts)

    @cached_property
    def positions(self) -> np.ndarray:
        """(n,) position of each entry of :attr:`members` inside its group (0-based)."""
        offsets = np.cumsum(self.counts) - self.counts
        return np.arange(int(self.counts.sum())) - np.repeat(offsets, self.counts)

    @cached_property
    def members(self) -> np.ndarray:
        """(n,) all member rows, group by group (group 0 first), each in member order."""
        return self.order[np.repeat(self.starts, self.counts) + self.positions]

    @cached_property
    def offsets(self) -> np.ndarray:
        """(G+1,) start of each group in :attr:`members` (and the total at the end)."""
        return np.concatenate(([0], np.cumsum(self.counts)))

    @cached_property
    def buckets(self) -> list[tuple[int, int]]:
        """Ranges [g0, g1) of groups with ≥ 2 members and sizes in one (2^(k−1), 2^k].

        Padding every group of a bucket to its largest wastes less than half of the
        padded table, however unequal the groups are; groups of one are left out
        (averaging them is a no-op).
        """
        sizes = self.counts[self.counts >= 2]
        if sizes.size == 0:
            return []
        edges = np.flatnonzero(np.diff(np.ceil(np.log2(sizes)))) + 1
        bounds = [0, *edges.tolist(), int(sizes.size)]
        return list(pairwise(bounds))

    def padded_rows(self, first: int, stop: int) -> np.ndarray:
        """(stop − first, size) member rows of groups [first, stop), padded with their
        own first member to the size of the largest of them."""
        counts = self.counts[first:stop]
        slots = np.arange(int(counts[0]) if counts.size else 0)
        offsets = np.where(slots < counts[:, None], slots, 0)
        return self.order[self.starts[first:stop, None] + offsets]

    @cached_property
    def padded(self) -> np.ndarray:
        """(G, max_size) member rows, short groups padded with their own first member."""
        return self.padded_rows(0, self.n_groups)

    @cached_property
    def peer_group(self) -> np.ndarray:
        """(n_peers,) group index of each row, -1 for rows in no group."""
        out = np.full(self.n_peers, -1, dtype=np.intp)
        out[self.members] = self.member_group
        return out
