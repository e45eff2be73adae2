"""Churn on the ``network`` clock: a SimPy process that replays a churn schedule.

The process walks a :class:`~sim.model.churn.schedule.ChurnSchedule` and, at each step's time,
calls ``on_down(peers)`` and then ``on_up(peers)``: downs first, so that whatever the
network does for a preemption (failing the peer's in-flight flows) happens before the
returning peers can start anything at that instant. A callback is not called with an
empty array. There is one SimPy event per step (per distinct change time), never one per
peer; a step that changes nobody (a ``bernoulli`` redraw, a wave hitting only peers
already down) still costs its event but calls nothing.

The process draws each step before waiting for its time, so the schedule's own state
(``schedule.present``) runs one step ahead: keep the network's presence mask from the
callbacks. Start the process before the protocol's so that a step at time 0 (the initial absences
of ``exponential``, say) is applied before any flow starts. An infinite schedule never
ends: run the environment until a stop event or a time, not until it runs dry.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from typing import Any

import numpy as np
import simpy

from sim.model.churn.schedule import ChurnChange

#: What the network engine does when peers leave or return: gets an (k,) intp array.
PeersCallback = Callable[[np.ndarray], None]


def churn_process(
    env: simpy.Environment,
    schedule: Iterable[ChurnChange],
    on_down: PeersCallback,
    on_up: PeersCallback,
    on_membership: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> Generator[simpy.Event, Any, None]:
    """A SimPy process generator: apply ``schedule`` in simulated time.

    Parameters
    ----------
    env
        The run's environment; its time is in seconds.
    schedule
        The churn schedule (consumed: it is a single-pass cursor).
    on_down
        Called with the (k,) sorted intp array of peers preempted at ``env.now``.
    on_up
        Called with the (k,) sorted intp array of peers back at ``env.now``.
    on_membership
        Called with ``(joined, left)`` when peers start or stop existing
        (``churn.joins``/``leaves``), before ``on_down``.

    Notes
    -----
    Each wait is ``time_s - env.now``, so a step fires at its time up to one rounding of
    that subtraction. A step already due when the process reaches it (a process started
    late) is applied at once, in order.

    Examples
    --------
    ::

        env.process(churn_process(env, schedule, network.fail_peers, network.restore))
    """
    for change in schedule:
        delay_s = change.time_s - env.now
        if delay_s > 0:
            yield env.timeout(delay_s)
        if on_membership is not None and (change.joined.size or change.left.size):
            on_membership(change.joined, change.left)
        if change.down.size:
            on_down(change.down)
        if change.up.size:
            on_up(change.up)


__all__ = ["PeersCallback", "churn_process"]
