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
callbacks) — at most :data:`SEGMENT_RINGS` rings (more with many peers). In a segment
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
trace, a wrapped ``send``), or :data:`ENABLED` false. It assumes that the run changes
only through SimPy events (as every engine runs it); a test that preempts peers between
two ``env.step()`` calls must wrap ``send`` or turn :data:`ENABLED` off.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from typing import Any, cast

import numpy as np
import simpy

from protocols._edge_clocks import PoissonClocks
from sim.network.flows import BANDWIDTH, DONE, LATENCY, REL_EPS, FlowNetwork

#: Module switch: False runs every exchange through the general path (tests, benchmarks).
ENABLED = True
#: When a list, every completed exchange of either path is appended to it as
#: (i, j, start, end) seconds (tests compare the two paths' completion times).
EXCHANGES: list[tuple[int, int, float, float]] | None = None
#: Most rings planned in one segment (bounds the memory of a plan, ≈ 130 bytes a ring),
#: per :data:`SEGMENT_PEERS` peers (at least once, at most :data:`SEGMENT_SCALE` times):
#: the exchanges in flight at a segment's end go out as flows, and there are more of
#: them the more peers ring, so a fixed length would put a share ∝ N of the exchanges on
#: the general path (measured at 10^5 peers: 0.30 → 0.17 CPU s per simulated second).
SEGMENT_RINGS = 1 << 16
SEGMENT_PEERS = 1 << 14
SEGMENT_SCALE = 4
#: Rings planned between two looks at the run's interrupt (its environment's ``_poll``,
#: :class:`sim.engine.observe.observer.PolledEnvironment`, which looks every 256
#: events; a ring costs at least one event on the general path).
POLL_RINGS = 256
#: Peers up to which a plan reads the presence mask as a list (faster per ring; above,
#: copying it for a short segment would cost more than the rings).
LIST_PEERS = 16384
#: Rings handled one at a time after a segment could not be planned, before the next try.
RETRY_RINGS = 32
#: With a watcher, a segment's rows before and after every exchange are kept until the
#: watcher has taken them: at most this many elements (``rings × dim``) per segment.
WATCHED_ELEMENTS = 1 << 20
#: Two finishes closer than this many flow-size windows (``REL_EPS × transfer time``)
#: refuse a segment (the factor covers the round-off of the comparison).
NEAR_FACTOR = 4.0

#: ``batch(a, b, start, end, waves)``: apply the exchanges k of each wave of ``waves``
#: (index arrays into the host arrays a, b, start, end), wave after wave: (a_k, b_k)
#: snapshot at ``start[k]``, update at ``end[k]``, each alone on its rows in between;
#: the exchanges of a wave touch disjoint peers, and each comes after every earlier
#: exchange of its peers.
Batch = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]], None]
_MOVING = (LATENCY, BANDWIDTH)


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


class Exchange:
    """One exchange in flight as two real flows: its ends, its snapshot, how many flows
    are left; with the fast path also its ring time, edge, flows, and whether a segment
    adopted it (applied its update) or another kind of flow may have shared its links."""

    __slots__ = (
        "adopted", "apply", "busy", "counters", "edge", "flows", "i", "j", "left", "live",
        "sent", "shared", "start_s",
    )  # fmt: skip

    def __init__(
        self, i: int, j: int, sent: Any, apply: Callable[..., None], busy: list[int], counters: dict
    ) -> None:
        self.i, self.j, self.sent, self.apply = i, j, sent, apply
        self.busy, self.counters, self.left = busy, counters, 2
        self.adopted = self.shared = False
        self.start_s, self.edge = math.nan, -1
        self.flows: tuple[Any, ...] = ()
        self.live: dict[Exchange, None] | None = None

    def on_end(self, event: simpy.Event) -> None:
        """Callback of each flow's ``done``: apply after both, cancel on a failure (an
        adopted exchange was applied by its segment: it is only counted off)."""
        if self.left <= 0:  # already cancelled (the other flow failed first)
            return
        if event.ok:
            self.left -= 1
            if self.left:
                return
            if self.adopted:
                self._forget()
                return
            self.apply(self.i, self.j, self.sent)
            self.counters["completed"] += 1
            if EXCHANGES is not None:
                EXCHANGES.append((self.i, self.j, self.start_s, cast(float, event.value)))
        else:
            if self.adopted:  # a segment ends before anything can fail a flow
                raise AssertionError(f"adopted exchange {self.i}-{self.j} failed")
            self.left = 0
            self.counters["cancelled"] += 1
        self.busy[self.i] -= 1
        self.busy[self.j] -= 1
        self._forget()

    def _forget(self) -> None:
        if self.live is not None:
            self.live.pop(self, None)


class EdgeTimes:
    """Closed-form timing of each edge's two flows when alone (both directions).

    ``lat_ij[e]``: route latency i → j; ``d_ij[e]``: nbytes / rate (0 for a flow that
    completes on entering: no bytes or no finite resource); likewise ``j → i``.
    """

    def __init__(
        self, lat_ij: list[float], d_ij: list[float], lat_ji: list[float], d_ji: list[float]
    ):
        self.lat_ij, self.d_ij, self.lat_ji, self.d_ji = lat_ij, d_ij, lat_ji, d_ji
        self.longest = max(max(d_ij, default=0.0), max(d_ji, default=0.0))

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
    before a look-ahead can be restored."""

    def __init__(
        self, clocks: PoissonClocks, rng: np.random.Generator, start: float, window: float
    ):
        self.clocks, self.rng, self.start, self.window = clocks, rng, start, window
        self.windows: list[tuple[list[float], list[int], float]] = []
        self.first = 0  # absolute index of windows[0]
        self.w, self.k = 0, 0  # cursor: window (absolute), ring in it (len: its end)
        self.extend()

    def extend(self) -> None:
        """Draw the next window (the generator's next draw, as ``ring_loop`` makes it)."""
        times, picked = self.clocks.ring(self.rng, self.window)
        base = self.start + (self.first + len(self.windows)) * self.window
        self.windows.append(((times + base).tolist(), picked.tolist(), base))

    def at(self) -> float:
        """Target time of the next yield point (a ring, or the window's end)."""
        times, _, base = self.windows[self.w - self.first]
        return times[self.k] if self.k < len(times) else base + self.window

    def step(self) -> int | None:
        """Pass the next yield point: its edge for a ring, None for a window's end (the
        next window is drawn then, as ``ring_loop`` draws it)."""
        times, picked, _ = self.windows[self.w - self.first]
        if self.k < len(times):
            self.k += 1
            return picked[self.k - 1]
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


class SoloExchanges:
    """The edge-clock exchange process with the closed-form fast path (module docstring).

    Built by :meth:`build` from what :func:`protocols._async_net.exchange_process`
    prepared; :meth:`process` is the SimPy process body.
    """

    @classmethod
    def build(
        cls, protocol: Any, run: Any, rules: Any, batch: Batch | None, nbytes: float,
        window: float, one: Callable[..., None] | None = None,
    ) -> SoloExchanges | None:  # fmt: skip
        """The process, or None when the run needs the general path for every ring.

        ``rules`` is the (snapshot, apply) pair (``apply(i, j, sent, now)`` with an
        explicit time for adopted exchanges), ``batch`` the protocol's :data:`Batch`,
        ``nbytes`` the bytes of each flow, ``window`` the clocks' draw
        (:data:`~protocols._async_net.WINDOW`), ``one`` the ``apply`` of exchanges sent
        as flows (default ``apply``; with a watcher, one that shows it each change)."""
        if not ENABLED or batch is None:
            return None
        watcher = protocol.watcher
        if watcher is not None and not (
            getattr(watcher, "batches", False) and type(run.state.x) is np.ndarray
        ):
            return None
        if int(protocol.params.max_concurrent) != 1:
            return None
        if type(run.net) is not FlowNetwork or "send" in vars(run.net):
            return None  # someone watches every flow sent (a trace, a wrapped send)
        times = EdgeTimes.of(run.net, protocol.edges, nbytes)
        if times is None:
            return None
        return cls(protocol, run, rules, batch, nbytes, times, window, one)

    def __init__(
        self, protocol: Any, run: Any, rules: Any, batch: Batch, nbytes: float, times: EdgeTimes,
        window: float, one: Callable[..., None] | None = None,
    ) -> None:  # fmt: skip
        self.env, self.net, self.present = run.env, run.net, run.present
        self.state, self.protocol = run.state, protocol
        #: The watcher's rows decay between events: it is shown their trajectories
        #: (``estimate_rows``) after each exchange.
        self.decays = bool(getattr(protocol.watcher, "decay", False))
        self.estimate_rows = protocol.estimate_rows
        self._restore: Callable[[], None] = lambda: None
        self._last_taken_s = -math.inf
        self._taken = 0
        self.counters = protocol.counters
        self.snapshot, self.apply = rules
        self.apply_one = self.apply if one is None else one
        #: The exact-target tracker shown every exchange (:meth:`settle`), or None.
        self.watcher = protocol.watcher
        #: Most rings of a segment with a watcher (:data:`WATCHED_ELEMENTS`).
        self.watched_rings = max(64, WATCHED_ELEMENTS // max(1, int(protocol.ctx.dim)))
        self.batch, self.nbytes, self.times = batch, nbytes, times
        self.ends_i_array = np.ascontiguousarray(protocol.edges[:, 0], dtype=np.intp)
        self.ends_j_array = np.ascontiguousarray(protocol.edges[:, 1], dtype=np.intp)
        self.ends_i, self.ends_j = self.ends_i_array.tolist(), self.ends_j_array.tolist()
        n_peers = self.n_peers = protocol.ctx.n_peers
        self.busy = [0] * n_peers  # general exchanges in flight, not adopted
        self.free_at = [-math.inf] * n_peers  # end of the last exchange applied ahead
        self.live: dict[Exchange, None] = {}  # general exchanges in flight, in send order
        self.stream = RingStream(protocol.clocks, protocol.ctx.rng, float(self.env.now), window)
        self.expected_started = self.net.flows_started
        #: Flows of someone else may be in flight (see :meth:`notice`).
        self.foreign = False
        self.resume_at: float | None = None
        self.retry = 0
        #: Segments committed so far.
        self.segments = 0
        self.level = [0] * n_peers  # a plan's wave per peer (see :meth:`plan`)
        #: Rings to plan before the next look at the run's interrupt (:data:`POLL_RINGS`).
        self.unpolled = POLL_RINGS
        #: The last plan was refused because the watcher could take no exchange.
        self.starved = False

    # -- the process ---------------------------------------------------------------------
    def process(self) -> Generator[simpy.Event, Any, None]:
        """SimPy process body: ring forever, in segments where possible."""
        env, stream = self.env, self.stream
        while True:
            if self.resume_at is not None:
                at, self.resume_at = self.resume_at, None
                for delay in hops(float(env.now), at):
                    yield env.timeout(delay)
            else:
                yield env.timeout(max(stream.at() - env.now, 0.0))
            edge = stream.step()
            if edge is None:
                continue
            self.notice()
            if self.retry:
                self.retry -= 1
            elif self.ready():
                plan = self.plan(edge)
                if plan is not None and self.watcher is not None:
                    plan = self.settle(plan, edge)
                if plan is not None:
                    yield from self.commit(plan)
                    continue
                self.retry = 0 if self.starved else RETRY_RINGS
                self.starved = False
            self.ring(edge, float(env.now))

    def ring(self, edge: int, now: float) -> None:
        """One ring handled as :func:`~protocols._async_net.exchange_process` does."""
        i, j = self.ends_i[edge], self.ends_j[edge]
        counters = self.counters
        counters["rings"] += 1
        if not (self.present[i] and self.present[j]):
            counters["skipped_absent"] += 1
            return
        busy, free_at = self.busy, self.free_at
        if busy[i] or busy[j] or free_at[i] >= now or free_at[j] >= now:
            counters["skipped_busy"] += 1
            return
        counters["exchanges"] += 1
        self.send(i, j, now, edge)

    def send(self, i: int, j: int, now: float, edge: int) -> None:
        """Start the exchange of ``edge`` (i, j) as two real flows now."""
        self.busy[i] += 1
        self.busy[j] += 1
        exchange = Exchange(i, j, self.snapshot(i, j), self.apply_one, self.busy, self.counters)
        exchange.start_s, exchange.edge, exchange.live = now, edge, self.live
        exchange.shared = self.foreign
        send, nbytes = self.net.send, self.nbytes
        first, second = send(i, j, nbytes), send(j, i, nbytes)
        first.done.callbacks.append(exchange.on_end)
        second.done.callbacks.append(exchange.on_end)
        exchange.flows = (first, second)
        self.live[exchange] = None
        self.expected_started += 2

    # -- planning a segment --------------------------------------------------------------
    def notice(self) -> None:
        """Notice flows sent by someone else since the last look: every general exchange
        in flight may share a resource with one of them (``shared``), and so may every
        exchange started while :attr:`foreign` says some may still be in flight."""
        net = self.net
        if net.flows_started != self.expected_started:
            self.expected_started = net.flows_started
            self.foreign = True
            for exchange in self.live:
                exchange.shared = True
        if self.foreign and net.flows_started - net.flows_completed - net.flows_failed == sum(
            flow.phase in _MOVING for exchange in self.live for flow in exchange.flows
        ):
            self.foreign = False

    def ready(self) -> bool:
        """Whether a segment may start now: no other kind of flow in flight, every
        general exchange alone since it started and settled up to now."""
        if self.foreign:
            return False
        for exchange in self.live:
            if exchange.shared:
                return False
            ended = sum(flow.phase not in _MOVING for flow in exchange.flows)
            if ended != 2 - exchange.left:  # a done callback is pending at this instant
                return False
        return True

    def _harmless(self, callback: Any) -> bool:
        owner = getattr(callback, "__self__", None)
        return owner is self.net or (isinstance(owner, Exchange) and owner.live is self.live)

    def _finishes(self, exchange: Any) -> list[float] | None:
        """Closed-form finish of each flow of a general exchange (its end time once
        ended), or None when one of them is not safe (module docstring)."""
        edge, times = exchange.edge, self.times
        out = []
        for flow, lat, d in (
            (exchange.flows[0], times.lat_ij[edge], times.d_ij[edge]),
            (exchange.flows[1], times.lat_ji[edge], times.d_ji[edge]),
        ):
            if flow.phase is DONE:
                out.append(float(flow.end_s))
                continue
            t1 = exchange.start_s + lat
            finish = t1 + d
            if finish > t1 + t1:
                return None
            out.append(finish)
        return out

    def plan(
        self, edge: int, until: float = math.inf, again: Segment | None = None
    ) -> Segment | None:
        """Plan the segment that starts with the ring of ``edge`` now and ends at the next
        interfering event or ``until``, whichever comes first; None when it cannot be
        planned (nothing changed; the ring is then handled one at a time). ``again``: a
        segment planned from here before and undone; this one is its part before
        ``until`` (same bounds, the interrupt not looked at)."""
        env, stream, times = self.env, self.stream, self.times
        scale = min(SEGMENT_SCALE, max(1, self.n_peers // SEGMENT_PEERS))
        most = cap = SEGMENT_RINGS * scale  # rings, exchanges
        if again is not None:
            cap = again.cap
        elif self.watcher is not None:  # exchanges it can take before one must come alone
            cap = self.watcher.room() - len(self.live)
            if cap <= 0:  # that one is the next exchange: try again at the next ring
                self.starved = True
                return None
        if self.watcher is not None:
            most = min(most, self.watched_rings)
        start = float(env.now)
        horizon = min(next_interfering(env, self._harmless), until)
        if not horizon > start:
            return None
        segment = Segment()
        segment.unpolled, segment.cap = self.unpolled, cap
        moving: list[float] = []  # finishes of the general flows still moving
        candidates: list[tuple[Exchange, float]] = []  # general exchanges ending in it
        free_at, busy = self.free_at, self.busy
        for exchange in self.live:
            ends = self._finishes(exchange)
            if ends is None or exchange.adopted:
                return None
            moving.extend(
                e for e, f in zip(ends, exchange.flows, strict=True) if f.phase is not DONE
            )
            if max(ends) < horizon:
                candidates.append((exchange, max(ends)))
        for exchange in self.live:  # busy all segment long, or free at their end
            free_at[exchange.i] = free_at[exchange.j] = math.inf
        for exchange, end in candidates:
            free_at[exchange.i] = free_at[exchange.j] = end
        cursor = segment.cursor = stream.cursor()
        present = self.present
        if present.size <= LIST_PEERS:
            present = present.tolist()
        level = self.level  # 1 + the wave of each peer's last exchange (0 outside plans)
        ends_i, ends_j = self.ends_i, self.ends_j
        lat_ij, d_ij, lat_ji, d_ji = times.lat_ij, times.d_ij, times.lat_ji, times.d_ji
        starts, ends, edges, waves = segment.starts, segment.ends, segment.edges, segment.waves
        windows, window, first = stream.windows, stream.window, stream.first
        w, k = stream.w, stream.k
        ring_times, picked, base = windows[w - first]
        n_times = len(ring_times)
        rings = absent = skipped = 0
        now = later = start
        poll, interrupted = getattr(env, "_poll", None) if again is None else None, False
        unpolled = self.unpolled  # rings left before the next look at the interrupt
        while True:  # the ring of ``edge`` at ``now``
            i, j = ends_i[edge], ends_j[edge]
            rings += 1
            if poll is not None and rings >= unpolled:
                unpolled = rings + POLL_RINGS
                # an interrupt ends the run now (an event it schedules): nothing may be
                # applied ahead. Its queue's length tells, without a scan of the queue
                # (which holds every flow in flight: O(N) per look on large swarms)
                queue = getattr(env, "_queue", None)
                if isinstance(queue, list):
                    size = len(queue)
                    poll()
                    interrupted = len(queue) != size
                else:
                    poll()
                    interrupted = next_interfering(env, self._harmless) <= start
                if interrupted:
                    break
            if not (present[i] and present[j]):
                absent += 1
            elif free_at[i] >= now or free_at[j] >= now:
                skipped += 1
            else:
                f1 = now + lat_ij[edge] + d_ij[edge]
                f2 = now + lat_ji[edge] + d_ji[edge]
                end = f1 if f1 >= f2 else f2
                free_at[i] = free_at[j] = end
                wave = level[i] if level[i] > level[j] else level[j]
                level[i] = level[j] = wave + 1
                starts.append(now)
                ends.append(end)
                edges.append(edge)
                waves.append(wave)
            # on to ring_loop's next yield point (a ring, a window's end), at its time
            if k < n_times:
                step = ring_times[k] - now
                later = now + step if step > 0.0 else now
                if later >= horizon or rings >= most or len(starts) >= cap:
                    break
                edge = picked[k]
                k += 1
                now = later
                continue
            edge = -1
            while edge < 0:  # window ends until a window with rings
                step = base + window - now
                later = now + step if step > 0.0 else now
                if later >= horizon or rings >= most or len(starts) >= cap:
                    break
                now, w, k = later, w + 1, 0
                if w - first == len(windows):
                    stream.w = w  # ring_loop draws the next window at its start
                    stream.extend()
                ring_times, picked, base = windows[w - first]
                n_times = len(ring_times)
                if n_times:
                    step = ring_times[0] - now
                    later = now + step if step > 0.0 else now
                    if later >= horizon or rings >= most or len(starts) >= cap:
                        break
                    edge, k, now = picked[0], 1, later
            if edge < 0:
                break
        stream.w, stream.k = w, k
        for edge in edges:
            level[ends_i[edge]] = level[ends_j[edge]] = 0
        segment.end = min(horizon, later)
        self.unpolled = unpolled - rings
        safe = not interrupted and self._safe(segment, moving)
        adopted = {id(exchange): end for exchange, end in candidates if safe and end < segment.end}
        for exchange in self.live:
            if id(exchange) in adopted:
                segment.adopted.append((exchange, adopted[id(exchange)]))
                busy[exchange.i] -= 1
                busy[exchange.j] -= 1
            else:  # still a general exchange, busy
                free_at[exchange.i] = free_at[exchange.j] = -math.inf
        if not safe:
            edges_array = np.array(edges, dtype=np.intp)
            for p in np.concatenate(
                (self.ends_i_array[edges_array], self.ends_j_array[edges_array])
            ).tolist():
                free_at[p] = -math.inf  # every value before the plan lies before its start
            stream.restore(cursor)
            return None
        segment.rings, segment.absent, segment.skipped = rings, absent, skipped
        segment.resume_at = later
        return segment

    def _safe(self, segment: Segment, moving: list[float]) -> bool:
        """Whether the planned flows all finish where the network would finish them: each
        finish F ≤ 2·t1 (t1: its rate was set), and no two finishes (other than equal)
        within :data:`NEAR_FACTOR` × ``REL_EPS`` × the longest transfer (module
        docstring)."""
        times = self.times
        if not segment.starts:
            finishes = np.array(moving)
        else:
            starts = np.array(segment.starts)
            edges = np.array(segment.edges, dtype=np.intp)
            t1 = starts + np.array(times.lat_ij)[edges]
            u1 = starts + np.array(times.lat_ji)[edges]
            f1 = t1 + np.array(times.d_ij)[edges]
            f2 = u1 + np.array(times.d_ji)[edges]
            if np.any(f1 > t1 + t1) or np.any(f2 > u1 + u1):
                return False
            finishes = np.concatenate((f1, f2, moving))
        if finishes.size < 2:
            return True
        gaps = np.diff(np.sort(finishes))
        window = NEAR_FACTOR * REL_EPS * times.longest
        return not bool(np.any((gaps > 0.0) & (gaps <= window)))

    def commit(self, segment: Segment) -> Generator[simpy.Event, Any, None]:
        """Apply a planned segment: the adopted exchanges' and the fast exchanges'
        arithmetic and counts now, the straddlers' flows at their rings (real time)."""
        env, counters, free_at = self.env, self.counters, self.free_at
        self.segments += 1
        ends = np.array(segment.ends)
        fast = ends < segment.end
        n_planned = fast.size
        counters["rings"] += segment.rings
        counters["skipped_absent"] += segment.absent
        counters["skipped_busy"] += segment.skipped
        counters["exchanges"] += n_planned
        counters["completed"] += int(np.count_nonzero(fast)) + len(segment.adopted)
        log = EXCHANGES
        for exchange, end in segment.adopted:
            exchange.adopted = True
            if not segment.applied:
                self.apply(exchange.i, exchange.j, exchange.sent, end)
            if log is not None:
                log.append((exchange.i, exchange.j, exchange.start_s, end))
        edges = np.array(segment.edges, dtype=np.intp)
        first, second = self.ends_i_array[edges], self.ends_j_array[edges]
        if fast.any():
            starts = np.array(segment.starts)
            if not segment.applied:
                self.batch(first, second, starts, ends, segment_waves(segment, fast))
            if log is not None:
                log.extend(
                    zip(
                        first[fast].tolist(), second[fast].tolist(),
                        starts[fast].tolist(), ends[fast].tolist(), strict=True,
                    )
                )  # fmt: skip
        # the straddlers go out at their rings, the fast flows counted in send order
        counted = 0
        for k in np.flatnonzero(~fast).tolist():
            i, j, at = int(first[k]), int(second[k]), segment.starts[k]
            free_at[i] = free_at[j] = -math.inf
            self._count(first[counted:k], second[counted:k], fast[counted:k])
            counted = k
            if at > env.now:
                for delay in hops(float(env.now), at):
                    yield env.timeout(delay)
            self.send(i, j, at, segment.edges[k])
        self._count(first[counted:], second[counted:], fast[counted:])
        self.stream.prune()
        self.resume_at = segment.resume_at

    # -- a watcher (exact targets) --------------------------------------------------------
    def settle(self, segment: Segment, edge: int) -> Segment | None:
        """Apply a planned segment's arithmetic and show its exchanges to the watcher, in
        time order. When the watcher stops taking them at an exchange (a crossing, a
        NaN: :meth:`~protocols.contract.RowWatcher.take`), the segment is undone and
        planned again up to that exchange's time T: the exchanges from T on cross its end
        and go out as flows, and the watcher is shown them one at a time, as without
        segments. Returns the segment to commit (arithmetic applied unless it was planned
        again), or None when none is left (T is now: the ring is handled one at a
        time)."""
        cut = self._apply_watched(segment)
        if cut is None:
            # the watcher may have set a timer inside the segment (decaying rows: the
            # predicted crossing of the stop target): nothing may be planned past it
            armed = next_interfering(self.env, self._harmless) if self.decays else math.inf
            if not armed < segment.end:
                segment.applied = True
                return segment
            cut = max(armed, math.nextafter(self._last_taken_s, math.inf))
            self._restore()
        self._unplan(segment)
        shorter = self.plan(edge, until=cut, again=segment)
        if shorter is None and cut > float(self.env.now):  # the watcher took a part
            raise AssertionError(f"segment at {self.env.now} could not be planned to {cut}")
        if shorter is not None:  # it must hold exactly the exchanges the watcher took
            kept = len(shorter.adopted) + int(
                np.count_nonzero(np.array(shorter.ends) < shorter.end)
            )
            if kept != self._taken:
                raise AssertionError(f"segment at {self.env.now}: {kept} kept, {self._taken} taken")
        return shorter

    def _apply_watched(self, segment: Segment) -> float | None:
        """Apply the adopted and fast exchanges, wave by wave, keeping each one's rows
        after (and before, when the watcher reads them) in time order; show them to the
        watcher. Returns None when it took them all, else the time T of the first it did
        not take, with every row the segment touched back as it was before it (the
        exchanges before T are applied again, by :meth:`commit`, with the same bits:
        each one's arithmetic depends on its own rows only)."""
        state, watcher = self.state, self.watcher
        assert watcher is not None
        ends = np.array(segment.ends)
        fast = ends < segment.end
        index = np.flatnonzero(fast)
        edges = np.array(segment.edges, dtype=np.intp)
        first, second = self.ends_i_array[edges], self.ends_j_array[edges]
        n_adopted = len(segment.adopted)
        pairs = np.empty((n_adopted + index.size, 2), dtype=np.intp)
        for k, (exchange, _) in enumerate(segment.adopted):
            pairs[k] = exchange.i, exchange.j
        pairs[n_adopted:, 0], pairs[n_adopted:, 1] = first[index], second[index]
        if not pairs.size:
            return None
        at = np.concatenate(([end for _, end in segment.adopted], ends[index]))
        order = np.argsort(at, kind="stable")
        position = np.empty(order.size, dtype=np.intp)
        position[order] = np.arange(order.size)
        self._restore = self._save_rows(np.unique(pairs))
        shape = (order.size, 2, state.x.shape[1])
        before = np.empty(shape, dtype=state.x.dtype) if watcher.needs_before else None
        # decaying rows (A²CiD²): each row's trajectory a − e^(−ρ(t − end))·d after it,
        # as ``estimate_rows`` gives it (float64)
        decay = np.empty(shape) if self.decays else None
        after = np.empty(shape, dtype=state.x.dtype if decay is None else np.float64)

        def keep(rows: np.ndarray, slot: Any) -> None:
            if decay is None:
                after[slot] = state.x[rows]
                return
            values = self.estimate_rows(state, rows.reshape(-1))
            after[slot] = values.a.reshape(-1, 2, shape[2])
            decay[slot] = values.d.reshape(-1, 2, shape[2])

        for k, (exchange, end) in enumerate(segment.adopted):
            rows, slot = pairs[k], position[k]
            if before is not None:
                before[slot] = state.x[rows]
            self.apply(exchange.i, exchange.j, exchange.sent, end)
            keep(rows, slot)
        if index.size:
            slots = np.empty(ends.size, dtype=np.intp)
            slots[index] = position[n_adopted:]
            starts = np.array(segment.starts)
            for wave in segment_waves(segment, fast):
                rows, slot = np.stack((first[wave], second[wave]), axis=1), slots[wave]
                if before is not None:
                    before[slot] = state.x[rows]
                self.batch(first, second, starts, ends, [wave])
                keep(rows, slot)
        times = at[order]
        if decay is None:
            taken = watcher.take(pairs[order], times, before, after)
        else:
            taken = watcher.take(pairs[order], times, before, after, decay)
        self._taken = taken
        self._last_taken_s = float(times[taken - 1]) if taken else -math.inf
        if taken == order.size:
            return None
        self._restore()
        return float(times[taken])

    def _save_rows(self, rows: np.ndarray) -> Callable[[], None]:
        """A function that puts peers ``rows`` back as they are now: their rows of the
        state (the protocol's ``save_rows`` when it keeps more, A²CiD²'s x̃ and times)."""
        save = getattr(self.protocol, "save_rows", None)
        if save is not None:
            return cast(Callable[[], None], save(self.state, rows))
        state, saved = self.state, self.state.x[rows]

        def restore() -> None:
            state.x[rows] = saved

        return restore

    def _unplan(self, segment: Segment) -> None:
        """Forget a planned segment (its arithmetic undone): the process as before
        :meth:`plan`, up to values of ``free_at`` that lie before now."""
        busy, free_at = self.busy, self.free_at
        for exchange, _ in segment.adopted:
            busy[exchange.i] += 1
            busy[exchange.j] += 1
        for exchange in self.live:
            free_at[exchange.i] = free_at[exchange.j] = -math.inf
        for edge in segment.edges:
            free_at[self.ends_i[edge]] = free_at[self.ends_j[edge]] = -math.inf
        self.stream.restore(segment.cursor)
        self.unpolled = segment.unpolled

    def _count(self, first: np.ndarray, second: np.ndarray, fast: np.ndarray) -> None:
        """Count the fast exchanges (``fast``) among planned ones with the network: both
        flows of each, in send order (i → j, then j → i)."""
        i, j = first[fast], second[fast]
        if i.size:
            src = np.stack((i, j), axis=1).reshape(-1).tolist()
            dst = np.stack((j, i), axis=1).reshape(-1).tolist()
            self.net.count_solo(src, dst, self.nbytes)
            self.expected_started += len(src)


class Segment:
    """A planned segment (see :meth:`SoloExchanges.plan`): the exchanges it starts in
    ring order, the general exchanges it adopts, its counts, its end and where the
    process resumes."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.edges: list[int] = []
        self.waves: list[int] = []
        self.adopted: list[tuple[Any, float]] = []
        self.rings = self.absent = self.skipped = 0
        self.end = self.resume_at = math.inf
        #: The ring stream's cursor and the rings left before a poll, before the plan.
        self.cursor: tuple[int, int] = (0, 0)
        self.unpolled = 0
        #: Most exchanges it could plan (what the watcher could take).
        self.cap = 0
        #: Its arithmetic is already applied (a watcher was shown it, :meth:`SoloExchanges.settle`).
        self.applied = False


def segment_waves(segment: Segment, fast: np.ndarray) -> list[np.ndarray]:
    """The fast exchanges of ``segment`` (indices where ``fast``), wave after wave."""
    index = np.flatnonzero(fast)
    waves = np.array(segment.waves, dtype=np.intp)[index]
    order = index[np.argsort(waves, kind="stable")]
    bounds = np.flatnonzero(np.diff(np.sort(waves))) + 1
    return np.split(order, bounds)
