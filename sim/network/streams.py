"""Streams and latches of the flow network (a mixin of
:class:`~sim.network.flows.FlowNetwork`, whose attributes it uses).

- A *stream* is one connection carrying pieces back to back: a flow sent with ``keep``
  stays in its bandwidth phase, parked, once its piece is through, and :meth:`resume`
  sends the next piece at its rate (:meth:`shorten` cuts a flow back to a piece,
  :meth:`close_stream` ends the stream).
- A *latch* counts a caller's flows in flight (:meth:`latches`, :meth:`join_latch`):
  a completion while others of its latch are still in flight is *quiet*, a call instead
  of a SimPy event.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import cast

import numpy as np
import simpy

from sim.network import compiled
from sim.network.faults import NetworkError
from sim.network.flow import BANDWIDTH, DONE, FAILED, Flow, tell_loud
from sim.network.general import GeneralCore


class Streams:
    """:class:`~sim.network.flows.FlowNetwork`'s streams and latches."""

    # set by FlowNetwork.__init__
    env: simpy.Environment
    flows_started: int
    flows_completed: int
    _core: GeneralCore | compiled.CompiledCore
    _latch_left: np.ndarray | None
    _latch_top: int
    _latch_free: dict[int, list[int]]
    _complete: Callable[[Flow, float], None]
    _schedule_wake: Callable[[float], None]

    def resume(self, flow: Flow, nbytes: float, keep: bool = False) -> Flow:
        """Send the next piece of ``nbytes`` on the parked stream ``flow`` now (its
        previous piece completed at this instant): what :meth:`send` with
        ``latency=False`` would do for a new flow on the same route, without leaving and
        re-entering the bandwidth phase. The flow takes a new id and ``done`` event, as
        a new flow would; ``keep`` as in :meth:`send`. A stream is one fluid flow:
        pieces sent back to back have one piece in the bandwidth phase at a time, on the
        same resources with the same weight, so max-min gives the next piece the rate
        the previous one had (``tests/property/test_stream_equivalence.py``)."""
        if not flow.parked:
            raise NetworkError("resume(flow)", flow, "a parked stream (sent with keep=True)")
        nbytes = float(nbytes)
        if not 0.0 <= nbytes < math.inf:
            raise NetworkError("resume(nbytes)", nbytes, "a finite number of bytes >= 0")
        now = self.env.now
        key = self.flows_started
        self.flows_started += 1
        flow.nbytes, flow.remaining, flow.keep = nbytes, nbytes, keep
        flow.phase, flow.end_s, flow.bytes_sent = BANDWIDTH, math.nan, 0.0
        flow.latency_s = 0.0  # no route latency, as send(latency=False) gives a new piece
        flow._done, flow.start_s = None, now  # a new piece, a new event
        self._core.refill(flow, key, now)  # flow.id is key from here on
        if nbytes > 0.0:
            flow.parked = False
        else:  # as send: done at once (no time in the bandwidth phase)
            self._complete(flow, now)
            flow.done.succeed(now)
            if not keep:
                flow.parked = False
                self._core.remove((flow,), now)
        self._schedule_wake(now)
        return flow

    # -- latches: completions nobody needs to see at once -------------------------------
    def latches(self, k: int) -> int:
        """Reserve ``k`` latches (counters of flows in flight, :meth:`join_latch`); the
        first one's number, the others follow it; -1 where the network has no quiet
        completions (the general core). Give them back with :meth:`free_latches`."""
        left = self._latch_left
        if left is None:
            return -1
        free = self._latch_free.get(k)
        if free:
            return free.pop()
        base = self._latch_top
        self._latch_top = top = base + k
        if top > left.size:
            grown = np.zeros(max(2 * left.size, top), dtype=np.int64)
            grown[: left.size] = left
            self._latch_left = grown
        return base

    def free_latches(self, base: int, k: int) -> None:
        """Give back the ``k`` latches from ``base`` (:meth:`latches`): no flow of theirs
        may be in flight."""
        left = self._latch_left
        if base < 0 or left is None:
            return
        if left[base : base + k].any():
            raise RuntimeError(f"free_latches: flows still in flight on latches {base}..")
        self._latch_free.setdefault(k, []).append(base)

    def join_latch(
        self,
        flow: Flow,
        latch: int,
        quiet: Callable[[Flow], None],
        loud: Callable[[Flow, bool], None],
    ) -> bool:
        """Count the in-flight ``flow`` on ``latch`` (from :meth:`latches`) until it ends;
        whether it does (not on the general core, nor a stream's piece, nor a flow that
        has ended already: the caller then watches ``done`` as usual).

        When it completes while other flows of its latch are still in flight, and
        nothing else of the simulation happens at that instant, its completion is
        *quiet*: the network calls ``quiet(flow)`` at once instead of settling ``done``
        (which is then never made), and may go on to the next completion instants
        without a wake-up each, as long as every flow completing there is quiet and no
        other event comes first. The caller promises that such a completion starts
        nothing and that nothing else waits for ``done``: its ``quiet`` only records
        it. The last flow of a latch to end and a failure are told to
        ``loud(flow, ok)`` as :meth:`notify` tells them. Times, counts and order are
        those of the usual path."""
        left = self._latch_left
        if left is None or latch < 0 or flow.keep:
            return False
        if flow.phase is DONE or flow.phase is FAILED:
            return False
        flow.latch, flow.quiet, flow.loud = latch, quiet, loud
        left[latch] += 1
        if flow.slot >= 0:
            core = cast(compiled.CompiledCore, self._core)
            core.latch_of[flow.slot] = latch
        return True

    def notify(self, flow: Flow, loud: Callable[[Flow, bool], None]) -> None:
        """Call ``loud(flow, ok)`` when the in-flight ``flow`` ends (``ok``: it
        completed), as a callback of ``done`` would be called, without making ``done``
        where nobody asks for it: a completion in a wake-up with nothing else at its
        instant is told directly, after the wake-up's completions, in completion order
        (as SimPy would process their events; :meth:`_on_wake`). The caller promises
        that ``loud`` starts and interrupts no SimPy process (whose urgent events would
        come before the next completion's call there). A flow whose ``done`` exists, or
        that has ended already, is told by ``done``'s callback."""
        if flow._done is not None or flow.phase is DONE or flow.phase is FAILED:
            flow.done.callbacks.append(partial(tell_loud, loud, flow))
        else:
            flow.loud = loud

    def keep_stream(self, flow: Flow) -> None:
        """From now on the in-flight ``flow`` opens a stream, as if sent with
        ``keep=True``: its next piece will :meth:`resume` it the instant it completes.
        A flow counted on a latch leaves it (its end will release that piece, so it is
        an event). A flow that has ended, or keeps already, is left alone."""
        if flow.keep or flow.phase is DONE or flow.phase is FAILED:
            return
        flow.keep = True
        if flow.latch >= 0:
            cast(np.ndarray, self._latch_left)[flow.latch] -= 1
            flow.latch = -1
        if flow.slot >= 0 and isinstance(self._core, compiled.CompiledCore):
            self._core.keep[flow.slot] = True
            self._core.latch_of[flow.slot] = -1

    def shorten(self, flow: Flow, nbytes: float, keep: bool) -> None:
        """``flow``, in its bandwidth phase, carries ``nbytes`` in all instead of its size (at
        least what it has moved; less moves nothing more and it completes now): it
        completes once ``nbytes`` are through, at the rate it has, keeping its place;
        ``keep`` as in :meth:`send`. The network clock runs several pieces of a stream as
        one flow and cuts it back to the piece whose end must be seen
        (:mod:`sim.engine.netclock.chains`)."""
        if flow.phase is not BANDWIDTH or flow.parked:
            raise NetworkError("shorten(flow)", flow, "a flow in its bandwidth phase")
        nbytes = float(nbytes)
        if not 0.0 <= nbytes <= flow.nbytes:
            raise NetworkError("shorten(nbytes)", nbytes, f"bytes in [0, {flow.nbytes}]")
        cut = flow.nbytes - nbytes
        flow.nbytes, flow.keep = nbytes, keep
        now = self.env.now
        self._core.shorten(flow, cut, now)
        self._schedule_wake(now)

    def count_continued(self, pieces: int) -> None:
        """Count ``pieces`` pieces of streams that completed inside one flow, each
        followed by the next piece of its stream in the same flow (a chunk,
        :meth:`shorten`): flows started and completed, as :meth:`resume` would count
        them; their bytes are the flow's."""
        self.flows_started += pieces
        self.flows_completed += pieces

    def close_stream(self, flow: Flow) -> None:
        """End the parked stream ``flow`` (its next piece is not sent): it leaves the
        bandwidth phase now. A flow that is not parked is left alone."""
        if not flow.parked:
            return
        flow.parked = False
        now = self.env.now
        self._core.remove((flow,), now)
        self._schedule_wake(now)
