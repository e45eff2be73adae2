"""Barrier rounds on the ``network`` clock: each round's messages are flows.

Each round the protocol plans the round once (:meth:`protocols.base.BarrierProtocol.plan`)
among the peers present when it starts; the clock sends its flows
(:meth:`sim.engine.netclock.NetworkClock.transmit`) and, once every flow has ended, the plan's
``finish`` does the round's arithmetic without the peers lost meanwhile. A round may
ask for a pause before the next (``RoundStats.wait_s``: a ring all-reduce's restart
delay, a Moshpit round that formed no group).

With a ``workload`` each round starts with every present peer's ``local_steps`` H
gradient steps, each of ``compute`` seconds at the peer's own pace
(:class:`~sim.engine.training_net.GradientSlots`); the round is planned once the slowest
present peer is done: synchronous local SGD. A peer preempted meanwhile takes no more
steps; one that returns meanwhile joins the round without steps.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from protocols.base import BarrierProtocol, GroupProtocol
from sim.engine.base import Progress
from sim.engine.network import NetworkEngine
from sim.engine.round_solver import round_sender
from sim.engine.training_net import gradient_slots


class BarrierEngine(NetworkEngine):
    """Barrier rounds of flows until a stop rule fires; ``rounds`` counts them."""

    protocol_type = BarrierProtocol

    def process(self, progress: Progress | None) -> Generator[simpy.Event, Any, None]:
        """Plan a round, send its flows, finish it; measure; again."""
        clock = self.network_clock()
        self.gradients = gradient_slots(self, clock)
        protocol = self.protocol
        assert isinstance(protocol, BarrierProtocol)
        if isinstance(protocol, GroupProtocol):  # each round's groups alone, where exact
            self.time_groups_alone(clock)
        transmit = round_sender(clock)  # one-shot rounds where they are exact
        yield self.env.timeout(0)  # let the churn process apply its time-0 step first
        done = self.observe(clock.present, first=True)
        while not done:
            yield from self.before_round()
            traced = None if self.tracer is None else (float(self.env.now), clock.present.copy())
            plan = protocol.plan(clock.present.copy(), self.rounds)
            yield from transmit(plan)
            stats = plan.finish(self.state, clock.lost)
            self.rounds += 1
            if traced is not None:
                self.trace_round(*traced, clock.lost)
            self.update_counters()
            done = self.observe(clock.present)
            self.report(progress)
            if stats.wait_s > 0 and not done:
                yield self.env.timeout(stats.wait_s)

    def trace_round(self, start_s: float, present: np.ndarray, lost: np.ndarray) -> None:
        """Record the round just finished as a slice ``round t`` (category ``round``) on
        every followed peer present when it started (``args.lost``: preempted in it)."""
        assert self.tracer is not None
        t, now = self.rounds, float(self.env.now)
        for peer in np.flatnonzero(present & self.tracer.mask).tolist():
            args = {"round": t, "lost": bool(lost[peer])}
            self.tracer.slice(peer, f"round {t}", "round", start_s, now, args)

    def before_round(self) -> Generator[simpy.Event, Any, None]:
        """What happens before a round is planned: with a workload, the present peers'
        local steps (:meth:`local_steps`); else nothing, no event
        (:class:`sim.engine.collective.CollectiveEngine` waits for the local work)."""
        yield from self.local_steps()

    def local_steps(self) -> Generator[simpy.Event, Any, None]:
        """With a workload: every present peer's ``local_steps`` gradient steps, until the
        slowest is done; without one, nothing (no event)."""
        if self.gradients is None:
            return
        k = int(getattr(self.scenario.workload, "local_steps", 1))
        yield from self.gradients.steps(np.flatnonzero(self.clock.present), k)

    def update_counters(self) -> None:
        """Bytes the flow network moved; messages the clock sent (refused ones count)."""
        self.clock.settle()  # pieces that ended inside chunks count from their end
        self.bytes_sent, self.messages = self.clock.net.bytes_sent_total, self.clock.messages
