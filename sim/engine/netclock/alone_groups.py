"""The groups of an async swarm run alone (:class:`AloneGroups`): each in one call of
the compiled loop (:mod:`sim.engine.netclock.alone`) instead of the network clock's
events, where nothing but the group's own flows can use its members' links.

:meth:`~sim.engine.netclock.NetworkClock.run_group` hands a group here when the clock
has an :class:`AloneGroups` (``schedule: async`` without shared links, rejoin downloads,
``rtt_weighted`` sharing or a trace: :meth:`AloneGroups.fits`). The group's flows are
timed at once from its start; its end is a SimPy timeout at that exact instant. When a
member goes down or comes back before then, the loop runs again from the start with
that change (it is deterministic: what happened before is unchanged) and the end moves.
What the flows did reaches the network's counters as time passes: at each
:meth:`settle` (before the counters are read) the sends and ends up to now are counted
(:meth:`~sim.network.FlowNetwork.count_elsewhere`), and the bytes of the flows in
flight come from running the loop up to that instant
(:attr:`~sim.network.FlowNetwork.elsewhere`).

The instants are those of the network clock piece by piece to round-off, not bit for
bit (:mod:`sim.engine.netclock.alone`; docs/design.md, stop 38).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from functools import partial
from typing import Any

import numpy as np
import simpy

from protocols.contract import GroupPlan
from sim.core.errors import SimulationError
from sim.engine.netclock.alone import DELIVERED, FAILED, REFUSED, TIMED_OUT, AlonePlan, AloneRun
from sim.network import FlowNetwork
from sim.network.flows import timeout_at

_ENDED = np.array([DELIVERED, FAILED, TIMED_OUT], dtype=np.int8)


class _Running:
    """One group running alone: its prepared flows, presence at the start and changes
    since, the run they give, what of it is counted, and its end."""

    __slots__ = ("alone", "changes", "end", "ends_counted", "partial", "present", "run",
                 "sends_counted", "version")  # fmt: skip

    def __init__(self, alone: AlonePlan, present: np.ndarray, end: simpy.Event) -> None:
        self.alone, self.present, self.end = alone, present, end
        self.changes: list[tuple[float, int, bool]] = []
        self.run: AloneRun = alone.run(present)
        n = alone.nbytes.size
        self.sends_counted = np.zeros(n, dtype=bool)
        self.ends_counted = np.zeros(n, dtype=bool)
        self.version = 0
        #: (instant, version, run up to that instant): the last progress asked for
        self.partial: tuple[float, int, AloneRun] | None = None


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

    #: Groups of more members stay on the clock's events: a member's preemption runs the
    #: loop again from the group's start, which costs more than the clock's chunks save
    #: on a large group's many flows (docs/design.md, stop 38).
    MAX_MEMBERS = 8

    def __init__(
        self,
        env: simpy.Environment,
        net: FlowNetwork,
        present: np.ndarray,
        counters: Any,
        delay_s: np.ndarray,
    ) -> None:
        self.env, self.net, self.present = env, net, present
        self.counters, self.delay_s = counters, delay_s
        self._running: dict[int, _Running] = {}  # by id, in start order
        self._of_peer: dict[int, list[_Running]] = {}
        #: the peers in groups running on the clock's events, and in how many
        self._events: dict[int, int] = {}
        net.elsewhere.append(self._progress)

    @staticmethod
    def fits(scenario: Any, net: FlowNetwork, traced: bool) -> bool:
        """Whether a group's flows can meet no other flow: no shared links, ``maxmin``
        sharing, no rejoin downloads (``fetch``), no trace, no one watching sends."""
        network, churn = scenario.network, scenario.churn
        fetch = churn is not None and getattr(churn, "rejoin", "keep") == "fetch"
        return (
            not network.links and network.sharing == "maxmin" and not fetch and not traced
            and not net.sends_watched
        )  # fmt: skip

    def takes(self, plan: GroupPlan) -> bool:
        """Whether the group runs alone: at most :attr:`MAX_MEMBERS` members, none of
        them in a group still running on the clock's events (lost to it and back),
        whose flows could meet its own there."""
        return plan.members.size <= self.MAX_MEMBERS and not any(
            m in self._events for m in plan.members.tolist()
        )

    def on_events(self, plan: GroupPlan, body: Generator[Any, Any, None]) -> Generator:
        """A SimPy process body: ``body``, the clock's run of a group it keeps on its
        events, with its members noted meanwhile (:meth:`takes`)."""
        members = plan.members.tolist()
        self._apart(members)
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

    def _apart(self, members: list[int]) -> None:
        """A new group of ``members`` starts now: none of them may still have a flow on
        its links in a group running alone (:meth:`_check`)."""
        now = float(self.env.now)
        for peer in members:
            for group in self._of_peer.get(peer, ()):
                self._check(group, peer, now)

    def _check(self, group: _Running, peer: int, now: float) -> None:
        """:class:`~sim.core.errors.SimulationError` where ``peer``, in another group too,
        has a flow of ``group`` on its links after ``now``: the other group's flows would
        meet it unseen (to run it, ``network.groups_alone: false``). A
        member's flows in a group end when it goes down (in flight: failed; the pieces
        after them: broken; sends while it is away: refused), so this needs a flow of it
        sent there after it came back (a start or ``allreduce_overhead`` later than its
        absence); rather than a wrong run."""
        run, alone = group.run, group.alone
        mine = (alone.src == peer) | (alone.dst == peer)
        moving = mine & np.isin(run.outcome, _ENDED) & (run.end_at > now)
        if moving.any():
            raise SimulationError(  # one argument: SimPy re-raises it from its args
                "network.groups_alone: expected false for this scenario (at "
                f"{now:.6g} s peer {peer} joins a group while a group running alone still "
                f"has {int(moving.sum())} of its flows to send to or from it: lost to that "
                "group and back before its end), got true"
            )

    def run(self, plan: GroupPlan) -> Generator[simpy.Event, Any, None]:
        """A SimPy process body: run the group's flows alone, return when all have
        ended, with ``plan.delivered`` and ``plan.timed_out`` filled."""
        flows = plan.flows()
        if flows.src.size == 0:
            plan.delivered = np.zeros(0, dtype=bool)
            plan.timed_out = np.zeros(0, dtype=bool)
            return
        env = self.env
        self._apart(plan.members.tolist())
        alone = AlonePlan(flows, self.net, float(env.now), self.delay_s)
        group = _Running(alone, self.present.copy(), env.event())
        self._running[id(group)] = group
        for peer in alone.members.tolist():
            self._of_peer.setdefault(peer, []).append(group)
        self._arm(group)
        yield group.end  # (a run that ends first leaves it running: settle counts it)
        self._count(group, math.inf)
        del self._running[id(group)]
        for peer in alone.members.tolist():
            groups = self._of_peer[peer]
            groups.remove(group)
            if not groups:
                del self._of_peer[peer]
        plan.delivered = group.run.delivered
        plan.timed_out = group.run.timed_out

    def changed(self, peers: np.ndarray, up: bool) -> None:
        """``peers`` went down (or came back) now: the groups they are in run again
        from their start with that change."""
        touched: dict[int, _Running] = {}
        for peer in peers.tolist():
            for group in self._of_peer.get(peer, ()):
                touched[id(group)] = group
        if not touched:
            return
        now = float(self.env.now)
        mine = set(peers.tolist())
        for key, group in self._running.items():  # in start order
            if key not in touched or group.end.triggered:
                continue
            for peer in group.alone.members.tolist():
                if peer in mine:
                    group.changes.append((now, peer, up))
            group.run = group.alone.run(group.present, group.changes)
            self._arm(group)
            for peer in group.alone.members.tolist():  # in another group too: apart?
                if peer in self._events or len(self._of_peer[peer]) > 1:
                    self._check(group, peer, now)

    def settle(self) -> None:
        """Count what the running groups' flows did up to now (sends, ends)."""
        now = float(self.env.now)
        for group in self._running.values():
            self._count(group, now)

    def _arm(self, group: _Running) -> None:
        """The group's end: a timeout at the loop's instant (an earlier one is void)."""
        group.version += 1
        timer = timeout_at(self.env, group.run.done_at)
        timer.callbacks.append(partial(self._ended, group, group.version))

    @staticmethod
    def _ended(group: _Running, version: int, _event: Any) -> None:
        if version == group.version and not group.end.triggered:
            group.end.succeed()

    def _count(self, group: _Running, until: float) -> None:
        """Count the group's sends and ends up to ``until`` not counted yet."""
        run, counters = group.run, self.counters
        sent = np.flatnonzero(~group.sends_counted & (run.sent_at <= until))
        if sent.size:
            refused = int(np.count_nonzero(run.outcome[sent] == REFUSED))
            counters.messages += sent.size
            counters.failed_messages += refused
            group.sends_counted[sent] = True
        else:
            refused = 0
        ended = ~group.ends_counted & (run.end_at <= until) & np.isin(run.outcome, _ENDED)
        done = np.flatnonzero(ended)
        if sent.size or done.size:
            done = done[np.lexsort((run.seq[done], run.end_at[done]))]
            alone = group.alone
            delivered = int(np.count_nonzero(run.outcome[done] == DELIVERED))
            self.net.count_elsewhere(
                sent.size - refused, alone.src[done], alone.dst[done], run.moved[done],
                delivered, done.size - delivered,
            )  # fmt: skip
            group.ends_counted[done] = True

    def _progress(self, at_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the running groups' flows not counted as ended have moved by ``at_s``
        (:attr:`~sim.network.FlowNetwork.elsewhere`)."""
        src: list[np.ndarray] = []
        dst: list[np.ndarray] = []
        moved: list[np.ndarray] = []
        for group in self._running.values():
            partial_run = group.partial
            if partial_run is None or partial_run[:2] != (at_s, group.version):
                run = group.alone.run(group.present, group.changes, until=at_s)
                group.partial = partial_run = (at_s, group.version, run)
            run = partial_run[2]
            # sent, not refused, not counted as ended: in flight then, or ended uncounted
            moving = np.flatnonzero((run.seq >= 0) & ~group.ends_counted & (run.outcome != REFUSED))
            src.append(group.alone.src[moving])
            dst.append(group.alone.dst[moving])
            moved.append(run.moved[moving])
        if not src:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0)
        return np.concatenate(src), np.concatenate(dst), np.concatenate(moved)
