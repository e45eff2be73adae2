"""``schedule: async`` for group protocols (moshpit, random_groups): every peer's own loop.

Each present peer runs a SimPy process, back to back: ``compute`` + ``delay`` seconds of
local work (with a ``workload``: ``local_steps`` gradient steps of ``compute`` seconds
each, then ``delay``; :mod:`sim.engine.peer_loops`), then one averaging step. A step is
hivemind's matchmaking under the peer's key (:mod:`sim.engine.matchmaking`), then its
group's all-reduce: the protocol's :class:`~protocols.contract.GroupPlan`, whose flows
start ``allreduce_overhead`` after each member learns of the group (processing, drawn
once per group; 0 by default) and which the network clock sends
(:meth:`~sim.engine.netclock.NetworkClock.run`) and whose arithmetic runs once every
flow has ended, without the members lost meanwhile, through the exact-target tracker.
Every member's step ends then. A member that failed (lost, given up on) or whose group
failed retries with a new matchmaking until the step's deadline (``averaging_timeout``
after it started); a step that reaches its deadline without a group is a failed step,
and the peer goes back to its local work with its vector unchanged.

A peer preempted mid-loop stops at once: its matchmaking is abandoned and, inside a
group, it is lost to the group's arithmetic. When it is present again (``keep``,
``reset``, or ``fetch`` once the download has arrived) it starts a fresh loop, local
work first. Rows are sampled every ``metrics.every`` seconds
(:class:`~sim.engine.sampled.SampledEngine`), with the steps and phase times of
:mod:`sim.engine.steps`; ``rounds`` are whole seconds.

Randomness: the DHT ids and each leader's draws (shuffles, overheads) come from the
``matchmaking`` component's own streams (:meth:`AsyncEngine.matchmaking_rng`); the
protocol's generator is not drawn from. Same-instant decisions follow rank order
(:mod:`sim.engine.matchmaking`) and loops start in peer order.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

import numpy as np
import pandas as pd
import simpy

from protocols.base import GroupProtocol
from protocols.contract import GroupPlan
from sim.core.numeric import median
from sim.core.seeding import component_rng
from sim.engine.matchmaking import Assembled, Matchmaker, Order, hivemind_order
from sim.engine.netclock import NetworkClock
from sim.engine.peer_loops import NO_MATCHMAKING, PeerLoopEngine
from sim.engine.steps import ALLREDUCE, COMPUTE, MATCHMAKING
from sim.model.scenario.models import Scenario


class _GroupRun:
    """One assembled group while its all-reduce runs."""

    def __init__(self, group: Assembled, done: simpy.Event) -> None:
        # not the plan (the group's flows and butterfly): the group and this record
        # hold each other, a cycle the collector frees late; the plan lives in
        # ``_run_group`` and goes when it ends
        self.group, self.done = group, done
        self.lost: set[int] = set()
        self.averaged: dict[int, bool] = {}


class AsyncEngine(PeerLoopEngine):
    """Per-peer loops of local work and hivemind-matched group steps."""

    protocol_type = GroupProtocol

    def __init__(
        self, scenario: Scenario, seed: int, interrupt: threading.Event | None = None
    ) -> None:
        super().__init__(scenario, seed, interrupt)
        self.group_of: dict[int, _GroupRun] = {}  # members of groups under way
        self.matchmaker: Matchmaker | None = None
        self._rngs: dict[tuple[int, int], np.random.Generator] = {}

    def member_order(self) -> Order:
        """The leader's shuffle (:func:`~sim.engine.matchmaking.hivemind_order`; the
        equivalence tests inject barrier rounds' order)."""
        return hivemind_order

    def start(self, clock: NetworkClock) -> None:
        """Build the matchmaker and start every present peer's loop, in peer order."""
        protocol = self.protocol
        assert isinstance(protocol, GroupProtocol)
        self.rules = rules = protocol.matchmaking()
        table, n = self.peers, self.exists.size
        latency = table["latency_s"].to_numpy(float)
        dht_s = np.full(n, rules.latency_s) if rules.latency_s is not None else None
        if dht_s is None:  # one route latency to a typical peer
            with np.errstate(over="ignore"):  # past the largest float: a DHT never answering
                dht_s = latency + median(latency)
        routes = clock.net.routes
        self.matchmaker = Matchmaker(
            self.env, rules, self._key_of, lambda a, b: float(routes.route(a, b)[0]), dht_s,
            self.matchmaking_rng(0).permutation(n),
            table["client"].to_numpy(bool), clock.present, self._rng_of, self._assembled,
            self.member_order(), protocol.count_too_small,
        )  # fmt: skip
        clock.listeners.append(self)
        if self.tracer is not None:
            self.tracer.on_close(self._close_trace)
        self.time_groups_alone(clock)
        self.up(np.flatnonzero(clock.present))

    # -- the peer's loop -------------------------------------------------------------------
    def _loop(self, peer: int) -> Generator[simpy.Event, Any, None]:
        try:
            while True:
                yield from self._computing(peer)
                deadline = float(self.env.now) + self.rules.timeout_s
                while not (yield from self._step(peer, deadline)):
                    pass
        except simpy.Interrupt:
            pass  # preempted: down() has abandoned its matchmaking already

    def _computing(self, peer: int) -> Generator[simpy.Event, Any, None]:
        """The local work (:meth:`~sim.engine.peer_loops.PeerLoopEngine.local_work`) in
        phase ``compute``."""
        if self.gradients is None:  # one timeout, as _phase waits for it
            yield from self._phase(peer, COMPUTE, self.env.timeout(self.local_work_s(peer)))
            return
        self.book.begin(peer, COMPUTE, float(self.env.now))
        try:
            yield from self.local_work(peer)
        finally:
            self._ended(peer)

    def _step(self, peer: int, deadline: float) -> Generator[simpy.Event, Any, bool]:
        """One attempt of a step; True when the step is over (averaged or failed)."""
        assert self.matchmaker is not None
        group = yield from self._phase(peer, MATCHMAKING, self.matchmaker.seek(peer, deadline))
        if group is None:
            self.book.failed[peer] += 1
            return True
        run = group.handle
        yield from self._phase(peer, ALLREDUCE, run.done, run)
        if run.averaged.get(peer, False):
            self.book.steps[peer] += 1
            return True
        if self.env.now >= deadline:
            self.book.failed[peer] += 1
            return True
        return False

    def _phase(
        self, peer: int, phase: int, event: simpy.Event, run: _GroupRun | None = None
    ) -> Generator[simpy.Event, Any, Any]:
        """Wait for ``event`` in ``phase``; its time is counted (and traced) even when
        the peer is preempted meanwhile."""
        self.book.begin(peer, phase, float(self.env.now))
        try:
            return (yield event)
        finally:
            self._ended(peer, run)

    def _ended(self, peer: int, run: _GroupRun | None = None) -> None:
        now = float(self.env.now)
        phase, since = self.book.end(peer, now)
        if self.tracer is not None and phase >= 0 and self.tracer.follows(peer):
            args = self._trace_args(peer, phase, run)
            self.tracer.slice(peer, _NAMES[phase], _NAMES[phase], since, now, args)

    def _trace_args(self, peer: int, phase: int, run: _GroupRun | None) -> dict[str, Any] | None:
        if phase == MATCHMAKING and self.matchmaker is not None:
            return {"attempts": int(self.matchmaker.attempts[peer])}
        if phase == ALLREDUCE and run is not None:
            g = run.group
            return {
                "group": f"{g.id[0]}:{g.id[1]}", "members": g.members.tolist(), "key": g.key,
                "size": int(g.members.size), "averaged": bool(run.averaged.get(peer, False)),
            }  # fmt: skip
        return None

    def _close_trace(self, end_s: float) -> None:
        """The run ended: close the slices of the phases under way."""
        for peer in np.flatnonzero(self.book.phase_of >= 0).tolist():
            group = self.group_of.get(peer)
            self._ended(peer, group)

    # -- groups ----------------------------------------------------------------------------
    def _key_of(self, peer: int) -> int:
        protocol = self.protocol
        assert isinstance(protocol, GroupProtocol)
        return protocol.group_key(peer, int(self.book.steps[peer]))

    def matchmaking_rng(self, *key: int) -> np.random.Generator:
        """Stream ``key`` of the ``matchmaking`` component: (0,) the DHT ids, (1, leader)
        a leader's shuffles, (2, leader) its groups' ``allreduce_overhead`` draws."""
        return component_rng(self.seed, "matchmaking", *key)

    def _rng_of(self, leader: int, stream: int = 1) -> np.random.Generator:
        rng = self._rngs.get((stream, leader))
        if rng is None:
            rng = self._rngs[stream, leader] = self.matchmaking_rng(stream, leader)
        return rng

    def _assembled(self, group: Assembled) -> None:
        protocol = self.protocol
        assert isinstance(protocol, GroupProtocol)
        notify_s, overhead = group.notify_s, self.rules.overhead
        if overhead is not None:  # every member starts its flows this much later
            notify_s = notify_s + overhead(self._rng_of(group.leader, 2))
        plan = protocol.group_plan(group.members, notify_s, group.chunks)
        run = group.handle = _GroupRun(group, self.env.event())
        present = self.clock.present
        for m in group.members.tolist():
            self.group_of[m] = run
            if not present[m]:
                run.lost.add(m)  # preempted after it joined
        self.env.process(self._run_group(run, plan))

    def _run_group(self, run: _GroupRun, plan: GroupPlan) -> Generator[simpy.Event, Any, None]:
        yield from self.clock.run_group(plan)
        members = run.group.members
        lost = np.zeros(self.exists.size, dtype=bool)
        lost[sorted(run.lost)] = True
        out: list[np.ndarray] = []
        self.tracker.change(members, lambda: out.append(plan.settle(self.state, lost)))
        averaged = out[0]
        for m, ok in zip(members.tolist(), averaged.tolist(), strict=True):
            run.averaged[m] = ok
            if self.group_of.get(m) is run:
                del self.group_of[m]
        self.book.group_done(run.group, float(self.env.now), averaged)
        run.done.succeed()

    # -- presence (a listener of the network clock) ----------------------------------------
    def down(self, peers: np.ndarray) -> None:
        """``peers`` were preempted: their loops stop now."""
        assert self.matchmaker is not None
        for p in peers.tolist():
            self.matchmaker.abandon(p)
            run = self.group_of.get(p)
            if run is not None:
                run.lost.add(p)
            self.stop_loop(p)

    # -- summary, tables -------------------------------------------------------------------

    def summary_fields(self) -> dict[str, Any]:
        """Steps per peer, failed steps, groups, phase times, matchmaking counts."""
        counts = NO_MATCHMAKING if self.matchmaker is None else self.matchmaker.counts
        return self.book.summary(float(self.env.now), self.exists, counts)

    def tables(self) -> dict[str, pd.DataFrame]:
        """``traffic``, and ``groups`` and ``steps`` (:class:`~sim.engine.steps.StepBook`)."""
        return {**super().tables(), **self.book.tables(float(self.env.now))}


#: Trace slice names of the phases (:data:`sim.engine.steps.PHASES`).
_NAMES = dict(enumerate(("compute", "matchmaking", "all-reduce")))
