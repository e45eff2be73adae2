"""Pairwise exchanges through a wire: the one implementation behind every protocol that
exchanges vectors in pairs (``pairwise_gossip`` on both clocks, ``a2cid2``).

An exchange between i and j has two halves, which continuous-time protocols run at
different instants (the snapshot when the flows start, the update when both arrived):

- :func:`exchange_differences` (the snapshot): each end's own exact row minus what it
  decodes from the other, d_i = s_i − Q(s_j) and d_j = Q(s_i) − s_j (s the rows sent,
  Q the wire's :meth:`~sim.kernels.compression.Wire.receive`); on an exact wire one
  array s_i − s_j serves both ends;
- :func:`move_pairs` (the update): x_i ← x_i − c·d_i, x_j ← x_j + c·d_j (pairwise
  gossip c = ½; A²CiD² also moves x̃ with c = α̃).

:func:`pairwise_delta` is both halves at once, from given snapshots, and
:func:`average_waves` both halves of many pairwise averages in a row, compiled on an exact
wire (:func:`compiled_average`) where numba imports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sim.core.optional import optional_module
from sim.core.sets import unique_ints
from sim.kernels._xp import namespace, take_rows, to_backend
from sim.kernels.compression import IDENTITY, Wire, WireLike, as_wire, wire_for

#: The dtypes :func:`average_waves` runs compiled.
COMPILED_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def exchange_differences(x: Any, i: Any, j: Any, wire: WireLike = IDENTITY) -> tuple[Any, Any]:
    """What the ends of exchanges (i_p, j_p) apply, from their rows as sent now.

    Parameters
    ----------
    x
        (n_peers, dim) floating array (not modified).
    i, j
        (P,) host integer rows of disjoint pairs, or two ints for one exchange.
    wire
        How each end's row reaches the other (one message per row).

    Returns
    -------
    d_i, d_j
        (P, dim) arrays ((dim,) for one exchange): d_i = s_i − Q(s_j) and
        d_j = Q(s_i) − s_j with s the current rows and Q the wire's decoding. On an
        exact wire both are s_i − s_j: the same array, returned twice.
    """
    wire = wire if isinstance(wire, Wire) else wire_for(wire)
    one = type(i) is int or isinstance(i, np.integer)
    if wire.exact:
        if one:
            d = x[i, ...] - x[j, ...]
        else:
            xp = namespace(x)
            d = take_rows(xp, x, i) - take_rows(xp, x, j)
        return d, d
    rows = np.array([i, j]) if one else np.concatenate((i, j))
    d_i, d_j = sent_differences(take_rows(namespace(x), x, rows), wire)
    return (d_i[0, ...], d_j[0, ...]) if one else (d_i, d_j)


def sent_differences(sent: Any, wire: WireLike = IDENTITY) -> tuple[Any, Any]:
    """:func:`exchange_differences` of rows already taken: ``sent`` is (2P, dim), the
    rows of the ends i then those of the ends j; returns (d_i, d_j), each (P, dim)."""
    wire = as_wire(wire)
    pairs = sent.shape[0] // 2
    if wire.exact:
        d = sent[:pairs, ...] - sent[pairs:, ...]
        return d, d
    received = wire.receive(sent)
    return sent[:pairs, ...] - received[pairs:, ...], received[:pairs, ...] - sent[pairs:, ...]


def move_pairs(x: Any, i: Any, j: Any, d_i: Any, d_j: Any, scale: float | None = None) -> Any:
    """x_i ← x_i − c·d_i, x_j ← x_j + c·d_j for disjoint pairs (c = ``scale``, or 1).

    Parameters
    ----------
    x
        (n_peers, dim) floating array; numpy arrays are updated in place.
    i, j
        (P,) host integer rows, all 2P distinct, or two ints for one exchange.
    d_i, d_j
        (P, dim) arrays ((dim,) for one exchange) of x's backend, e.g. from
        :func:`exchange_differences`; the same array for both ends is scaled once.
    scale
        The factor c (None: the deltas as given).

    Returns
    -------
    (n_peers, dim) array: ``x`` itself for numpy, a new array otherwise.
    """
    if scale is not None:
        step = scale * d_i
        d_j = step if d_j is d_i else scale * d_j
        d_i = step
    if type(x) is np.ndarray:
        x[i] -= d_i
        x[j] += d_j
        return x
    xp = namespace(x)
    if type(i) is int or isinstance(i, np.integer):  # one exchange: rows of shape (1, dim)
        i, j = np.array([i]), np.array([j])
        shared = d_j is d_i
        d_i = xp.reshape(d_i, (1, -1))
        d_j = d_i if shared else xp.reshape(d_j, (1, -1))
    return _move_rows(xp, x, np.asarray(i, dtype=np.intp), np.asarray(j, dtype=np.intp), d_i, d_j)


def pairwise_delta(
    x: Any,
    i: np.ndarray,
    j: np.ndarray,
    s_i: Any = None,
    s_j: Any = None,
    q_i: Any = None,
    q_j: Any = None,
) -> Any:
    """Apply the exchanges of disjoint pairs (i_p, j_p) as deltas.

    Parameters
    ----------
    x
        (n_peers, dim) floating array; numpy arrays are updated in place.
    i, j
        (P,) host integer rows; all 2P rows distinct (disjoint pairs).
    s_i, s_j
        (P, dim) arrays of the values each end **sent** (snapshots taken when the
        exchange started); default: the current rows ``x[i]`` and ``x[j]``.
    q_i, q_j
        (P, dim) arrays of the values the **other** end received (s_i and s_j after a
        lossy wire, e.g. :func:`sim.kernels.compression.roundtrip`); default: ``s_i`` and
        ``s_j`` (an exact wire).

    Returns
    -------
    (n_peers, dim) array: ``x`` itself for numpy, a new array otherwise.

    Notes
    -----
    With m = (s_i − s_j)/2: x_i ← x_i − m, x_j ← x_j + m. The pair's sum changes by
    −m + m, so the global sum is preserved to round-off even when x has moved since the
    snapshot (overlapping exchanges); with s = x it is the pairwise mean.

    With a lossy wire (q given) each end uses its own exact value and the other's
    received one: x_i ← x_i − (s_i − q_j)/2, x_j ← x_j + (q_i − s_j)/2; the pair's sum
    then moves by ((q_i − s_i) + (q_j − s_j))/2, the wire's error. Without q the
    arithmetic is exactly the exact-wire one above.

    References
    ----------
    Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", IEEE Trans. Inf.
    Theory 52(6), 2006.
    """
    i = np.asarray(i, dtype=np.intp).reshape(-1)
    j = np.asarray(j, dtype=np.intp).reshape(-1)
    _check_disjoint(i, j)
    xp = namespace(x)
    if i.size == 0:
        return x
    s_i = take_rows(xp, x, i) if s_i is None else s_i
    s_j = take_rows(xp, x, j) if s_j is None else s_j
    if q_i is None and q_j is None:
        d_i = d_j = s_i - s_j
    else:
        d_i = s_i - (s_j if q_j is None else q_j)
        d_j = (s_i if q_i is None else q_i) - s_j
    return move_pairs(x, i, j, d_i, d_j, 0.5)


def _move_rows(xp: Any, x: Any, i: np.ndarray, j: np.ndarray, step_i: Any, step_j: Any) -> Any:
    """x_i − step_i, x_j + step_j as a new array (non-numpy backends)."""
    side = np.zeros(x.shape[0], dtype=np.int8)
    side[i], side[j] = 1, 2
    pair = np.zeros(x.shape[0], dtype=np.intp)
    pair[i] = pair[j] = np.arange(i.size)
    moved_i = take_rows(xp, step_i, pair)
    moved_j = moved_i if step_j is step_i else take_rows(xp, step_j, pair)
    on_side = to_backend(xp, x, side.reshape(-1, 1))
    return xp.where(on_side == 1, x - moved_i, xp.where(on_side == 2, x + moved_j, x))


def _check_disjoint(i: np.ndarray, j: np.ndarray) -> None:
    if i.shape != j.shape:
        raise ValueError(f"i and j must have the same length, got {i.size} and {j.size}")
    both = np.concatenate((i, j))
    if unique_ints(both).size != both.size:
        raise ValueError("pairs must be disjoint: a row appears in more than one pair")


#: ``average(x, i, j, half)``: :func:`average_waves`'s loop, compiled.
Average = Callable[[np.ndarray, np.ndarray, np.ndarray, Any], None]


def compiled_average() -> Average | None:
    """:func:`average_waves`'s loop compiled by numba, or None when numba does not
    import. Compiled on first use, cached on disk."""
    module = optional_module("sim.kernels._pairwise_jit")
    if module is None:
        return None
    kernel: Average = module.average_in_order
    return kernel


def average_waves(
    x: Any,
    i: np.ndarray,
    j: np.ndarray,
    waves: list[np.ndarray],
    compiled: Average | None = None,
    wire: WireLike = IDENTITY,
) -> Any:
    """Pairwise averages through ``wire`` of the exchanges (i_k, j_k), k over each wave
    of ``waves`` (index arrays; a wave's pairs share no row), wave after wave: each wave
    one :func:`exchange_differences` and one :func:`move_pairs` (c = ½); on an exact
    wire d = x_i − x_j, x_i ← x_i − d/2, x_j ← x_j + d/2.

    On an exact wire, with ``compiled`` (:func:`compiled_average`) and a C-contiguous
    float64 or float32 numpy ``x``, one pass over the exchanges, in that order, reads
    and writes each pair's rows once, in place: at 10^5 gossip peers, where the state no
    longer fits a core's cache, the waves' numpy gathers and scatters cost ~0.8 µs an
    exchange. Both give the same bits: each row's updates are the same IEEE operations
    in the same order.

    Returns
    -------
    (n_peers, dim) array: ``x`` itself for numpy, a new array otherwise.
    """
    if not waves:
        return x
    wire = as_wire(wire)
    if (
        compiled is not None
        and wire.exact
        and type(x) is np.ndarray
        and x.ndim == 2
        and x.dtype in COMPILED_DTYPES
        and x.flags.c_contiguous
        and x.flags.writeable
    ):
        order = waves[0] if len(waves) == 1 else np.concatenate(waves)
        compiled(x, i[order], j[order], x.dtype.type(0.5))
        return x
    for wave in waves:
        a, b = i[wave], j[wave]
        d_a, d_b = exchange_differences(x, a, b, wire)
        x = move_pairs(x, a, b, d_a, d_b, 0.5)
    return x
