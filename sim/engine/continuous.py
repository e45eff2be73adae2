"""Continuous time on the ``network`` clock: the protocol's own process sends flows.

The protocol's :meth:`~protocols.base.ContinuousProtocol.network_process` runs as a
SimPy process and sends flows whenever it likes; this engine only samples: every
``metrics.every`` seconds (and at ``stop.max_rounds`` seconds) it brings the state to
now (:meth:`~protocols.base.ContinuousProtocol.sync`) and measures, until a stop rule
fires. ``rounds`` counts whole seconds elapsed. The exact-target tracker times
crossings between samples (its predicted crossings are timers in simulated time).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

import simpy

from protocols.base import ContinuousProtocol
from protocols.contract import RunEnv
from sim.engine.base import Progress
from sim.engine.network import NetworkEngine
from sim.engine.observe.wiring import timer


class ContinuousEngine(NetworkEngine):
    """A continuous-time protocol's process, sampled every ``metrics.every`` seconds."""

    protocol_type = ContinuousProtocol

    def process(self, progress: Progress | None) -> Generator[simpy.Event, Any, None]:
        """Start the protocol's process, then sample until a stop rule fires."""
        clock = self.network_clock()
        protocol = self.protocol
        assert isinstance(protocol, ContinuousProtocol)
        stop, every = self.scenario.stop, self.scenario.metrics.every
        yield self.env.timeout(0)  # let the churn process apply its time-0 step first
        done = self.observe(clock.present, first=True)
        self.env.process(
            protocol.network_process(RunEnv(self.env, clock.net, clock.present, self.state))
        )
        self.tracker.schedule = timer(self.env)
        k = 0
        while not done:
            k += 1
            at = k * every
            if stop.max_rounds is not None and self.env.now < stop.max_rounds:
                at = min(at, float(stop.max_rounds))
            yield self.env.timeout(max(at - self.env.now, 0.0))
            self.update_counters()
            self.sync()
            done = self.observe(clock.present)
            self.report(progress)

    def now(self) -> tuple[int, float]:
        """(round, time) of a change now: rounds are whole seconds."""
        now = float(self.env.now)
        return math.floor(now + 1e-9), now

    def update_counters(self) -> None:
        """Whole seconds elapsed, the bytes the flow network moved and the flows it
        started."""
        net = self.clock.net
        self.rounds = math.floor(self.env.now + 1e-9)
        self.bytes_sent, self.messages = net.bytes_sent_total, net.flows_started

    def sync(self) -> None:
        """Bring every peer's state to now (protocols that update peers lazily)."""
        protocol = self.protocol
        assert isinstance(protocol, ContinuousProtocol)
        protocol.sync(self.state, float(self.env.now))
