"""Edge exchanges alone on their links, timed in closed form (the network clock's fast path).

With ``max_concurrent: 1`` and no shared links, the two flows of an exchange (i → j on
i's upload and j's download, j → i on j's upload and i's download) are alone on their
resources unless another kind of traffic (a ``fetch`` download) reaches one of them.
A flow alone finishes at the closed form of :mod:`sim.network.flows`,
t1 = start + route latency, F = t1 + nbytes / rate (rate = the smallest capacity share,
``min(up_src, down_dst)`` under ``maxmin``): no SimPy event, no max-min solve is needed.

:class:`SoloExchanges` is the protocol's SimPy process when a run allows it
(:meth:`SoloExchanges.build`). It rings the edge clocks as
:func:`protocols._async_net.ring_loop` does and, at a ring, plans a **segment**: every
ring up to the next event that could change anything it computes — an *interfering*
event: a sample, a churn step, the end of the run, a download's flow (anything but the
flow network's own events for this process's flows and those flows' ``done``
callbacks) — at most :func:`settings.segment_rings` rings (∝ the number of peers). In a segment
the arithmetic of every exchange that completes before its end is applied at once, in
waves of disjoint pairs (the rounds clock's batching,
:func:`protocols._edge_clocks.waves`); an exchange that would complete after it (a
*straddler*) is sent as two real flows at its ring, so that the interfering event finds
it in flight, as today. Between segments, and whenever a
segment cannot be planned, rings are handled one at a time as
:func:`protocols._async_net.exchange_process` handles them (the general path).

Why the result is today's, bit for bit (the reasoning the checks below rest on):

- Nothing outside the process can look at the state, the counters or the network
  between two interfering events; an exchange's rows are touched by nothing else between
  its snapshot and its update (both ends are busy), so it is one atomic step, applied
  in time order per peer (waves).
- Times: the network's wake-up for a flow of finish F fires at W + (F − W), W the
  instant it was scheduled. When F ≤ 2·t1 (t1: the flow's rate was set) every
  W ∈ [t1, F] gives exactly F (Sterbenz), so neither the wake-ups this process no longer
  causes nor those it still causes move any completion. A segment is planned only
  when this holds for every flow of the process alive in it; a segment that starts
  early in a run (a transfer longer than the time elapsed) is handled one ring at a
  time.
- The network completes at one wake-up every flow within ``REL_EPS`` of its size of
  done; two finishes that close (other than equal) are refused: the segment is then
  handled one ring at a time.
- Flow ids, ``flows_started``, ``flows_completed`` and the bytes per peer are counted
  (:meth:`~sim.network.flows.FlowNetwork.count_solo`) in send order before any other
  flow is sent; every exchange flow carries the same bytes, so the order of the
  additions per peer does not matter.
- A general exchange still in flight when a segment starts (a straddler, or one sent one
  ring at a time) is *adopted* when it completes inside the segment: its closed-form
  completion is known (it was alone all along), and its update is applied with the
  segment's, at its completion time; its flows' ``done`` callbacks then only count it
  off. One that was in flight while another kind of flow was sent may have shared a
  resource: until it ends, no segment is planned.
- The ring times are those of :func:`~protocols._async_net.ring_loop`, whose time moves
  by ``now + max(at − now, 0)`` per ring and window end; the process lands on them
  exactly (:func:`hops`).

With a watcher (exact targets) the segment's exchanges are shown to it in time order
(:meth:`SoloExchanges.settle`); rows that decay between events (A²CiD²) are shown as
their trajectories after each exchange (``estimate_rows``), and a timer the watcher sets
inside the segment (its predicted crossing of the stop target) cuts the segment there,
like an exchange it did not take.

The fast path is off (the general path runs) with ``max_concurrent`` > 1, shared links,
a watcher that cannot take batches (``batches`` false: a state not in numpy, decaying
rows of events that do not keep the sum), a network whose flows someone watches (a
trace, a wrapped ``send``), or :data:`settings.ENABLED` false. It assumes that the run changes
only through SimPy events (as every engine runs it); a test that preempts peers between
two ``env.step()`` calls must wrap ``send`` or turn :data:`settings.ENABLED` off.
"""

from protocols._solo_exchanges import settings
from protocols._solo_exchanges.exchange import Batch, Exchange, Segment, segment_waves
from protocols._solo_exchanges.process import SoloExchanges
from protocols._solo_exchanges.timing import EdgeTimes, RingStream, hops, next_interfering

__all__ = [
    "Batch", "EdgeTimes", "Exchange", "RingStream", "Segment", "SoloExchanges", "hops",
    "next_interfering", "segment_waves", "settings",
]  # fmt: skip
