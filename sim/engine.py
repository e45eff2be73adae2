"""The runner: ``run(scenario, seed)`` builds one SimPy environment and runs it.

Build order (Ciw-style): resolve peers → draw initial vectors → build the protocol and
churn with their own generators → run the clock's process → summarize. Nothing global:
everything a run touches hangs off :class:`Run`. What is measured and when the run stops
is the observer's (:mod:`sim.observe`), the same on both clocks.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import simpy

import protocols
from protocols.base import Context, State
from sim.backend import namespace, to_numpy
from sim.churn import ChurnSchedule, RoundChurn, build_schedule
from sim.churn.membership import MembershipSchedule
from sim.errors import ScenarioError
from sim.netclock import NetworkClock
from sim.network import FlowNetwork
from sim.observe.observer import Observer
from sim.observe.wiring import WatchedRejoin, timer, watched_churn
from sim.peers import resolve_peers
from sim.rejoin import Rejoin
from sim.resources import guard
from sim.result import RunResult
from sim.scenario.models import Scenario
from sim.seeding import component_rng
from sim.sites import topology
from sim.summary import summarize
from sim.vectors import initial_vectors

Progress = Callable[[float], None]


@dataclass
class NetEnv:
    """What a continuous-time protocol process gets from the run (network clock)."""

    env: simpy.Environment
    net: FlowNetwork
    present: np.ndarray  # shared with churn: True = present now
    state: State


class Run:
    """Everything one run owns: environment, state, protocol, churn and recorder."""

    def __init__(
        self, scenario: Scenario, seed: int, interrupt: threading.Event | None = None
    ) -> None:
        self.scenario, self.seed = scenario, seed
        n_initial = scenario.peers.count
        n = n_initial + scenario.churn.joining  # every peer that will ever exist
        self.peers = resolve_peers(scenario.peers, component_rng(seed, "peers"), n)
        self.xp = namespace(scenario.backend)
        x0 = initial_vectors(scenario.vector, n, component_rng(seed, "init"))
        self.state = State(x=self.xp.asarray(x0))
        self.mean0 = self.xp.mean(self.xp.asarray(x0[:n_initial], dtype=self.xp.float64), axis=0)
        itemsize = np.dtype(scenario.vector.dtype).itemsize
        ctx = Context(n, scenario.vector.dim, itemsize, component_rng(seed, "protocol"), self.peers)
        self.protocol = protocols.get(scenario.protocol.name)(scenario.protocol, ctx)
        if scenario.clock == "network" and not self.protocol.network_clock:
            raise ScenarioError("protocol.name", scenario.protocol.name, _network_protocols())
        self.protocol.init_state(self.state)
        self.exists = np.arange(n) < n_initial
        self.churn_args: dict[str, Any] = {
            "peer_classes": self.peers["class"].to_numpy(),
            "class_names": [c.name for c in scenario.peers.classes or []],
        }
        self.churn = RoundChurn(self.schedule())
        self.rejoin = Rejoin(scenario, component_rng(seed, "rejoin"))
        self.rejoin.previous = self.exists.copy()  # joiners count as returning peers
        self.env = simpy.Environment()
        self.rounds, self.bytes_sent, self.messages = 0, 0.0, 0
        self.present = self.exists.copy()  # who is present now (the network clock's mask)
        #: Rounds are whole seconds (continuous time on the network clock).
        self.seconds = scenario.clock == "network" and self.continuous
        self.observer = Observer(scenario, seed, self.protocol, self.state, self.mean0, interrupt)
        self.recorder = self.observer.recorder
        self.tracker = self.observer.track(self._masks, self._now, self.continuous)

    def schedule(self) -> ChurnSchedule:
        """The churn schedule of the run, masked by joins and leaves when there are any."""
        churn, n = self.scenario.churn, self.exists.size
        rng = component_rng(self.seed, "churn")
        schedule = build_schedule(churn, n, rng, **self.churn_args)
        if churn.joins is None and churn.leaves is None:
            return schedule
        membership = component_rng(self.seed, "membership")
        n_initial = self.scenario.peers.count
        return MembershipSchedule(schedule, n_initial, churn.joins, churn.leaves, membership)

    def membership(self, joined: np.ndarray, left: np.ndarray) -> None:
        """Churn callback (network clock): peers start or stop existing."""
        self.exists[joined] = True
        self.exists[left] = False

    def _masks(self) -> tuple[np.ndarray, np.ndarray]:
        return self.exists, self.present

    def _now(self) -> tuple[int, float]:
        """(round, time) of a change now: the round under way, or whole seconds."""
        now = float(self.env.now)
        if self.seconds:
            return math.floor(now + 1e-9), now
        return self.rounds + 1, now

    def observe(self, present: np.ndarray, first: bool = False) -> bool:
        """Measure the state now, record a row when due or final; True when the run ends."""
        traffic = (self.bytes_sent, self.messages)
        now = float(self.env.now)
        return self.observer.measure(present, self.exists, self.rounds, now, traffic, first)

    def _progress(self, progress: Progress | None) -> None:
        fraction = self.observer.progress(self.rounds, float(self.env.now))
        if progress is not None and fraction is not None:
            progress(fraction)

    def rounds_process(self, progress: Progress | None) -> Any:
        """The rounds clock: one round per unit of simulated time until a stop rule fires."""
        done = self.observe(self.exists.copy(), first=True)
        while not done:
            self._round_churn(self.churn.present(self.rounds), self.churn.exists)
            self.tracker.begin_round(float(self.rounds))
            stats = self.protocol.round(self.state, self.present, self.rounds)
            self.tracker.end_round(self.rounds + 1, float(self.rounds + 1))
            self.bytes_sent += stats.bytes_sent
            self.messages += stats.messages
            self.rounds += 1
            yield self.env.timeout(1)
            done = self.observe(self.present)
            self._progress(progress)

    def _round_churn(self, present: np.ndarray, exists: np.ndarray | None) -> None:
        """The round's presence and membership, and the rejoin of returning peers."""
        exists = self.exists if exists is None else exists
        changed = np.flatnonzero((present != self.present) | (exists != self.exists))

        def apply() -> None:
            self.exists, self.present = exists, present
            self.rejoin.apply(self.state, present)

        self.tracker.change(changed, apply)

    def network_process(self, progress: Progress | None) -> Any:
        """The network clock: barrier rounds of flows until a stop rule fires, or the
        protocol's own process (:meth:`continuous_process`) when it has one."""
        clock = self.network_clock()
        if self.continuous:
            yield from self.continuous_process(clock, progress)
            return
        yield self.env.timeout(0)  # let the churn process apply its time-0 step first
        done = self.observe(clock.present, first=True)
        while not done:
            plan = self.protocol.network_round(clock.present.copy(), self.rounds)
            yield from clock.transmit(plan)
            stats = plan.finish(self.state, clock.lost)
            self.rounds += 1
            self.bytes_sent, self.messages = clock.net.bytes_sent_total, clock.messages
            done = self.observe(clock.present)
            self._progress(progress)
            if stats.wait_s > 0 and not done:
                yield self.env.timeout(stats.wait_s)

    @property
    def continuous(self) -> bool:
        """True when the protocol runs on the network clock in continuous time (it has a
        ``network_process``) rather than in barrier rounds."""
        return callable(getattr(self.protocol, "network_process", None))

    def continuous_process(self, clock: NetworkClock, progress: Progress | None) -> Any:
        """The network clock in continuous time: the protocol's own process sends flows
        whenever it likes; this sampler measures every ``metrics.every`` seconds (and at
        ``stop.max_rounds`` seconds) until a stop rule fires. ``rounds`` = whole seconds
        elapsed."""
        stop, every = self.scenario.stop, self.scenario.metrics.every
        yield self.env.timeout(0)  # let the churn process apply its time-0 step first
        done = self.observe(clock.present, first=True)
        protocol: Any = self.protocol
        self.env.process(
            protocol.network_process(NetEnv(self.env, clock.net, clock.present, self.state))
        )
        self.tracker.schedule = timer(self.env)
        k = 0
        while not done:
            k += 1
            at = k * every
            if stop.max_rounds is not None and self.env.now < stop.max_rounds:
                at = min(at, float(stop.max_rounds))
            yield self.env.timeout(max(at - self.env.now, 0.0))
            self._net_traffic()
            self._sync()
            done = self.observe(clock.present)
            self._progress(progress)

    def _sync(self) -> None:
        """Bring every peer's state to now (continuous protocols with lazy updates)."""
        sync = getattr(self.protocol, "sync", None)
        if sync is not None:
            sync(self.state, float(self.env.now))

    def _net_traffic(self) -> None:
        """Bring ``bytes_sent``, ``messages`` (and ``rounds`` in continuous time) up to date."""
        clock = self.clock
        if self.continuous:
            self.rounds = math.floor(self.env.now + 1e-9)
            self.bytes_sent, self.messages = clock.net.bytes_sent_total, clock.net.flows_started
        else:
            self.bytes_sent, self.messages = clock.net.bytes_sent_total, clock.messages

    def network_clock(self) -> NetworkClock:
        """The flow network of the run's peers and the clock that sends rounds over it."""
        table = self.peers
        network = self.scenario.network
        net = FlowNetwork(
            self.env,
            table["upload_bytes_per_s"].to_numpy(),
            table["download_bytes_per_s"].to_numpy(),
            table["latency_s"].to_numpy(),
            sharing=network.sharing,
            links=topology(network, self.scenario.peers, table["class"].to_numpy()),
        )
        clock = NetworkClock(self.env, net, self.exists.copy(), table["delay_s"].to_numpy())
        self.present = clock.present
        rng = component_rng(self.seed, "rejoin")
        rejoin = WatchedRejoin(self.tracker, self.scenario, rng, clock, self.state)
        churn = watched_churn(
            self.env, self.schedule(), clock, rejoin, self.membership, self.tracker
        )
        self.env.process(churn)
        self.clock = clock
        return clock

    def finish_network(self) -> None:
        """After ``max_time`` or the observer (a target crossed, a NaN) cut a run short:
        bring the traffic counters up to date and record the final state."""
        self._net_traffic()
        self._sync()
        if self.recorder.rows[-1][2] != float(self.env.now):
            self.observe(self.clock.present, first=True)
        self.observer.decide(self.rounds, float(self.env.now))

    def traffic(self) -> pd.DataFrame:
        """Per-peer bytes out and in over the run (network clock; partial flows count)."""
        net = self.clock.net
        return pd.DataFrame(
            {"peer": np.arange(net.n), "bytes_out": net.bytes_out, "bytes_in": net.bytes_in}
        )


def _network_protocols() -> str:
    names = [name for name, cls in protocols.REGISTRY.items() if cls.network_clock]
    return "a protocol that runs on clock: network (" + ", ".join(names) + ")"


def run(
    scenario: Scenario,
    seed: int | None = None,
    progress: Progress | None = None,
    interrupt: threading.Event | None = None,
) -> RunResult:
    """Run ``scenario`` once with ``seed`` (default: the scenario's) and return the result.

    ``interrupt``: once set (from another thread, a signal handler), the run ends at its
    next sample with ``stop_reason: interrupted`` and a complete result.
    """
    seed = scenario.seed if seed is None else int(seed)
    guard(scenario)  # refuse a run that would not fit in memory, warn when it takes hours
    started = time.perf_counter()
    sim_run = Run(scenario, seed, interrupt)
    env = sim_run.env
    if scenario.clock == "rounds":
        env.process(sim_run.rounds_process(progress))
        env.run()
    else:
        ends = [env.process(sim_run.network_process(progress)), sim_run.observer.halt_event(env)]
        max_time = scenario.stop.max_time
        env.run(until=env.any_of(ends if max_time is None else [*ends, env.timeout(max_time)]))
        sim_run.finish_network()
    wall = time.perf_counter() - started
    metrics = sim_run.recorder.frame()
    extra = {"traffic": sim_run.traffic()} if scenario.clock == "network" else {}
    summary = summarize(
        scenario, seed, sim_run.rounds, metrics, wall, sim_run.observer.fields(),
        sim_run.protocol.counters,
    )  # fmt: skip
    return RunResult(
        metrics=metrics,
        summary=summary,
        scenario=scenario.model_dump(mode="json"),
        peers=sim_run.peers,
        state=sim_run.state,
        extra_tables=extra,
    )


__all__ = ["Run", "run", "to_numpy"]
