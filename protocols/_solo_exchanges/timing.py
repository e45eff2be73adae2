"""Closed-form times of the exchange path: SimPy clock hops that land exactly, the next
interfering event, each edge's flow times when alone, and the edge clocks' rings."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import simpy

from protocols._edge_clocks import PoissonClocks
from sim.network.flows import BANDWIDTH, LATENCY, FlowNetwork

#: The phases of a flow still moving (not done, not failed).
MOVING = (LATENCY, BANDWIDTH)


def hops(now: float, at: float) -> list[float]:
    """Delays of the timeouts that take a SimPy clock from ``now`` exactly to ``at ≥ now``
    (SimPy schedules a timeout at ``now + delay``): one when some delay lands on ``at``,
    else two, through a time m ≥ at/2 from which ``at − m`` is exact (Sterbenz). One
    always does when now ≥ at/2."""
    delay = at - now
    for hop in (delay, math.nextafter(delay, math.inf), math.nextafter(delay, -math.inf)):
        if hop >= 0.0 and now + hop == at:
            return [hop]
    first = 0.75 * at - now  # now < at/2 here: the midway time lies in [at/2, at)
    return [first, at - (now + first)]


def next_interfering(env: simpy.Environment, harmless: Callable[[Any], bool]) -> float:
    """Time of the earliest scheduled event with a callback that ``harmless`` refuses
    (``inf``: none). Reads SimPy's event queue; without it, the next event of any kind."""
    queue = getattr(env, "_queue", None)
    if not isinstance(queue, list):
        return float(env.peek())
    earliest = math.inf
    for entry in queue:
        at, event = entry[0], entry[-1]
        if at < earliest and not all(harmless(cb) for cb in event.callbacks or ()):
            earliest = at
    return float(earliest)


class EdgeTimes:
    """Closed-form timing of each edge's two flows when alone (both directions).

    ``lat_ij[e]``: route latency i → j; ``d_ij[e]``: nbytes / rate (0 for a flow that
    completes on entering: no bytes or no finite resource); likewise ``j → i``. Lists;
    :attr:`arrays` holds the same four as float64 arrays.
    """

    def __init__(
        self, lat_ij: list[float], d_ij: list[float], lat_ji: list[float], d_ji: list[float]
    ):
        self.lat_ij, self.d_ij, self.lat_ji, self.d_ji = lat_ij, d_ij, lat_ji, d_ji
        self.longest = max(max(d_ij, default=0.0), max(d_ji, default=0.0))
        #: (lat_ij, d_ij, lat_ji, d_ji) as float64 arrays.
        self.arrays = tuple(np.array(c, dtype=np.float64) for c in (lat_ij, d_ij, lat_ji, d_ji))

    @classmethod
    def of(cls, net: FlowNetwork, edges: np.ndarray, nbytes: float) -> EdgeTimes | None:
        """The edges' timing, or None when a flow of one would not be alone by construction
        (a shared link on its route) or could not be sent (``rtt_weighted`` needs a
        positive route latency)."""
        routes, n = net.routes, net.n
        capacity = routes.capacity_bytes_per_s
        weighted = net.sharing == "rtt_weighted"
        columns: list[list[float]] = [[], [], [], []]
        for i, j in zip(edges[:, 0].tolist(), edges[:, 1].tolist(), strict=True):
            for src, dst, lat, d in (
                (i, j, columns[0], columns[1]),
                (j, i, columns[2], columns[3]),
            ):
                latency_s, res = routes.route(src, dst)
                if not set(res) <= {src, n + dst}:
                    return None
                if weighted and latency_s <= 0.0:
                    return None
                w = 1.0 / latency_s if weighted else 1.0
                lat.append(latency_s)
                d.append(_transfer_s(nbytes, [capacity[r] for r in res], w))
        return cls(*columns)


def _transfer_s(nbytes: float, capacities: Sequence[float], w: float) -> float:
    """nbytes / rate of a flow alone (the network's rate of a flow alone: the smallest
    capacity share times its weight); 0 when it completes on entering."""
    if nbytes == 0.0 or not capacities:
        return 0.0
    level = min(c / w for c in capacities)
    return nbytes / (level * w)


class RingStream:
    """The rings of :func:`~protocols._async_net.ring_loop`, one window drawn at a time
    (in the same order from the same generator), with its yield points: each ring, then
    the window's end. Windows are kept from the current one on, so that a cursor saved
    before a look-ahead can be restored.

    Each window is (ring times, edges, start time): lists, or with ``arrays`` float64
    and intp arrays (what the compiled plan reads; :meth:`at` and :meth:`step` give
    Python numbers either way)."""

    def __init__(
        self, clocks: PoissonClocks, rng: np.random.Generator, start: float, window: float,
        arrays: bool = False,
    ):  # fmt: skip
        self.clocks, self.rng, self.start, self.window = clocks, rng, start, window
        self.arrays = arrays
        self.windows: list[tuple[Any, Any, float]] = []
        self.first = 0  # absolute index of windows[0]
        self.w, self.k = 0, 0  # cursor: window (absolute), ring in it (len: its end)
        self.extend()

    def extend(self) -> None:
        """Draw the next window (the generator's next draw, as ``ring_loop`` makes it)."""
        times, picked = self.clocks.ring(self.rng, self.window)
        base = self.start + (self.first + len(self.windows)) * self.window
        if self.arrays:
            at = np.ascontiguousarray(times + base, dtype=np.float64)
            self.windows.append((at, np.ascontiguousarray(picked, dtype=np.intp), base))
        else:
            self.windows.append(((times + base).tolist(), picked.tolist(), base))

    def at(self) -> float:
        """Target time of the next yield point (a ring, or the window's end)."""
        times, _, base = self.windows[self.w - self.first]
        return float(times[self.k]) if self.k < len(times) else base + self.window

    def step(self) -> int | None:
        """Pass the next yield point: its edge for a ring, None for a window's end (the
        next window is drawn then, as ``ring_loop`` draws it)."""
        times, picked, _ = self.windows[self.w - self.first]
        if self.k < len(times):
            self.k += 1
            return int(picked[self.k - 1])
        self.w, self.k = self.w + 1, 0
        if self.w - self.first == len(self.windows):
            self.extend()
        return None

    def cursor(self) -> tuple[int, int]:
        return self.w, self.k

    def restore(self, cursor: tuple[int, int]) -> None:
        self.w, self.k = cursor

    def prune(self) -> None:
        """Forget the windows before the cursor's."""
        drop = self.w - self.first
        if drop > 0:
            del self.windows[:drop]
            self.first = self.w
