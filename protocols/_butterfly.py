"""Butterfly all-reduce inside groups, as flows for the network clock.

With g members and equal shares, member b reduces part b (S/g bytes). Reduce-scatter
(phase 0): every member a sends part b to member b, for every b ≠ a. All-gather
(phase 1): every reducer b sends its reduced part to every other member. Per direction
each member moves S·(1 + (g−2)/g) bytes, and the whole group 2·(g−1)·S bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim.kernels import Groups
from sim.kernels.compression import wire_bytes_of

#: ``part_nbytes(sizes, positions) -> bytes`` of butterfly parts (see :func:`butterfly_flows`).
PartBytes = Callable[[np.ndarray, np.ndarray], np.ndarray]


def compressed_part_nbytes(method: str, dim: int, itemsize: int) -> PartBytes:
    """Bytes of equal-split parts on a compressing wire: the member at position p of a
    group of g reduces ⌊dim/g⌋ coordinates, one more when p < dim mod g (the largest
    remainder rule of ``whole_coordinates``)."""

    def part_nbytes(sizes: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return wire_bytes_of(method, dim // sizes + (positions < dim % sizes), itemsize)

    return part_nbytes


def butterfly_flows(
    groups: Groups, vector_bytes: float, part_nbytes: PartBytes | None = None
) -> tuple[np.ndarray, ...]:
    """Flows of one butterfly all-reduce per group, equal shares.

    ``part_nbytes(sizes, positions)`` gives the bytes of the part that the member at
    ``positions`` of a group of ``sizes`` reduces (default ``vector_bytes / sizes``; a
    compressing wire passes its own).

    Returns
    -------
    src, dst, nbytes, opens, waits
        Parallel arrays: the reduce-scatter flows, each opening its group's gate (the
        group's index), then the all-gather flows, each waiting for that gate (see
        :class:`protocols.base.NetRound`).
    """
    sizes = groups.counts
    table = np.full((groups.n_groups, groups.max_size), -1, dtype=np.intp)
    table[groups.member_group, groups.positions] = groups.members
    a = table[:, :, None]
    b = table[:, None, :]
    pairs = (a >= 0) & (b >= 0) & (a != b)
    group = np.broadcast_to(np.arange(groups.n_groups)[:, None, None], pairs.shape)[pairs]
    senders = np.broadcast_to(a, pairs.shape)[pairs]
    reducers = np.broadcast_to(b, pairs.shape)[pairs]
    if part_nbytes is None:
        part = vector_bytes / sizes[group]
    else:
        slots = np.arange(groups.max_size)[None, None, :]
        part = part_nbytes(sizes[group], np.broadcast_to(slots, pairs.shape)[pairs])
    src = np.concatenate([senders, reducers])
    dst = np.concatenate([reducers, senders])
    none = np.full(group.size, -1, dtype=np.intp)
    opens, waits = np.concatenate([group, none]), np.concatenate([none, group])
    return src, dst, np.concatenate([part, part]), opens, waits


def without(groups: Groups, lost: np.ndarray) -> Groups:
    """The same groups, member order kept, minus the rows where ``lost`` is true."""
    labels = groups.peer_group.copy()
    labels[lost] = -1
    visit = groups.members
    rest = np.setdiff1d(np.arange(groups.n_peers), visit, assume_unique=True)
    return Groups.from_labels(labels, np.concatenate([visit, rest]))
