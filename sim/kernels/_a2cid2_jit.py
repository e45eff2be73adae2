"""numba loops of A²CiD²'s exchanges, needs the extra ``fast``: a round's events on the
rounds clock (``exchange_events``, ``event_since``, ``mix_rows``; see
:func:`protocols.a2cid2.apply_events`) and a wave of closed-form exchanges on the network
clock with the rows' trajectories (``solo_wave``, ``trajectory_pairs``; see
:class:`protocols.a2cid2.A2cid2`).

Importing this module imports numba; :mod:`protocols.a2cid2` does so only for states
large enough to use it and keeps its numpy calls when numba is missing. Each function is
compiled on first use (cached on disk), once per dtype; ``fastmath`` stays off and every
scalar (the coefficients, ½ and α̃) arrives in the state's dtype, so each subtraction,
product and addition is the IEEE operation numpy's calls do, in that dtype, in the same
order for every element.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np


@numba.njit(inline="always")
def _forward(e: Any, t: Any, c: Any) -> tuple[Any, Any]:
    """One element of a row mixed forward by coefficient c: with s = c·(x̃ − x),
    (x + s, x̃ − s) (``a2cid2_mix``'s operations)."""
    s = c * (t - e)
    return e + s, t - s


@numba.njit(cache=True, nogil=True)
def exchange_events(
    x: Any, x_tilde: Any, i: Any, j: Any, c_i: Any, c_j: Any, mixed: Any, half: Any, alpha: Any
) -> None:
    """Exchanges (i_k, j_k) one by one, in order, in place.

    Event k first mixes each end forward (when ``mixed[k]``): with s = c·(x̃ − x),
    x ← x + s, x̃ ← x̃ − s; then, with m = x_i − x_j: x_i −= ½m, x_j += ½m,
    x̃_i −= α̃m, x̃_j += α̃m. Each column's operations depend on that column alone, so
    both ends' mixing and the exchange go in one pass over the columns (the same
    operations on each element, in the same order); i_k ≠ j_k (graphs are simple).
    """
    dim = x.shape[1]
    for k in range(i.size):
        a, b = i[k], j[k]
        if mixed[k]:  # both ends forward, then the exchange, one pass
            ca, cb = c_i[k], c_j[k]
            for d in range(dim):
                ea, ta = _forward(x[a, d], x_tilde[a, d], ca)
                eb, tb = _forward(x[b, d], x_tilde[b, d], cb)
                m = ea - eb
                move, kick = half * m, alpha * m
                x[a, d] = ea - move
                x[b, d] = eb + move
                x_tilde[a, d] = ta - kick
                x_tilde[b, d] = tb + kick
            continue
        for d in range(dim):
            m = x[a, d] - x[b, d]
            move, kick = half * m, alpha * m
            x[a, d] = x[a, d] - move
            x[b, d] = x[b, d] + move
            x_tilde[a, d] = x_tilde[a, d] - kick
            x_tilde[b, d] = x_tilde[b, d] + kick


@numba.njit(cache=True, nogil=True)
def mix_rows(x: Any, x_tilde: Any, c: Any) -> None:
    """Every row forward by its coefficient, in place (:func:`sim.kernels.a2cid2_mix`):
    with s = c·(x̃ − x), x ← x + s, x̃ ← x̃ − s."""
    for r in range(x.shape[0]):
        cr = c[r]
        for d in range(x.shape[1]):
            x[r, d], x_tilde[r, d] = _forward(x[r, d], x_tilde[r, d], cr)


@numba.njit(cache=True, nogil=True)
def event_since(times: Any, i: Any, j: Any, n_peers: int) -> tuple[Any, Any]:
    """For the events (i_k, j_k) at ``times``, in order: the time since each end's
    previous event (ends i then j; since 0.0 where it has none), and each peer's latest
    event time (0.0: none). Each is t_k − t_prev, the subtraction numpy does on the same
    two numbers."""
    k = times.size
    elapsed = np.empty(2 * k)
    previous = np.zeros(n_peers)
    last = np.zeros(n_peers)
    for e in range(k):
        t, a, b = times[e], i[e], j[e]
        elapsed[e] = t - previous[a]
        previous[a] = t
        elapsed[e + k] = t - previous[b]
        previous[b] = t
        if t > last[a]:
            last[a] = t
        if t > last[b]:
            last[b] = t
    return elapsed, last


@numba.njit(cache=True, nogil=True)
def solo_wave(
    x: Any, x_tilde: Any, i: Any, j: Any, c: Any, moving: Any, half: Any, alpha: Any
) -> None:
    """A wave of disjoint exchanges (i_q, j_q) on the network clock, in place: each end
    mixed forward to the snapshot (coefficients ``c[0]``, ends i then j; pair q only when
    ``moving[0, q]``), m = x_i − x_j taken there, both mixed forward to the update
    (``c[1]``, ``moving[1]``), then x_i −= ½m, x_j += ½m, x̃_i −= α̃m, x̃_j += α̃m: each
    element's operations in the order of ``A2cid2._solo_wave``'s numpy calls."""
    p = i.size
    for q in range(p):
        a, b = i[q], j[q]
        for d in range(x.shape[1]):
            ea, ta, eb, tb = x[a, d], x_tilde[a, d], x[b, d], x_tilde[b, d]
            if moving[0, q]:  # to the snapshot
                ea, ta = _forward(ea, ta, c[0, q])
                eb, tb = _forward(eb, tb, c[0, p + q])
            m = ea - eb
            if moving[1, q]:  # to the update
                ea, ta = _forward(ea, ta, c[1, q])
                eb, tb = _forward(eb, tb, c[1, p + q])
            move, kick = half * m, alpha * m
            x[a, d] = ea - move
            x[b, d] = eb + move
            x_tilde[a, d] = ta - kick
            x_tilde[b, d] = tb + kick


@numba.njit(cache=True, nogil=True)
def trajectory_pairs(x: Any, x_tilde: Any, pairs: Any, slots: Any, a: Any, d: Any) -> None:
    """The trajectories of the rows of ``pairs`` ((P, 2) peers) in float64, written at
    ``slots``: a[s, e] = ½(x + x̃) and d[s, e] = ½(x̃ − x) of row pairs[q, e], q's slot s
    (``trajectory_rows``' operations on its float64 copies)."""
    for q in range(pairs.shape[0]):
        s = slots[q]
        for e in range(2):
            r = pairs[q, e]
            for k in range(x.shape[1]):
                xv, tv = np.float64(x[r, k]), np.float64(x_tilde[r, k])
                a[s, e, k] = 0.5 * (xv + tv)
                d[s, e, k] = 0.5 * (tv - xv)
