"""The runner: ``run(scenario, seed)`` builds one SimPy environment and runs it.

Build order (Ciw-style): resolve peers → draw initial vectors → build the protocol and
churn with their own generators → run the clock's process → summarize. Nothing global:
everything a run touches hangs off :class:`Run`.
"""

from __future__ import annotations

import math
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
from sim.churn import ChurnSchedule, RoundChurn, build_schedule, churn_process
from sim.churn.membership import MembershipSchedule
from sim.errors import ScenarioError
from sim.netclock import NetworkClock
from sim.network import FlowNetwork
from sim.peers import resolve_peers
from sim.recorder import Recorder, statistics
from sim.rejoin import NetworkRejoin, Rejoin
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

    def __init__(self, scenario: Scenario, seed: int) -> None:
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
        self.recorder = Recorder(seed, scenario.metrics.every)
        self.env = simpy.Environment()
        self.rounds, self.bytes_sent, self.messages = 0, 0.0, 0
        self.var_history: list[tuple[int, float, float]] = []

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

    def observe(self, present: np.ndarray, first: bool = False) -> bool:
        """Measure the state now, record a row when due or final; True when the run ends."""
        estimate = self.protocol.estimate(self.state)
        stats = statistics(estimate, present, self.mean0, self.exists)
        self.var_history.append((self.rounds, float(self.env.now), stats.var))
        done = self._should_stop(stats.var)
        if first or done or self.recorder.due(float(self.env.now)):
            traffic = (self.bytes_sent, self.messages)
            alive = float(present.sum() / max(1, self.exists.sum()))
            self.recorder.record(self.rounds, float(self.env.now), stats, alive, traffic)
        return done

    def rounds_process(self, progress: Progress | None) -> Any:
        """The rounds clock: one round per unit of simulated time until a stop rule fires."""
        max_rounds = self.scenario.stop.max_rounds
        done = self.observe(self.exists.copy(), first=True)
        while not done:
            present = self.churn.present(self.rounds)
            exists = self.churn.exists
            if exists is not None:
                self.exists = exists
            self.rejoin.apply(self.state, present)
            stats = self.protocol.round(self.state, present, self.rounds)
            self.bytes_sent += stats.bytes_sent
            self.messages += stats.messages
            self.rounds += 1
            yield self.env.timeout(1)
            done = self.observe(present)
            if progress is not None and max_rounds:
                progress(min(1.0, self.rounds / max_rounds))

    def network_process(self, progress: Progress | None) -> Any:
        """The network clock: barrier rounds of flows until a stop rule fires, or the
        protocol's own process (:meth:`continuous_process`) when it has one."""
        clock = self.network_clock()
        if self.continuous:
            yield from self.continuous_process(clock, progress)
            return
        stop = self.scenario.stop
        yield self.env.timeout(0)  # let the churn process apply its time-0 step first
        done = self.observe(clock.present, first=True)
        while not done:
            plan = self.protocol.network_round(clock.present.copy(), self.rounds)
            yield from clock.transmit(plan)
            stats = plan.finish(self.state, clock.lost)
            self.rounds += 1
            self.bytes_sent, self.messages = clock.net.bytes_sent_total, clock.messages
            done = self.observe(clock.present)
            if progress is not None and stop.max_time:
                progress(min(1.0, self.env.now / stop.max_time))
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
            if progress is not None and stop.max_time:
                progress(min(1.0, self.env.now / stop.max_time))

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
        rejoin = NetworkRejoin(self.scenario, component_rng(self.seed, "rejoin"), clock, self.state)
        self.env.process(
            churn_process(self.env, self.schedule(), clock.preempt, rejoin.restore, self.membership)
        )
        self.clock = clock
        return clock

    def finish_network(self) -> None:
        """After ``max_time`` cut a run short: bring the traffic counters up to date and
        record the final state."""
        self._net_traffic()
        self._sync()
        if self.recorder.rows[-1][2] != float(self.env.now):
            self.observe(self.clock.present, first=True)

    def traffic(self) -> pd.DataFrame:
        """Per-peer bytes out and in over the run (network clock; partial flows count)."""
        net = self.clock.net
        return pd.DataFrame(
            {"peer": np.arange(net.n), "bytes_out": net.bytes_out, "bytes_in": net.bytes_in}
        )

    def _should_stop(self, var: float) -> bool:
        stop = self.scenario.stop
        if stop.target_var and var < stop.target_var:
            return True
        if stop.max_rounds is not None and self.rounds >= stop.max_rounds:
            return True
        return stop.max_time is not None and self.env.now >= stop.max_time


def _network_protocols() -> str:
    names = [name for name, cls in protocols.REGISTRY.items() if cls.network_clock]
    return "a protocol that runs on clock: network (" + ", ".join(names) + ")"


def run(scenario: Scenario, seed: int | None = None, progress: Progress | None = None) -> RunResult:
    """Run ``scenario`` once with ``seed`` (default: the scenario's) and return the result."""
    seed = scenario.seed if seed is None else int(seed)
    started = time.perf_counter()
    sim_run = Run(scenario, seed)
    env = sim_run.env
    if scenario.clock == "rounds":
        env.process(sim_run.rounds_process(progress))
        env.run()
    else:
        finished = env.process(sim_run.network_process(progress))
        max_time = scenario.stop.max_time
        env.run(
            until=finished if max_time is None else env.any_of([finished, env.timeout(max_time)])
        )
        sim_run.finish_network()
    wall = time.perf_counter() - started
    metrics = sim_run.recorder.frame()
    extra = {"traffic": sim_run.traffic()} if scenario.clock == "network" else {}
    summary = summarize(
        scenario, seed, sim_run.var_history, sim_run.rounds, metrics, wall,
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
