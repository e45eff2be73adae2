"""A flow: one message of the flow-level network (:class:`Flow`) and its phases.

:class:`~sim.network.flows.FlowNetwork` makes flows (``send``) and moves them through
their phases: ``latency`` (the route latency), ``bandwidth`` (a max-min share of every
resource on the route, :class:`~sim.network.maxmin.Share`), then ``done`` or ``failed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import simpy

from sim.network.maxmin import Share
from sim.network.routes import Route

__all__ = ["BANDWIDTH", "DONE", "FAILED", "LATENCY", "Flow"]

LATENCY, BANDWIDTH, DONE, FAILED = "latency", "bandwidth", "done", "failed"


class Flow(Share):
    """A message of ``nbytes`` from ``src`` to ``dst`` (created by :meth:`FlowNetwork.send`).

    Attributes
    ----------
    id : int
        Sequence number in its network (0, 1, …), the tie-breaker everywhere.
    src, dst : int
        Peers.
    nbytes : float
        Size, bytes.
    tag : Any
        Whatever the sender attached.
    done : simpy.Event
        Succeeds with the completion time (seconds) or fails with :class:`FlowFailed`
        (made on first use; a quiet completion, :meth:`FlowNetwork.join_latch`, never
        makes it).
    start_s, latency_s : float
        Send time and route latency, seconds.
    end_s : float
        Completion or failure time, seconds (``nan`` while in flight).
    phase : str
        ``"latency"``, ``"bandwidth"``, ``"done"`` or ``"failed"``.
    bytes_sent : float
        Bytes through once the flow ended (``nbytes`` if done); see
        :attr:`FlowNetwork.bytes_out` for in-flight progress.
    """

    __slots__ = (
        "_done", "bytes_sent", "dst", "end_s", "env", "id", "keep", "latch", "latency_s",
        "loud", "nbytes", "parked", "phase", "quiet", "remaining", "slot", "src", "start_s",
        "t_last", "tag", "version",
    )  # fmt: skip
    env: simpy.Environment
    start_s: float

    def __init__(
        self, key: int, src: int, dst: int, nbytes: float, tag: Any, route: Route, w: float
    ) -> None:
        self.id, self.src, self.dst, self.nbytes, self.tag = key, src, dst, nbytes, tag
        self.latency_s, self.res = route
        self.phase, self.end_s, self.bytes_sent, self.version = LATENCY, math.nan, 0.0, 0
        self.remaining, self.t_last, self.w = nbytes, 0.0, w
        self.rate = self.lam = self.new_lam = 0.0
        self.bneck = self.new_bneck = self.slot = -1
        self.mark = self.frozen = 0
        #: keep: the stream continues after this piece (:meth:`FlowNetwork.resume`);
        #: parked: its piece is done and it keeps its place (and rate) in the bandwidth
        #: phase until the next piece is resumed or the stream closed.
        self.keep = self.parked = False
        #: latch: the latch the flow is counted on (-1: none) and quiet: what its quiet
        #: completion calls instead of settling ``done``
        #: (:meth:`FlowNetwork.join_latch`)
        self.latch = -1
        self.quiet: Callable[[Flow], None] | None = None
        #: loud: told ``loud(flow, ok)`` when the flow ends, if it has not ended quietly
        #: (:meth:`FlowNetwork.notify`)
        self.loud: Callable[[Flow, bool], None] | None = None
        self._done: simpy.Event | None = None

    @property
    def done(self) -> simpy.Event:
        """The flow's event (made on first use: a quiet completion never needs one)."""
        event = self._done
        if event is None:
            event = self._done = simpy.Event(self.env)
        return event

    def settled(self) -> simpy.Event:
        """:attr:`done`, about to be settled: with the ``loud`` callback
        (:meth:`FlowNetwork.join_latch`, :meth:`FlowNetwork.notify`) attached if the
        flow has one."""
        event = self.done
        loud = self.loud
        # a settled flow is never quiet: drop both callbacks, which hold the caller's
        # round (a failed flow's event holds the flow in a cycle, through FlowFailed)
        self.quiet = self.loud = None
        if loud is not None:
            event.callbacks.append(partial(tell_loud, loud, self))
        return event

    def __repr__(self) -> str:
        return f"Flow(id={self.id}, {self.src}->{self.dst}, {self.nbytes:g} B, {self.phase})"


def tell_loud(loud: Callable[[Flow, bool], None], flow: Flow, event: simpy.Event) -> None:
    """``done``'s callback for a flow's ``loud``: whether it completed."""
    loud(flow, event.ok)
