"""How the engine routes churn through the tracker (every change of rows or membership).

On the network clock churn callbacks run at arbitrary instants: a preemption, a return
(with ``reset``, rows rewritten at once), a ``fetch`` arrival (rows copied when the
download completes), a join or a leave. Each is wrapped so that the tracker reads the
rows before and after it (:meth:`~sim.engine.observe.tracker.Tracker.change`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from typing import Any

import numpy as np
import simpy

from sim.engine.observe.tracker import Tracker
from sim.model.churn import churn_process
from sim.model.churn.schedule import ChurnChange
from sim.model.rejoin import NetworkRejoin

PeersCallback = Callable[[np.ndarray], None]


def watched(tracker: Tracker, callback: PeersCallback) -> PeersCallback:
    """``callback(peers)`` run through the tracker."""

    def call(peers: np.ndarray) -> None:
        tracker.change(peers, lambda: callback(peers))

    return call


def watched_membership(
    tracker: Tracker, callback: Callable[[np.ndarray, np.ndarray], None]
) -> Callable[[np.ndarray, np.ndarray], None]:
    """``callback(joined, left)`` run through the tracker."""

    def call(joined: np.ndarray, left: np.ndarray) -> None:
        tracker.change(np.concatenate((joined, left)), lambda: callback(joined, left))

    return call


def watched_churn(
    env: simpy.Environment,
    schedule: Iterable[ChurnChange],
    clock: Any,
    rejoin: NetworkRejoin,
    membership: Callable[[np.ndarray, np.ndarray], None],
    tracker: Tracker,
) -> Generator[simpy.Event, Any, None]:
    """:func:`~sim.model.churn.churn_process` of the network clock, every callback through the
    tracker: preemptions (``clock.preempt``), returns (``rejoin.restore``), membership."""
    return churn_process(
        env, schedule, watched(tracker, clock.preempt), watched(tracker, rejoin.restore),
        watched_membership(tracker, membership),
    )  # fmt: skip


def timer(env: simpy.Environment) -> Callable[[float, Callable[[], None]], None]:
    """``schedule(at, callback)``: call ``callback()`` at simulated time ``at`` (the
    tracker's predicted crossings)."""

    def schedule(at: float, callback: Callable[[], None]) -> None:
        event = env.timeout(max(at - float(env.now), 0.0))
        event.callbacks.append(lambda _event: callback())

    return schedule


class WatchedRejoin(NetworkRejoin):
    """:class:`~sim.model.rejoin.NetworkRejoin` whose ``fetch`` arrivals (a row copied, the
    peer present again) go through the tracker. Both ends are first brought to now
    (:meth:`~protocols.base.Protocol.sync_rows`), so that the copy does not depend on
    when the source was last brought forward (A²CiD², and with it on the sampling)."""

    def __init__(self, tracker: Tracker, *args: Any) -> None:
        super().__init__(*args)
        self.tracker = tracker

    def _arrived(self, event: Any, source: int, peer: int, *rest: Any) -> None:
        arrived = super()._arrived
        if event.ok:
            ends = np.array([source, peer])
            self.tracker.protocol.sync_rows(self.state, ends, float(self.clock.env.now))
        self.tracker.change(np.array([peer]), lambda: arrived(event, source, peer, *rest))
