"""One group's butterfly all-reduce, piece by piece, with lost messages and compression.

The group's vector is cut into *pieces* (consecutive coordinate ranges); each piece has a
reducer (a member). For every piece the reducer averages what it received from the
*contributors* (itself included, with its exact values; the others' values after the
wire's round trip), then every *receiver* gets the reduced piece (again through the
wire; the reducer keeps its exact mean). Everyone else keeps its local values.

This is the arithmetic of ``moshpit`` on the network clock when something went wrong in
a group (a lost or timed-out member) or when the wire compresses; a group where every
message arrived uncompressed is :func:`sim.kernels.group_mean`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.kernels._xp import column, namespace, take_rows
from sim.kernels.compression import IDENTITY, Wire, WireLike, as_wire
from sim.kernels.mixing import replace_rows


def butterfly_pieces(
    x: Any,
    members: np.ndarray,
    bounds: np.ndarray,
    reducer: np.ndarray,
    contributes: np.ndarray,
    receives: np.ndarray,
    wire: WireLike = IDENTITY,
) -> tuple[Any, np.ndarray]:
    """Apply one group's butterfly all-reduce, piece by piece.

    Parameters
    ----------
    x
        (n_peers, dim) floating array; numpy arrays are updated in place.
    members
        (g,) host intp: the group's rows.
    bounds
        (P, 2) host int: piece p is coordinates ``bounds[p, 0]:bounds[p, 1]``; pieces
        are disjoint (they need not cover the vector).
    reducer
        (P,) host int: position in ``members`` of each piece's reducer.
    contributes, receives
        (P, g) host bool: which members' values enter piece p's mean, and which members
        end with that mean. A piece with no contributor changes nothing.
    wire
        How every piece travels (a :class:`~sim.kernels.compression.Wire` or its name).

    Returns
    -------
    x
        The updated array (``x`` itself for numpy).
    shift
        (dim,) float64: Σ over members of (new − old), i.e. how much the group moved the
        global sum (0 up to round-off when every contributor receives, uncompressed).
    """
    xp, wire = namespace(x), as_wire(wire)
    old = take_rows(xp, x, members)
    blocks, stops = [], []
    for p in range(bounds.shape[0]):
        start, stop = int(bounds[p, 0]), int(bounds[p, 1])
        if stop <= start or not contributes[p].any():
            continue
        stops.append((start, stop))
        blocks.append(
            _piece(xp, old[:, start:stop], int(reducer[p]), contributes[p], receives[p], wire)
        )
    if not blocks:
        return x, np.zeros(int(x.shape[1]))
    new = _assemble(xp, old, stops, blocks)
    return replace_rows(x, members, old, new)


def _piece(
    xp: Any, block: Any, r: int, contributes: np.ndarray, receives: np.ndarray, wire: Wire
) -> Any:
    """The (g, width) values of one piece after its reduce-scatter and all-gather."""
    g = block.shape[0]
    is_reducer = np.arange(g) == r
    sent = wire.receive(block)
    if not wire.exact:  # the reducer uses its own exact values
        sent = xp.where(column(xp, block, is_reducer) > 0, block, sent)
    weight = column(xp, block, contributes.astype(float))
    reduced = xp.sum(sent * weight, axis=0) / float(contributes.sum())
    reply = wire.receive(reduced)
    values = xp.where(column(xp, block, is_reducer) > 0, reduced, reply)
    return xp.where(column(xp, block, receives.astype(float)) > 0, values, block)


def _assemble(xp: Any, old: Any, stops: list[tuple[int, int]], blocks: list[Any]) -> Any:
    """``old`` with the given column ranges replaced by ``blocks``."""
    parts, at = [], 0
    for (start, stop), block in zip(stops, blocks, strict=True):
        if start > at:
            parts.append(old[:, at:start])
        parts.append(block)
        at = stop
    if at < old.shape[1]:
        parts.append(old[:, at:])
    return xp.concat(parts, axis=1) if len(parts) > 1 else parts[0]
