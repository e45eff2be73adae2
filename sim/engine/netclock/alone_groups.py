"""The groups of an async swarm run alone (:class:`AloneGroups`): in one call of the
compiled loop (:mod:`sim.engine.netclock.alone`) instead of the network clock's events,
where nothing but the groups' own flows can use their members' links.

:meth:`~sim.engine.netclock.NetworkClock.run_group` hands a group here when the clock
has an :class:`AloneGroups` (``schedule: async`` without shared links, rejoin downloads,
``rtt_weighted`` sharing or a trace: :meth:`AloneGroups.fits`) and
:meth:`AloneGroups.takes` it. The group's flows are timed at once from its start,
with every change of its members' presence that the churn schedule announces
(:class:`~sim.model.churn.lookahead.ChurnLookahead`: churn is exogenous); its end is a
SimPy timeout at that exact instant. A change that was not announced (no read-ahead)
runs the loop again from the start with that change (it is deterministic: what
happened before is unchanged) and the end moves. A member lost to a group and
back before that group ended may join a new group while the old one still has flows
for it: the two groups then run as one *component*, in one loop from the first one's
start, whose flows share that member's links (the first group's past is unchanged:
the second's flows start later).

What the flows did reaches the network's counters as time passes: at each
:meth:`settle` (before the counters are read) the sends and ends up to now are counted
(:meth:`~sim.network.FlowNetwork.count_elsewhere`), and the bytes of the flows in
flight come from a second run of the loop, advanced from one such instant to the next
(:attr:`~sim.network.FlowNetwork.elsewhere`).

The instants are those of the network clock piece by piece to round-off, not bit for
bit (:mod:`sim.engine.netclock.alone`; docs/design.md, stops 38 and 39).

A group's part, a component and the order in which its sends and ends are counted are in
:mod:`sim.engine.netclock.alone_parts`; the worker threads that time large groups in the
background in :mod:`sim.engine.netclock.loop_pool`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Generator
from concurrent.futures import Future
from functools import partial
from typing import Any
from typing import Protocol as Interface

import numpy as np
import simpy

from protocols.contract import Flows
from sim.core.cpus import loop_threads
from sim.core.errors import SimulationError
from sim.engine.netclock import loop_pool as threads
from sim.engine.netclock.alone import DELIVERED, REFUSED, AloneRun, LoopState, compiled
from sim.engine.netclock.alone_parts import Component, Part, in_time_order, sends_after
from sim.engine.workload import SlowRunWarning
from sim.model.churn.lookahead import ChurnLookahead
from sim.network import FlowNetwork
from sim.network.flows import timeout_at


class GroupFlows(Interface):
    """What :meth:`AloneGroups.run` reads of a group and fills in: an async group's
    :class:`~protocols.contract.GroupPlan`, or one group of a barrier round
    (:class:`~sim.engine.netclock.alone_rounds.RoundGroup`)."""

    members: np.ndarray  # (g,) peers
    delivered: np.ndarray | None
    timed_out: np.ndarray | None

    def flows(self) -> Flows: ...


class AloneGroups:
    """Runs the groups the clock hands it alone, and keeps the counters up to date.

    Parameters
    ----------
    env, net, present
        The clock's environment, flow network and presence (shared, read).
    counters
        The clock: its ``messages`` and ``failed_messages`` count the groups' sends.
    delay_s
        (n_peers,) straggler delays (roots without ``start_s``).
    """

    #: Groups of more members stay on the clock's events (None: no limit). Since the loop
    #: reads the churn schedule ahead (a preemption no longer runs it again) and its
    #: re-rate is O(R² + F), every group is cheaper alone, the first round's groups of 32
    #: included (docs/design.md, stop 39); a limit exists for tests that mix both.
    MAX_MEMBERS: int | None = None
    #: How far ahead (s) a component first reads the churn schedule for its members; it
    #: reads as far again each time its flows outlast what it has read.
    HORIZON_S = 300.0
    #: Worker threads that time a new group's loop while the simulation goes on (the
    #: loop, compiled, runs without the GIL): None, ``AVSIM_LOOP_THREADS`` when set, else
    #: 2 where the process may use two CPUs or more (:func:`sim.core.cpus.loop_threads`);
    #: 0: every loop runs at once, in the simulation's thread. The results are the same
    #: either way (docs/design.md, stop 40).
    WORKERS: int | None = None
    #: Groups of fewer flows are timed at once (a hand-off costs more than their loop).
    BACKGROUND_FLOWS = 1024

    def __init__(
        self,
        env: simpy.Environment,
        net: FlowNetwork,
        present: np.ndarray,
        counters: Any,
        delay_s: np.ndarray,
        churn: ChurnLookahead | None = None,
    ) -> None:
        self.env, self.net, self.present = env, net, present
        self.counters, self.delay_s = counters, delay_s
        #: the churn schedule read ahead (None: a change of presence runs the loop again)
        self.churn = churn
        #: worker threads for large groups' loops (:attr:`WORKERS`, read at the start)
        self.workers = loop_threads() if self.WORKERS is None else self.WORKERS
        _warn_if_python()
        self._running: dict[int, Component] = {}  # by id, in start order
        #: the running components each peer is in (it may have flows left in an old one)
        self._of_peer: dict[int, dict[int, Component]] = {}
        #: the peers in groups running on the clock's events, and in how many
        self._events: dict[int, int] = {}
        net.elsewhere.append(self._progress)

    @staticmethod
    def fits(scenario: Any, net: FlowNetwork | None, traced: bool) -> bool:
        """Whether a group's flows can meet no other flow: no shared links, ``maxmin``
        sharing, no rejoin downloads (``fetch``), no trace, no one watching sends (None:
        no network yet, none watched)."""
        network, churn = scenario.network, scenario.churn
        fetch = churn is not None and getattr(churn, "rejoin", "keep") == "fetch"
        return (
            not network.links and network.sharing == "maxmin" and not fetch and not traced
            and not (net is not None and net.sends_watched)
        )  # fmt: skip

    def takes(self, plan: GroupFlows) -> bool:
        """Whether the group runs alone: a member has flows left in a component running
        alone (it joins it), or else it has at most :attr:`MAX_MEMBERS` members, none of
        them in a group still running on the clock's events (lost to it and back),
        whose flows could meet its own there."""
        members = plan.members.tolist()
        if self._sharing(members):
            return True
        limit = self.MAX_MEMBERS
        small = limit is None or len(members) <= limit
        return small and not any(m in self._events for m in members)

    def _sharing(self, members: list[int]) -> list[Component]:
        """The components running alone in which one of ``members`` has a flow on its
        links after now (a group with it must run with them)."""
        now = float(self.env.now)
        found: dict[int, Component] = {}
        for peer in members:
            for key, comp in self._of_peer.get(peer, {}).items():
                if key not in found and sends_after(comp, peer, now):
                    found[key] = comp
        return list(found.values())

    def on_events(self, plan: GroupFlows, body: Generator[Any, Any, None]) -> Generator:
        """A SimPy process body: ``body``, the clock's run of a group it keeps on its
        events, with its members noted meanwhile (:meth:`takes`)."""
        members = plan.members.tolist()
        events = self._events
        for m in members:
            events[m] = events.get(m, 0) + 1
        yield from body
        for m in members:
            left = events[m] - 1
            if left:
                events[m] = left
            else:
                del events[m]

    def run(self, plan: GroupFlows) -> Generator[simpy.Event, Any, None]:
        """A SimPy process body: run the group's flows alone, return when all have
        ended, with ``plan.delivered`` and ``plan.timed_out`` filled."""
        flows = plan.flows()
        if flows.src.size == 0:
            plan.delivered = np.zeros(0, dtype=bool)
            plan.timed_out = np.zeros(0, dtype=bool)
            return
        env = self.env
        members = plan.members.tolist()
        if any(m in self._events for m in members):
            self._refuse(members)
        part = Part(flows, float(env.now), env.event())
        joined = self._sharing(members)
        comp = self._merge(joined) if joined else Component()
        comp.add(part, self.present, self.net, self.delay_s)
        self._time(comp, background=len(comp.parts) == 1)
        self._running.pop(id(comp), None)
        self._running[id(comp)] = comp  # last: in order of their latest group
        for peer in comp.alone.members.tolist():
            self._of_peer.setdefault(peer, {})[id(comp)] = comp
        self._arm(comp)
        yield part.end  # (a run that ends first leaves it running: settle counts it)
        current = part.comp  # (it may have joined another since)
        assert current is not None
        comp = current
        now = float(env.now)
        missed = [c for c in comp.expected if c[0] < now]
        if missed:  # never: churn is exogenous (a run wrong without it stops here)
            raise SimulationError(  # one argument: SimPy re-raises it from its args
                "network.groups_alone: expected false for this scenario (the churn "
                f"schedule announced peer {missed[0][1]} for {missed[0][0]:.6g} s and it "
                "did not change then), got true"
            )
        self._count(comp, now)
        comp.waiting -= 1
        if comp.waiting == 0:  # every group of it has ended, and been told
            del self._running[id(comp)]
            self._forget(comp)
            for p in comp.parts:  # no cycle left to wait for the collector
                p.comp = None
        a, b = part.span
        plan.delivered = comp.run.delivered[a:b]
        plan.timed_out = comp.run.timed_out[a:b]

    def _merge(self, comps: list[Component]) -> Component:
        """One component of ``comps``' groups, by start (the loop is built by
        :meth:`~sim.engine.netclock.alone_parts.Component.add`, with the group that joins them)."""
        if len(comps) == 1:
            return comps[0]
        merged = Component()
        parts = sorted((p for c in comps for p in c.parts), key=lambda p: p.t0)
        by_start = sorted(comps, key=lambda c: min(p.t0 for p in c.parts), reverse=True)
        present = by_start[0].present.copy()
        for comp in by_start:  # each peer's presence at the start of its first component
            peers = comp.alone.members
            present[peers] = comp.present[peers]
        merged.present = present
        merged.seen = sorted({c for comp in comps for c in comp.seen}, key=_in_order)
        sends, ends = [], []
        for p in parts:
            assert p.comp is not None
            a, b = p.span
            sends.append(p.comp.sends_counted[a:b])
            ends.append(p.comp.ends_counted[a:b])
        merged.parts = parts
        merged.waiting = sum(comp.waiting for comp in comps)
        merged.sends_counted, merged.ends_counted = np.concatenate(sends), np.concatenate(ends)
        for comp in comps:
            comp.version += 1  # their end timeouts are void
            del self._running[id(comp)]
            self._forget(comp)
        return merged

    def _forget(self, comp: Component) -> None:
        """``comp`` runs no more (ended, or joined another): off its peers' lists."""
        for peer in comp.alone.members.tolist():
            comps = self._of_peer[peer]
            del comps[id(comp)]
            if not comps:
                del self._of_peer[peer]

    def _refuse(self, members: list[int]) -> None:
        """A group with a member in a group on the clock's events cannot run alone; if
        it must (a member has flows left in a component alone), the two cannot be
        timed together: stop the run with one line rather than run it wrong."""
        now = float(self.env.now)
        for comp in self._sharing(members):
            raise SimulationError(  # one argument: SimPy re-raises it from its args
                "network.groups_alone: expected false for this scenario (at "
                f"{now:.6g} s a group has members still in a group on the network clock's "
                f"events and in {len(comp.parts)} running alone), got true"
            )

    def changed(self, peers: np.ndarray, up: bool) -> None:
        """``peers`` went down (or came back) now. A component whose loop had it from the
        churn schedule goes on as timed; one that did not (no read-ahead) runs again from
        its start with the change."""
        touched: dict[int, Component] = {}
        for peer in peers.tolist():
            touched.update(self._of_peer.get(peer, {}))
        if not touched:
            return
        now = float(self.env.now)
        mine = set(peers.tolist())
        timed: list[Component] = []
        for key, comp in self._running.items():  # in start order
            if key not in touched:
                continue
            new = False
            for peer in comp.alone.members.tolist():
                if peer in mine:
                    change = (now, peer, up)
                    comp.seen.append(change)
                    if change in comp.expected:
                        comp.expected.remove(change)
                    else:
                        new = True
            if new:
                self._time(comp)
                self._arm(comp)
                timed.append(comp)
        for comp in timed:
            if id(comp) in self._running:
                self._join_if_shared(comp, now)

    def _time(self, comp: Component, background: bool = False) -> None:
        """Run ``comp``'s loop from its start until its last flow has ended, with the
        changes seen so far and those the churn schedule announces from now on, read
        further each time the flows outlast it. With ``background``, a large new group
        whose end cannot come before :meth:`_wake` is timed by a worker thread while
        the simulation goes on (``Component.run`` waits for it); the schedule is then
        read twice as far as the group's least duration at first."""
        now = float(self.env.now)
        churn, members = self.churn, comp.alone.members
        pool = threads.pool(self.workers) if background else None
        least = comp.alone.least_duration() if pool is not None else 0.0
        if churn is None:
            comp.expected, comp.horizon = [], math.inf
        else:
            churn.forget_before(now)
            comp.horizon = now + max(self.HORIZON_S, 2 * least)
            present = self.present  # a change due now may have been applied already
            comp.expected = [
                c for c in churn.ahead(members, math.nextafter(now, -math.inf), comp.horizon)
                if c[0] > now or present[c[1]] != c[2]
            ]  # fmt: skip
        comp.live = comp.order = comp.pending = None
        comp.wake = math.inf
        state = comp.alone.start(comp.present)  # (dropped at the end: the run keeps its
        # outputs, and the loop's book-keeping is half its memory)
        wake = self._wake(comp, now, least) if pool is not None else math.inf
        if pool is not None and wake < math.inf:
            future = pool.submit(
                threads.advance_in_worker, comp.alone, state, comp.changes, comp.horizon
            )
            comp.pending = partial(self._joined, comp, now, future)
            comp.wake = wake
            return
        run = comp.alone.advance(state, comp.changes, until=comp.horizon)
        comp.run = self._timed(comp, state, now, run)

    def _joined(
        self, comp: Component, now: float, future: Future[tuple[AloneRun, LoopState | None]]
    ) -> AloneRun:
        """``comp``'s run once the worker timing it is done (and taken to the end here,
        when its flows outlast what the worker had of the churn schedule)."""
        run, state = future.result()
        return run if state is None else self._timed(comp, state, now, run)

    def _timed(self, comp: Component, state: LoopState, now: float, run: AloneRun) -> AloneRun:
        """``comp``'s run to the end from ``run``, its loop's run until its horizon: read
        the churn schedule further and go on while its flows outlast what it has read
        (``now``: when the timing started)."""
        churn, members = self.churn, comp.alone.members
        while run.done_at == math.inf:
            assert churn is not None
            later = comp.horizon + max(self.HORIZON_S, comp.horizon - now)
            comp.expected += churn.ahead(members, comp.horizon, later)
            comp.horizon = later
            run = comp.alone.advance(state, comp.changes, until=comp.horizon)
        return run

    def _wake(self, comp: Component, now: float, least: float) -> float:
        """An instant before the end of ``comp``'s new group (a single one, its start
        now), at which its end is armed; ``inf``: none found, time it at once.

        Until a member is absent, goes down or a flow times out, no flow is refused,
        fails or is cut: then the group cannot end before its busiest resource has
        carried its bytes (``least``, :meth:`AlonePlan.least_duration`, the shortest
        timeout included). With every member present now, half of the least of that
        time, the first announced change of a member and the horizon read comes before
        its end, whatever the loop finds."""
        alone = comp.alone
        if comp.seen or alone.nbytes.size < self.BACKGROUND_FLOWS:
            return math.inf
        if not comp.present[alone.members].all():
            return math.inf
        first = comp.expected[0][0] if comp.expected else math.inf
        span = min(least, first - now, comp.horizon - now)
        return now + span / 2 if span > 0 else math.inf

    def _join_if_shared(self, comp: Component, now: float) -> None:
        """After ``comp`` ran again: a member of it that joined a group elsewhere once its
        flows in ``comp`` had ended may have flows there again (the return of another
        member lets one through). The components then run as one (their pasts did not
        meet on its links, so the joint run repeats them); with a group on the clock's
        events, the run stops with one line rather than run two groups' flows on its
        links unseen by each other."""
        others: dict[int, Component] = {}
        for peer in comp.alone.members.tolist():
            elsewhere = len(self._of_peer[peer]) > 1 or peer in self._events
            if not elsewhere or not sends_after(comp, peer, now):
                continue
            if peer in self._events:
                raise SimulationError(  # one argument: SimPy re-raises it from its args
                    "network.groups_alone: expected false for this scenario (at "
                    f"{now:.6g} s a group running alone would send to or from peer {peer}, "
                    "which is in a group on the network clock's events by now), got true"
                )
            others.update((k, c) for k, c in self._of_peer[peer].items() if c is not comp)
        if not others:
            return
        merged = self._merge([comp, *others.values()])
        merged.plan(self.net, self.delay_s)
        self._time(merged)
        self._running[id(merged)] = merged
        for peer in merged.alone.members.tolist():
            self._of_peer.setdefault(peer, {})[id(merged)] = merged
        self._arm(merged)

    def settle(self) -> None:
        """Count what the running groups' flows did up to now (sends, ends)."""
        now = float(self.env.now)
        for comp in self._running.values():
            self._count(comp, now)

    def _arm(self, comp: Component) -> None:
        """Each group's end not yet reached: a timeout at the instant its last flow ends
        (an earlier one is void); while a worker times it, one at its wake instant
        that arms them then (:meth:`_wake`)."""
        comp.version += 1
        if comp.pending is not None:
            timer = timeout_at(self.env, comp.wake)
            timer.callbacks.append(partial(self._woken, comp, comp.version))
            return
        self._arm_ends(comp)

    def _woken(self, comp: Component, version: int, _event: Any) -> None:
        if version == comp.version:
            self._arm_ends(comp)

    def _arm_ends(self, comp: Component) -> None:
        end_at = comp.run.end_at
        for part in comp.parts:
            if part.end.triggered:
                continue
            a, b = part.span
            timer = timeout_at(self.env, float(end_at[a:b].max()))
            timer.callbacks.append(partial(self._ended, comp, part, comp.version))

    @staticmethod
    def _ended(comp: Component, part: Part, version: int, _event: Any) -> None:
        if version == comp.version and not part.end.triggered:
            part.end.succeed()

    def _count(self, group: Component, until: float) -> None:
        """Count the group's sends and ends up to ``until`` not counted yet."""
        run, counters = group.run, self.counters
        order = group.order
        if order is None:  # the run's sends, and its ends in (instant, send order) order
            order = group.order = in_time_order(run)
        # from where the last count stopped (a flow counted before a new run is skipped)
        hi = int(np.searchsorted(order.send_times, until, side="right"))
        sent = order.by_send[order.sends_done : hi]
        sent = sent[~group.sends_counted[sent]]
        order.sends_done = hi
        hi = int(np.searchsorted(order.end_times, until, side="right"))
        done = order.ends[order.ends_done : hi]
        done = done[~group.ends_counted[done]]
        order.ends_done = hi
        if sent.size:
            refused = int(np.count_nonzero(run.outcome[sent] == REFUSED))
            counters.messages += sent.size
            counters.failed_messages += refused
            group.sends_counted[sent] = True
        else:
            refused = 0
        if sent.size or done.size:
            alone = group.alone
            delivered = int(np.count_nonzero(run.outcome[done] == DELIVERED))
            self.net.count_elsewhere(
                sent.size - refused, alone.members, alone.src_local[done],
                alone.dst_local[done], run.moved[done], delivered, done.size - delivered,
            )  # fmt: skip
            group.ends_counted[done] = True

    def _progress(self, at_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the running groups' flows not counted as ended have moved by ``at_s``
        (:attr:`~sim.network.FlowNetwork.elsewhere`)."""
        src: list[np.ndarray] = []
        dst: list[np.ndarray] = []
        moved: list[np.ndarray] = []
        for group in self._running.values():
            live, changes = group.live, group.changes
            if live is None or live.now > at_s or not group.alone.goes_on(live, changes):
                live = group.live = group.alone.start(group.present)
            run = group.alone.advance(live, changes, until=at_s)
            # sent, not refused, not counted as ended: in flight then, or ended uncounted
            moving = np.flatnonzero((run.seq >= 0) & ~group.ends_counted & (run.outcome != REFUSED))
            src.append(group.alone.src[moving])
            dst.append(group.alone.dst[moving])
            moved.append(run.moved[moving])
        if not src:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0)
        return np.concatenate(src), np.concatenate(dst), np.concatenate(moved)


#: Whether :func:`_warn_if_python` has warned in this process.
_WARNED = [False]


def _warn_if_python() -> None:
    """Say once per process that the groups' loop runs as Python (no numba, or its JIT
    disabled): the same results, but slower than the clock's events, by ~70× for a
    large group's flows (docs/design.md, stop 39)."""
    if _WARNED[0] or compiled():
        return
    _WARNED[0] = True
    warnings.warn(
        "async groups are timed by a loop that runs as Python here (numba is not "
        "installed or its JIT is disabled): the same results, but slower than "
        "network.groups_alone: false (the network clock's events, the same results to "
        "round-off) for large groups; pip install numba (the extra 'fast') to compile it",
        SlowRunWarning,
        stacklevel=2,
    )


def _in_order(change: tuple[float, int, bool]) -> tuple[float, bool, int]:
    """Changes in the order the churn process makes them: by instant, downs first, by peer."""
    at, peer, up = change
    return at, up, peer
