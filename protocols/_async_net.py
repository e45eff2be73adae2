"""Edge-clock exchanges on the ``network`` clock: continuous time, every vector a flow.

The edge clocks ring as on the rounds clock — :class:`~protocols._edge_clocks.PoissonClocks`
draws one unit of time at a time (superposition: Poisson(Σλ) rings, uniform times, edge
∝ λ), so for one seed the ring times and edges are exactly the rounds clock's. At a ring
on edge (i, j):

- an end that is absent → the ring is skipped (``counters["skipped_absent"]``);
- an end already in ``max_concurrent`` exchanges → skipped (``counters["skipped_busy"]``);
- otherwise the exchange starts (``counters["exchanges"]``): m = (s_i − s_j)/2 is taken
  from the rows **now** (the snapshots sent), and two flows of S bytes go i → j and
  j → i. When both have completed, x_i ← x_i − m and x_j ← x_j + m
  (``counters["completed"]``): the pair's sum changes by −m + m, so the global sum is
  preserved to round-off however exchanges overlap. If a flow fails (an end was
  preempted), the exchange is cancelled for both ends, nothing is applied and both ends
  are free again at that instant (``counters["cancelled"]``).

The straggler ``delay`` of peers does not apply here (it is a per-round start delay).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol

import numpy as np
import simpy

from protocols.base import State
from sim.kernels import pairwise_delta

#: Simulated time drawn from the clocks at once (the rounds clock's round).
WINDOW = 1.0


class RunEnv(Protocol):
    """What a continuous-time protocol process needs from the run."""

    env: simpy.Environment
    net: Any  # sim.network.FlowNetwork
    present: np.ndarray  # (n_peers,) bool, shared with churn (True = present now)
    state: State


class _Exchange:
    """One exchange in flight: its ends, m = (s_i − s_j)/2 and how many flows are left."""

    __slots__ = ("busy", "counters", "i", "j", "left", "m", "state")

    def __init__(
        self, i: int, j: int, m: Any, state: State, busy: list[int], counters: dict
    ) -> None:
        self.i, self.j, self.m, self.state = i, j, m, state
        self.busy, self.counters, self.left = busy, counters, 2

    def on_end(self, event: simpy.Event) -> None:
        """Callback of each flow's ``done``: apply after both, cancel on a failure."""
        if self.left <= 0:  # already cancelled (the other flow failed first)
            return
        if event.ok:
            self.left -= 1
            if self.left:
                return
            x, i, j, m = self.state.x, self.i, self.j, self.m
            if isinstance(x, np.ndarray):
                x[i] -= m
                x[j] += m
            else:
                self.state.x = pairwise_delta(
                    x, np.array([i]), np.array([j]), m[None, :], -m[None, :]
                )
            self.counters["completed"] += 1
        else:
            self.left = 0
            self.counters["cancelled"] += 1
        self.busy[self.i] -= 1
        self.busy[self.j] -= 1


def exchange_process(protocol: Any, run: RunEnv) -> Generator[simpy.Event, Any, None]:
    """SimPy process body: ring the edge clocks of ``protocol`` forever, in simulated
    seconds, starting exchanges over ``run.net`` (see the module docstring).

    ``protocol`` is an :class:`~protocols._edge_clocks.EdgeClockProtocol` (``edges``,
    ``clocks``, ``counters``, ``params.max_concurrent``, ``ctx``).
    """
    env, net, present, state = run.env, run.net, run.present, run.state
    ctx, counters = protocol.ctx, protocol.counters
    for key in ("completed", "cancelled"):
        counters.setdefault(key, 0)
    ends_i = protocol.edges[:, 0].tolist()
    ends_j = protocol.edges[:, 1].tolist()
    cap = int(protocol.params.max_concurrent)
    nbytes = float(ctx.vector_bytes)
    busy = [0] * ctx.n_peers
    send, timeout = net.send, env.timeout
    start = float(env.now)
    window = 0
    while True:
        times, picked = protocol.clocks.ring(ctx.rng, WINDOW)
        base = start + window * WINDOW
        window += 1
        if times.size == 0:
            yield timeout(max(base + WINDOW - env.now, 0.0))
            continue
        for at, edge in zip((times + base).tolist(), picked.tolist(), strict=True):
            yield timeout(max(at - env.now, 0.0))
            i, j = ends_i[edge], ends_j[edge]
            counters["rings"] += 1
            if not (present[i] and present[j]):
                counters["skipped_absent"] += 1
                continue
            if busy[i] >= cap or busy[j] >= cap:
                counters["skipped_busy"] += 1
                continue
            counters["exchanges"] += 1
            busy[i] += 1
            busy[j] += 1
            x = state.x
            exchange = _Exchange(i, j, (x[i] - x[j]) * 0.5, state, busy, counters)
            send(i, j, nbytes).done.callbacks.append(exchange.on_end)
            send(j, i, nbytes).done.callbacks.append(exchange.on_end)
        yield timeout(max(base + WINDOW - env.now, 0.0))
