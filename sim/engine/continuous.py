"""Continuous time on the ``network`` clock: the protocol's own process sends flows.

The protocol's :meth:`~protocols.base.ContinuousProtocol.network_process` runs as a
SimPy process and sends flows whenever it likes; this engine only samples
(:class:`~sim.engine.sampled.SampledEngine`): every ``metrics.every`` seconds (and at
``stop.max_rounds`` seconds) it brings the state to now
(:meth:`~protocols.base.ContinuousProtocol.sync`) and measures, until a stop rule fires.
``rounds`` counts whole seconds elapsed. Both schedules run it: the protocols' edge
clocks already run in parallel with the peers' local work (as in the A²CiD² paper), so
``schedule: async`` changes nothing.

With a ``workload`` every present peer also runs a gradient clock: one gradient step
every ``peers.compute`` seconds, in parallel with the exchanges
(:mod:`sim.engine.training_net`; peers due at one instant step in one batch, each first
brought to now by :meth:`~protocols.base.Protocol.sync_rows`). ``compute`` must then be
positive for every peer.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from protocols.base import ContinuousProtocol
from protocols.contract import RunEnv
from sim.core.errors import ScenarioError
from sim.engine.netclock import NetworkClock
from sim.engine.sampled import SampledEngine
from sim.model.scenario.models import Scenario


class ContinuousEngine(SampledEngine):
    """A continuous-time protocol's process, sampled every ``metrics.every`` seconds."""

    protocol_type = ContinuousProtocol
    schedules = frozenset({"barrier", "async"})
    gradient_clock = True

    def __init__(
        self, scenario: Scenario, seed: int, interrupt: threading.Event | None = None
    ) -> None:
        super().__init__(scenario, seed, interrupt)
        compute = self.peers["compute"].to_numpy(float)
        if self.trainer is not None and compute.size and not compute.min() > 0:
            peer = int(np.argmin(compute))
            raise ScenarioError(
                "peers.compute", float(compute[peer]),
                f"a positive number of seconds per gradient step for every peer with a "
                f"workload under {scenario.protocol.name} (peer {peer} has "
                f"{float(compute[peer]):g}: its gradient clock would never advance)",
            )  # fmt: skip

    def start(self, clock: NetworkClock) -> None:
        """Start the protocol's process, then (with a workload) every present peer's
        gradient clock, in peer order."""
        protocol = self.protocol
        assert isinstance(protocol, ContinuousProtocol)
        self.env.process(
            protocol.network_process(RunEnv(self.env, clock.net, clock.present, self.state))
        )
        if self.gradients is not None:
            self.gradients.start(np.flatnonzero(clock.present))

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
