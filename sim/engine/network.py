"""What the ``network`` clock's engines share: the flow network, the clock, churn in time.

Time is simulated seconds. When the run's process starts it builds the flow network of
the peers (:class:`~sim.network.FlowNetwork`, links from ``network``), the clock that
tracks who is present and who was lost (:class:`~sim.engine.netclock.NetworkClock`) and starts
churn as a SimPy process whose preemptions, returns (``fetch`` is a real download) and
joins go through the exact-target tracker (:mod:`sim.engine.observe.wiring`). The run ends at
a stop rule, at ``stop.max_time`` or when the observer halts it between samples (a
target crossed, a NaN); :meth:`NetworkEngine.finish` then records the final state.
Traffic is the flow network's own count; per-peer bytes land in the ``traffic`` table.
"""

from __future__ import annotations

import threading
from abc import abstractmethod

import numpy as np
import pandas as pd

from sim.core.errors import ScenarioError
from sim.core.fields import dist_to_plain
from sim.core.seeding import component_rng
from sim.engine.base import Engine, Progress, frozen_heap
from sim.engine.netclock import NetworkClock, TracedClock, TracedFlowNetwork
from sim.engine.netclock.alone_groups import AloneGroups
from sim.engine.observe.wiring import WatchedRejoin, watched_churn
from sim.engine.trace import ChurnTrace
from sim.engine.training_net import GradientSlots, training_table
from sim.model.churn.lookahead import ChurnLookahead
from sim.model.jitter import Jitter, jitter_for
from sim.model.scenario.models import Scenario
from sim.model.sites import routes_of
from sim.network import FlowNetwork


def refuse_zero_bandwidth(scenario: Scenario, table: pd.DataFrame, field: str) -> None:
    """Refuse peers whose ``field`` (``upload`` or ``download``) bandwidth is 0: a flow
    through it would never end. The error names the key that gave the value (a class's
    override, else ``peers.<field>``) and the first such peer."""
    values = table[f"{field}_bytes_per_s"].to_numpy()
    zero = np.flatnonzero(values == 0.0)
    if not zero.size:
        return
    first = int(zero[0])
    classes = scenario.peers.classes or []
    k = int(table["class"].to_numpy()[first])
    override = getattr(classes[k], field) if classes else None
    key = f"peers.classes.{k}.{field}" if override is not None else f"peers.{field}"
    dist = override if override is not None else getattr(scenario.peers, field)
    more = f" and {zero.size - 1} more" if zero.size > 1 else ""
    raise ScenarioError(
        key, dist_to_plain(dist),
        f"a bandwidth > 0 on the network clock (peer {first}{more} would never finish a "
        "transfer)",
    )  # fmt: skip


class NetworkEngine(Engine):
    """Base of the network clock's engines (barrier rounds, continuous time).

    A subclass implements :meth:`~sim.engine.base.Engine.process`, which starts with
    :meth:`network_clock`, and :meth:`update_counters`; it may override :meth:`sync`
    (bring the state to now before a measurement; default nothing).
    """

    scenario_clock = "network"
    #: The run's gradient steps (None without a workload), built with the clock.
    gradients: GradientSlots | None = None

    def __init__(
        self, scenario: Scenario, seed: int, interrupt: threading.Event | None = None
    ) -> None:
        super().__init__(scenario, seed, interrupt)
        #: Built once, consumed by the churn process from the run's start.
        self.churn_schedule = self.schedule()
        #: Each step's compute time (``peers.compute_jitter``; :class:`NoJitter`: exact).
        self.jitter: Jitter = jitter_for(scenario.peers.compute_jitter, seed, len(self.peers))

    def network_clock(self) -> NetworkClock:
        """The flow network of the run's peers and the clock over it; starts churn.
        Called once, by the run's process when it starts."""
        table = self.peers
        network = self.scenario.network
        tracer = self.tracer
        if network.sharing == "rtt_weighted" and not network.links:
            zero = np.flatnonzero(table["latency_s"].to_numpy() == 0.0)
            if zero.size >= 2:  # their route has no latency to weigh by
                raise ScenarioError(
                    "network.sharing", "rtt_weighted",
                    "maxmin, or a positive route latency between every two peers (peers "
                    f"{zero[0]} and {zero[1]} have peers.latency 0)",
                )  # fmt: skip
        for field in ("upload", "download"):
            refuse_zero_bandwidth(self.scenario, table, field)
        net_args = (
            self.env,
            table["upload_bytes_per_s"].to_numpy(),
            table["download_bytes_per_s"].to_numpy(),
            table["latency_s"].to_numpy(),
            network.sharing,
            routes_of(network, self.scenario.peers, table["class"].to_numpy()),
        )
        clock_args = (self.exists.copy(), table["delay_s"].to_numpy())
        if tracer is None:
            net = FlowNetwork(*net_args)
            clock = NetworkClock(self.env, net, *clock_args)
        else:  # the same run, recorded: flows, refused messages, absences
            net = TracedFlowNetwork(tracer, *net_args)
            clock = TracedClock(tracer, self.env, net, *clock_args)
            clock.listeners.append(ChurnTrace(tracer, lambda: float(self.env.now)))
        self.present = clock.present
        rng = component_rng(self.seed, "rejoin")
        rejoin = WatchedRejoin(self.tracker, self.scenario, rng, clock, self.state)
        #: The churn schedule as the churn process consumes it, readable ahead.
        self.churn_ahead = ChurnLookahead(self.churn_schedule, float(self.env.now))
        churn = watched_churn(
            self.env, self.churn_ahead, clock, rejoin, self.membership, self.tracker
        )
        self.env.process(churn)
        self.clock = clock
        return clock

    def time_groups_alone(self, clock: NetworkClock) -> None:
        """Give ``clock`` an :class:`~sim.engine.netclock.alone_groups.AloneGroups` where
        nothing but a group's own flows can use its members' links
        (:meth:`~sim.engine.netclock.alone_groups.AloneGroups.fits`) and neither the
        scenario (``network.groups_alone``) nor the clock's class
        (:attr:`~sim.engine.netclock.NetworkClock.groups_alone`) says otherwise."""
        wanted = clock.groups_alone and self.scenario.network.groups_alone
        if wanted and AloneGroups.fits(self.scenario, clock.net, self.tracer is not None):
            clock.alone = AloneGroups(
                self.env, clock.net, clock.present, clock, clock.delay_s, self.churn_ahead
            )

    def membership(self, joined: np.ndarray, left: np.ndarray) -> None:
        """Churn callback: peers start or stop existing."""
        self.exists[joined] = True
        self.exists[left] = False
        if self.tracer is not None:
            now = float(self.env.now)
            for name, peers in (("join", joined), ("leave", left)):
                for peer in peers.tolist():
                    self.tracer.instant(peer, name, now)

    def simulate(self, progress: Progress | None = None) -> None:
        """Run until a stop rule, ``stop.max_time`` or a halt between samples, then
        :meth:`finish`."""
        env = self.env
        ends = [env.process(self.process(progress)), self.observer.halt_event(env)]
        max_time = self.scenario.stop.max_time
        with frozen_heap():
            env.run(until=env.any_of(ends if max_time is None else [*ends, env.timeout(max_time)]))
        self.finish()

    @abstractmethod
    def update_counters(self) -> None:
        """Bring ``bytes_sent`` and ``messages`` (and ``rounds`` where it counts time) up
        to date from the flow network."""

    def sync(self) -> None:
        """Bring the state to now before a measurement (default: nothing to do)."""

    def finish(self) -> None:
        """After ``max_time`` or the observer (a target crossed, a NaN) cut a run short:
        bring the traffic counters up to date and record the final state."""
        self.update_counters()
        self.sync()
        if self.recorder.rows[-1][2] != float(self.env.now):
            self.observe(self.clock.present, first=True)
        self.observer.decide(self.rounds, float(self.env.now))

    def tables(self) -> dict[str, pd.DataFrame]:
        """``traffic``: per-peer bytes out and in over the run (partial flows count); with
        a workload, ``training`` (each peer's gradient steps)."""
        net = self.clock.net
        traffic = {"peer": np.arange(net.n), "bytes_out": net.bytes_out, "bytes_in": net.bytes_in}
        tables = {"traffic": pd.DataFrame(traffic)}
        if self.trainer is not None:
            tables["training"] = training_table(self.trainer)
        return tables
