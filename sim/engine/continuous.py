"""Continuous time on the ``network`` clock: the protocol's own process sends flows.

The protocol's :meth:`~protocols.base.ContinuousProtocol.network_process` runs as a
SimPy process and sends flows whenever it likes; this engine only samples
(:class:`~sim.engine.sampled.SampledEngine`): every ``metrics.every`` seconds (and at
``stop.max_rounds`` seconds) it brings the state to now
(:meth:`~protocols.base.ContinuousProtocol.sync`) and measures, until a stop rule fires.
``rounds`` counts whole seconds elapsed. Both schedules run it: the protocols' edge
clocks already run in parallel with the peers' local work (as in the A²CiD² paper), so
``schedule: async`` changes nothing.
"""

from __future__ import annotations

import math

from protocols.base import ContinuousProtocol
from protocols.contract import RunEnv
from sim.engine.netclock import NetworkClock
from sim.engine.sampled import SampledEngine


class ContinuousEngine(SampledEngine):
    """A continuous-time protocol's process, sampled every ``metrics.every`` seconds."""

    protocol_type = ContinuousProtocol
    schedules = frozenset({"barrier", "async"})

    def start(self, clock: NetworkClock) -> None:
        """Start the protocol's process."""
        protocol = self.protocol
        assert isinstance(protocol, ContinuousProtocol)
        self.env.process(
            protocol.network_process(RunEnv(self.env, clock.net, clock.present, self.state))
        )

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
