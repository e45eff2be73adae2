"""The ring loop of a closed-form segment plan (:mod:`protocols._solo_exchanges`).

:func:`plan_rings` walks the edge clocks' rings of one drawn window and plans each one
as :meth:`~protocols._solo_exchanges.planner.SegmentPlanner.plan` does: an absent end
or a busy end skips it, else its exchange is timed in closed form and given its wave.
It stops where only the caller can go on: at the next ring that needs a look at the
run's interrupt, at the window's end (the caller draws windows), or at a bound of the
segment.

The same function runs in two ways, with the same floating-point operations in the same
order (additions and comparisons only; no ``fastmath``), so the plans are bit-identical:

- compiled by numba (the extra ``fast``; :func:`compiled`), on numpy arrays: per ring a
  few loads from arrays instead of Python objects scattered over the heap (at 10^5 peers
  the Python loop's cache misses made a ring cost 2–3× what it costs at 10^3);
- as Python, on lists (no numba, or a small run that should not import it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.core.optional import optional_module

#: :func:`plan_rings` stopped at a bound of the segment (its horizon, its most rings or
#: exchanges): ``later`` is the time of the yield point it did not pass.
STOP = 0
#: It stopped at the next ring, which the caller counts after a look at the interrupt.
NEXT = 1
#: It planned the window's last ring: the caller passes the window's end.
WINDOW_END = 2

#: What :func:`plan_rings` returns: (status, edge, now, later, k, rings, n, absent,
#: skipped).
Planned = tuple[int, int, float, float, int, int, int, int, int]


def plan_rings(
    edge: Any, now: Any, later: Any, k: Any, rings: Any, limit: Any, n: Any, absent: Any,
    skipped: Any, ring_times: Any, picked: Any, horizon: Any, most: Any, cap: Any,
    present: Any, free_at: Any, level: Any, ends_i: Any, ends_j: Any, lat_ij: Any,
    d_ij: Any, lat_ji: Any, d_ji: Any, starts: Any, ends: Any, edges: Any, waves: Any,
) -> Planned:  # fmt: skip
    """Plan the ring of ``edge`` at ``now`` (counted in ``rings``) and the window's next
    ones, until a status (module constants) says why it stopped.

    Parameters
    ----------
    edge, now
        The ring to plan: its edge and time.
    later
        The time of the last yield point reached (returned unchanged when none is).
    k
        Index in the window of the ring after this one (``len(ring_times)``: none).
    rings, limit
        Rings counted so far, with this one; at a next ring while ``rings ≥ limit`` it
        returns ``NEXT`` without counting it.
    n, absent, skipped
        Exchanges planned so far (the next free slot of the outputs), rings skipped for
        an absent end, for a busy end.
    ring_times, picked
        The window's ring times and edges.
    horizon, most, cap
        The segment's bounds: no yield point at or after ``horizon``, at most ``most``
        rings and ``cap`` exchanges.
    present, free_at, level
        Per peer: present now; end of its last exchange planned or applied ahead (it is
        busy at a ring at or before it); 1 + the wave of its last planned exchange.
        ``free_at`` and ``level`` are updated.
    ends_i, ends_j, lat_ij, d_ij, lat_ji, d_ji
        Per edge: its ends, and the route latency and transfer time of its flows i → j
        and j → i when alone.
    starts, ends, edges, waves
        Outputs, from slot ``n`` on: each planned exchange's start, end, edge and wave.

    Returns
    -------
    (status, edge, now, later, k, rings, n, absent, skipped): the next ring's edge and
    time (``NEXT``; else the last ring planned's), and the updated counts.
    """
    n_times = len(ring_times)
    while True:  # the ring of ``edge`` at ``now``
        i, j = ends_i[edge], ends_j[edge]
        if not (present[i] and present[j]):
            absent += 1
        elif free_at[i] >= now or free_at[j] >= now:
            skipped += 1
        else:
            f1 = now + lat_ij[edge] + d_ij[edge]
            f2 = now + lat_ji[edge] + d_ji[edge]
            end = f1 if f1 >= f2 else f2
            free_at[i] = end
            free_at[j] = end
            wave = level[i] if level[i] > level[j] else level[j]
            level[i] = wave + 1
            level[j] = wave + 1
            starts[n] = now
            ends[n] = end
            edges[n] = edge
            waves[n] = wave
            n += 1
        # on to ring_loop's next yield point, at its time
        if k >= n_times:
            return WINDOW_END, edge, now, later, k, rings, n, absent, skipped
        step = ring_times[k] - now
        later = now + step if step > 0.0 else now
        if later >= horizon or rings >= most or n >= cap:
            return STOP, edge, now, later, k, rings, n, absent, skipped
        edge = picked[k]
        k += 1
        now = later
        if rings >= limit:
            return NEXT, edge, now, later, k, rings, n, absent, skipped
        rings += 1


def compiled() -> Callable[..., Planned] | None:
    """:func:`plan_rings` compiled by numba (arguments: numpy arrays), or None when numba
    does not import. Compiled on first use, cached on disk."""
    module = optional_module("sim.kernels._solo_plan_jit")
    if module is None:
        return None
    kernel: Callable[..., Planned] = module.plan_rings
    return kernel
