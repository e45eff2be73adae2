"""numba loop of :meth:`~sim.engine.netclock.round_state.RoundState.ended_run`: the
ends of a run of a stream's pieces that ended inside a chunk, counted on the round's
arrays; needs the extra ``fast``.

The loop is :meth:`RoundState._count_ends <sim.engine.netclock.round_state.RoundState>`
for delivered pieces, step for step and in its order, on integer arrays. What it cannot
do itself it writes down, in order, for the caller: the flows released (``ready``), the
gates opened (``opened``) and the continuations to keep (``kept``). The round's arrays
come as one address table (:mod:`sim.core.addresses`, in the order of :data:`LAYOUT`):
fourteen array arguments cost ~0.5 µs a call to convert, most calls count a few pieces.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from sim.core._addresses_jit import view1, view2

_compiled = numba.njit(cache=True, nogil=True)

#: dtype and dimensions of the arrays of :func:`ended_run`'s address table, in order:
#: what it reads (``cont``, ``need``, ``gate_left``, ``opens``, ``behind_order``,
#: ``behind_bounds``, ``nexts``, ``next_piece``, ``lazy``), ``delivered`` (written), then
#: its outputs ``ready``, ``opened``, ``kept`` and ``counts``.
LAYOUT = (
    (np.int64, 1), (np.int64, 1), (np.int64, 1), (np.int64, 1), (np.int64, 1),
    (np.int64, 1), (np.int64, 2), (np.int64, 1), (np.bool_, 1), (np.bool_, 1),
    (np.int64, 1), (np.int64, 1), (np.int64, 1), (np.int64, 1),
)  # fmt: skip


#: What :func:`ended_one` returns where it released one flow at most, opened no gate and
#: keeps nothing (that flow, -1 for none: a value >= -1), and where ``counts`` must be read.
ONE_OR_NONE, READ_COUNTS = -1, -2


@numba.njit(cache=True, nogil=True, inline="always")
def _arrays(tab: Any) -> tuple[Any, ...]:
    """The arrays of the address table ``tab``, in the order of :data:`LAYOUT`."""
    i64, b1 = np.int64, np.bool_
    return (
        view1(tab, 0, i64), view1(tab, 1, i64), view1(tab, 2, i64), view1(tab, 3, i64),
        view1(tab, 4, i64), view1(tab, 5, i64), view2(tab, 6, i64), view1(tab, 7, i64),
        view1(tab, 8, b1), view1(tab, 9, b1), view1(tab, 10, i64), view1(tab, 11, i64),
        view1(tab, 12, i64), view1(tab, 13, i64),
    )  # fmt: skip


@numba.njit(cache=True, nogil=True, inline="always")
def _waits_less(
    j: int, skip: int, need: Any, lazy: Any, ready: Any, n_ready: int, kept: Any, n_kept: int
) -> tuple[int, int]:
    """Flow j waits for one flow less: released (``ready``) when it waits for nothing
    more, unless it is ``skip``; to keep (``kept``) when it waits for the piece before
    it alone and is ``lazy``. The counts of both, updated."""
    need[j] -= 1
    if need[j] == 0:
        if j != skip:
            ready[n_ready] = j
            n_ready += 1
    elif lazy.size > 0 and need[j] == 1 and lazy[j]:
        kept[n_kept] = j
        n_kept += 1
    return n_ready, n_kept


@numba.njit(cache=True, nogil=True, inline="always")
def _end(
    i: int,
    skip: int,
    need: Any,
    gate_left: Any,
    opens: Any,
    behind_order: Any,
    behind_bounds: Any,
    nexts: Any,
    next_piece: Any,
    lazy: Any,
    delivered: Any,
    ready: Any,
    opened: Any,
    kept: Any,
    counts: Any,
) -> None:
    """Count flow i as ended and delivered: ``_count_ends``' steps for it, what it
    releases other than ``skip`` written to ``ready``, its gate to ``opened`` if it
    opens, the continuations to keep to ``kept``, after the ``counts`` there already
    (updated)."""
    n_ready, n_opened, n_kept = counts[0], counts[1], counts[2]
    delivered[i] = True
    if opens.size > 0:
        gate = opens[i]
        if gate >= 0:
            gate_left[gate] -= 1
            if gate_left[gate] == 0:
                opened[n_opened] = gate
                n_opened += 1
                for k in range(behind_bounds[gate], behind_bounds[gate + 1]):
                    n_ready, n_kept = _waits_less(
                        behind_order[k], skip, need, lazy, ready, n_ready, kept, n_kept
                    )
    for k in range(nexts.shape[1]):
        j = nexts[i, k]
        if j < 0:
            break
        n_ready, n_kept = _waits_less(j, skip, need, lazy, ready, n_ready, kept, n_kept)
    if next_piece.size > 0:
        j = next_piece[i]
        if j >= 0:
            need[j] -= 1
            if need[j] == 0 and j != skip:
                ready[n_ready] = j
                n_ready += 1
    counts[0], counts[1], counts[2] = n_ready, n_opened, n_kept


@_compiled
def ended_run(flat: Any, start: int, stop: int, widest: int, tab: Any) -> int:
    """Count pieces ``flat[start:stop]`` as ended and delivered, in order, each
    followed by its continuation ``cont[i]`` (not released); stop early, before a piece
    that might overflow ``ready`` or ``kept`` (a piece releases ``widest`` flows at
    most: those behind its gate, after it, and its next piece). Returns where it
    stopped (``opened`` has a place for every gate); ``counts``
    holds how many flows it wrote to ``ready``, ``opened`` and ``kept``. Arrays of
    size 0 stand for none (``opens``, ``next_piece``, ``lazy``); all but ``flat`` are
    in the address table ``tab``."""
    (cont, need, gate_left, opens, behind_order, behind_bounds, nexts, next_piece, lazy,
     delivered, ready, opened, kept, counts) = _arrays(tab)  # fmt: skip
    counts[0] = counts[1] = counts[2] = 0
    room = min(ready.size, kept.size)
    p = start
    while p < stop:
        if counts[0] + widest > room or counts[2] + widest > room:
            break
        i = flat[p]
        _end(
            i, cont[i], need, gate_left, opens, behind_order, behind_bounds, nexts,
            next_piece, lazy, delivered, ready, opened, kept, counts,
        )  # fmt: skip
        p += 1
    return p


@_compiled
def ended_one(i: int, tab: Any) -> int:
    """Count flow i as ended and delivered (no continuation skipped): ``counts`` holds
    how many flows it wrote to ``ready``, ``opened`` and ``kept`` (each has room for
    the most a flow releases). Where it opened no gate and keeps no continuation (most
    ends) it returns the flow it released, or -1 for none (:data:`ONE_OR_NONE`); else
    :data:`READ_COUNTS`."""
    (_, need, gate_left, opens, behind_order, behind_bounds, nexts, next_piece, lazy,
     delivered, ready, opened, kept, counts) = _arrays(tab)  # fmt: skip
    counts[0] = counts[1] = counts[2] = 0
    _end(
        i, -1, need, gate_left, opens, behind_order, behind_bounds, nexts, next_piece, lazy,
        delivered, ready, opened, kept, counts,
    )  # fmt: skip
    if counts[1] == 0 and counts[2] == 0 and counts[0] <= 1:
        return ready[0] if counts[0] == 1 else ONE_OR_NONE
    return READ_COUNTS
