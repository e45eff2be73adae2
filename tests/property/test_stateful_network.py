"""Stateful churn on the ``network`` clock, for every registered protocol that runs there.

A Hypothesis state machine builds a small real run (the engine of the network clock,
:class:`sim.engine.barrier.BarrierEngine` or :class:`sim.engine.continuous.ContinuousEngine`:
4–16 peers on slow links, drawn parameters and rejoin rule) and starts the engine's own process
(barrier rounds, or the protocol's continuous-time process).
Its rules advance SimPy time in small steps or event by event, and preempt and restore
peers at arbitrary moments, through the callbacks the churn process calls
(:meth:`sim.engine.netclock.NetworkClock.preempt`, :meth:`sim.model.rejoin.NetworkRejoin.restore`):
before a peer sends, mid-transfer, between a butterfly's reduce and its replies, during
matchmaking, mid-fetch. After every step it checks

- the protocol's invariants in force (:class:`~tests.property.test_stateful_invariants.Ledger`;
  rejoin writes accounted for), per barrier round and between any two instants;
- that every byte is accounted for (:func:`check_bytes`);
- that a peer preempted and not restored is absent and has no flow in flight.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import protocols
from protocols.contract import RoundPlan, State
from sim.core.seeding import component_rng
from sim.engine.netclock import NetworkClock
from sim.engine.schedules import BarrierEngine, ContinuousEngine, NetworkEngine, engine_class
from sim.model.rejoin import NetworkRejoin
from sim.network.flows import BANDWIDTH, DONE, FAILED, LATENCY, Flow, FlowNetwork
from tests.property.test_stateful_invariants import Ledger, RoundRecord, arrays
from tests.property.test_stateful_rounds import SETTINGS, build_run, pick
from tests.strategies import stateful_scenarios

NETWORK = sorted(
    name for name, cls in protocols.REGISTRY.items() if "network" in protocols.clocks_of(cls)
)
#: Steps of simulated time, seconds: from inside a latency to several rounds.
STEPS_S = st.sampled_from([1e-4, 2e-3, 0.01, 0.05, 0.2, 1.0, 3.0, 10.0])


class MachineRejoin(NetworkRejoin):
    """The engine's network rejoin, with what it writes reported to a ledger and its
    downloads marked (they are no protocol exchange)."""

    ledger: Ledger | None = None

    def __init__(self, run: StatefulRun, clock: NetworkClock) -> None:
        super().__init__(run.scenario, component_rng(run.seed, "rejoin"), clock, run.state)
        self.run = run

    def restore(self, peers: np.ndarray) -> None:
        assert self.ledger is not None
        restore = super().restore
        self.ledger.external(lambda: restore(peers))

    def _fetch(self, peer: int, since: int) -> None:
        first = len(self.run.flows)
        super()._fetch(peer, since)
        self.run.fetches.update(flow.id for flow in self.run.flows[first:])

    def _arrived(self, event: Any, source: int, peer: int, since: int) -> None:
        assert self.ledger is not None
        arrived = super()._arrived
        self.ledger.external(lambda: arrived(event, source, peer, since))


class StatefulRun(NetworkEngine):
    """The engine's run on the network clock, with every flow recorded (mixed into
    either network engine, :func:`stateful_run`)."""

    def network_clock(self) -> NetworkClock:
        clock = super().network_clock()
        self.flows: list[Flow] = []
        self.fetches: set[int] = set()
        send = clock.net.send

        def recording_send(*args: Any, **kwargs: Any) -> Flow:
            flow = send(*args, **kwargs)
            self.flows.append(flow)
            return flow

        clock.net.send = recording_send  # type: ignore[method-assign]
        resume = clock.net.resume

        def recording_resume(flow: Flow, *args: Any, **kwargs: Any) -> Flow:
            # a stream's next piece reuses its parked flow: keep the piece that was done
            self.flows[self.flows.index(flow)] = copy.copy(flow)
            flow = resume(flow, *args, **kwargs)
            self.flows.append(flow)
            return flow

        clock.net.resume = recording_resume  # type: ignore[method-assign]
        self.machine_rejoin = MachineRejoin(self, clock)
        return clock


class StatefulBarrier(StatefulRun, BarrierEngine):
    """Barrier rounds, every flow recorded."""


class StatefulContinuous(StatefulRun, ContinuousEngine):
    """Continuous time, every flow recorded."""


def stateful_run(scenario: Any, seed: int) -> StatefulRun:
    """The recording twin of the engine that runs ``scenario``."""
    barrier = issubclass(engine_class(scenario), BarrierEngine)
    return (StatefulBarrier if barrier else StatefulContinuous)(scenario, seed)


def check_bytes(net: FlowNetwork, flows: list[Flow], previous: np.ndarray) -> np.ndarray:
    """Every byte accounted for: the network's per-peer counts are the bytes of its
    delivered flows, plus those failed flows moved before failing, plus the progress of
    flows in flight (between 0 and their size); out and in agree; nothing is negative or
    goes back. Returns the bytes out, for the next call."""
    assert net.flows_started == len(flows)
    phases = [flow.phase for flow in flows]
    assert net.flows_completed == phases.count(DONE)
    assert net.flows_failed == phases.count(FAILED)
    settled_out, settled_in = np.zeros(net.n), np.zeros(net.n)
    moving_out, moving_in = np.zeros(net.n), np.zeros(net.n)
    for flow in flows:
        if flow.phase == DONE:
            assert flow.bytes_sent == flow.nbytes
        elif flow.phase == FAILED:
            assert 0.0 <= flow.bytes_sent <= flow.nbytes
            if flow.end_s < flow.start_s + flow.latency_s:
                assert flow.bytes_sent == 0.0, f"{flow} failed in its latency, moved bytes"
        else:
            assert flow.phase in (LATENCY, BANDWIDTH)
            if flow.phase == BANDWIDTH:
                moving_out[flow.src] += flow.nbytes
                moving_in[flow.dst] += flow.nbytes
            continue
        settled_out[flow.src] += flow.bytes_sent
        settled_in[flow.dst] += flow.bytes_sent
    out, into = net.bytes_out, net.bytes_in
    tol = 1e-9 * max(1.0, float(out.sum()))
    for counted, settled, moving in ((out, settled_out, moving_out), (into, settled_in, moving_in)):
        assert np.all(counted >= 0)
        assert np.all(counted - settled >= -tol), "a peer counts fewer bytes than its flows"
        assert np.all(counted - settled <= moving + tol), "a peer counts bytes no flow moved"
    assert abs(float(out.sum()) - float(into.sum())) <= tol
    assert net.bytes_sent_total == pytest.approx(float(out.sum()), rel=1e-12, abs=tol)
    assert np.all(out >= previous - tol), "bytes out went back"
    return out


def delivered(flow: Flow) -> bool:
    """The flow completed and its ``done`` callbacks have run (SimPy runs them as a
    later event of the same instant)."""
    return flow.done.processed and flow.done.ok


def lost(flow: Flow) -> bool:
    """The flow failed and its ``done`` callbacks have run."""
    return flow.done.processed and not flow.done.ok


class NetworkMachine(RuleBasedStateMachine):
    """Time advances in small steps; peers go and come at any moment."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.ledger: Ledger | None = None

    @initialize(data=st.data())
    def build(self, data: st.DataObject) -> None:
        self.start(data.draw(stateful_scenarios(self.name, "network")))

    def start(self, mapping: dict[str, Any]) -> None:
        """Build the run of scenario ``mapping`` and start its process."""
        run = self.run = build_run(mapping, stateful_run)
        run.env.process(run.process(None))
        run.env.step()  # the process starts: it builds the clock, the flow network, churn
        self.clock, self.net = run.clock, run.clock.net
        protocol = run.protocol
        in_force = protocol.invariants_in_force("network", run.scenario.churn.rejoin)
        self.ledger = Ledger(protocol, run.state, in_force)
        run.machine_rejoin.ledger = self.ledger
        self.records: list[RoundRecord] = []
        if isinstance(run, BarrierEngine):
            self._record_rounds()
        self.down: set[int] = set()
        self.down_at: dict[int, float] = {}
        self.bytes_out = np.zeros(self.net.n)
        self.applied: set[int] = set()
        self.was_present = self.clock.present.copy()

    def _record_rounds(self) -> None:
        """Wrap the protocol's round plans so that each round's arithmetic is recorded."""
        protocol = self.run.protocol
        assert isinstance(protocol, protocols.BarrierProtocol)
        plan_round = protocol.plan

        def plan(present: np.ndarray, t: int) -> RoundPlan:
            planned = plan_round(present, t)
            finish = planned.finish

            def recorded(state: State, lost: np.ndarray) -> Any:
                before = arrays(state)
                stats = finish(state, lost)
                part = present & ~lost
                self.records.append(RoundRecord(part, before, arrays(state), stats))
                return stats

            planned.finish = recorded
            return planned

        protocol.plan = plan

    # -- rules -----------------------------------------------------------------------
    @rule(dt=STEPS_S, fraction=st.floats(0.1, 1.0))
    def advance(self, dt: float, fraction: float) -> None:
        env = self.run.env
        env.run(until=env.now + dt * fraction)

    @rule(k=st.integers(1, 6))
    def next_events(self, k: int) -> None:
        env = self.run.env
        for _ in range(k):
            env.step()

    @rule(k=pick, mid_transfer=st.booleans())
    def preempt(self, k: int, mid_transfer: bool) -> None:
        """Preempt a peer that is up (or fetching), or an end of a flow in flight (in
        its latency or bandwidth phase) when there is one and ``mid_transfer``."""
        live = [f for f in self.run.flows if f.phase in (LATENCY, BANDWIDTH)]
        ends = {p for f in live for p in (f.src, f.dst)} - self.down
        candidates = (
            sorted(ends) if mid_transfer and ends else sorted(set(range(self.net.n)) - self.down)
        )
        if candidates:
            peer = candidates[k % len(candidates)]
            self.clock.preempt(np.array([peer]))
            self.down.add(peer)
            self.down_at[peer] = float(self.run.env.now)

    @rule(k=pick)
    def restore(self, k: int) -> None:
        """Bring back a peer that is down, as the churn process would: a peer never
        returns within the instant it went down (schedule steps come in strictly
        increasing time, their ``down`` and ``up`` disjoint), so the events of that
        instant — the callbacks of flows delivered just before the preemption — have
        run first. A peer preempted at this very instant returns once they have (as at
        the limit of an ever shorter absence)."""
        if self.down:
            peer = sorted(self.down)[k % len(self.down)]
            env = self.run.env
            if self.down_at[peer] == env.now:
                while env.peek() <= env.now:
                    env.step()
            self.down.discard(peer)
            self.run.machine_rejoin.restore(np.array([peer]))

    # -- checks ----------------------------------------------------------------------
    @precondition(lambda self: self.ledger is not None)
    @invariant()
    def invariants_hold(self) -> None:
        assert self.ledger is not None
        run, present = self.run, self.clock.present
        if isinstance(run.protocol, protocols.ContinuousProtocol):
            run.protocol.sync(run.state, float(run.env.now))  # as the engine does to measure
        down = np.array(sorted(self.down), dtype=np.intp)
        assert not present[down].any(), f"peers {down[present[down]]} down but present"
        self.bytes_out = check_bytes(self.net, run.flows, self.bytes_out)
        for flow in run.flows:
            if flow.phase in (LATENCY, BANDWIDTH):
                assert present[flow.src], f"{flow} in flight from an absent peer"
                fetching = flow.id in run.fetches  # a fetch's receiver is not present yet
                assert present[flow.dst] or fetching, f"{flow} in flight to an absent peer"
                assert flow.dst not in self.down, f"{flow} in flight to a peer that is down"
        if isinstance(run, ContinuousEngine):
            self.ledger.check(**self._exchanges())
        else:
            self.ledger.check(self.records)
            self.records.clear()
        self.was_present = present.copy()

    def _exchanges(self) -> dict[str, Any]:
        """The protocol's exchanges so far (flows in send order, ``exchanges`` or
        ``pushes`` of them), checked against its counters; which were applied, which of
        those since the last check, their ends and the peers absent since then. An
        exchange counts once its flows' callbacks have run."""
        run, counters = self.run, self.run.protocol.counters
        flows = [flow for flow in run.flows if flow.id not in run.fetches]
        started = counters["exchanges"] if "exchanges" in counters else counters["pushes"]
        per = len(flows) // started if started else 1
        assert per in (1, 2)
        assert len(flows) == per * started
        groups = [flows[k : k + per] for k in range(0, len(flows), per)]
        applied = {k for k, g in enumerate(groups) if all(delivered(f) for f in g)}
        cancelled = {k for k, g in enumerate(groups) if any(lost(f) for f in g)}
        assert counters["completed"] == len(applied)
        assert counters["cancelled"] == len(cancelled)
        new, self.applied = applied - self.applied, applied
        ends = {k: tuple({p for f in groups[k] for p in (f.src, f.dst)}) for k in new}
        absent = ~self.clock.present & ~self.was_present
        return {"applied": applied, "new": new, "ends": ends, "absent": absent}


@pytest.mark.parametrize("name", NETWORK)
def test_invariants_and_bytes_hold_under_any_churn_on_the_network_clock(name):
    run_state_machine_as_test(lambda: NetworkMachine(name), settings=SETTINGS)


#: Continuous-time protocols: their exchanges apply when the callbacks of their
#: delivered flows run, a later event of the delivery's instant.
CONTINUOUS = [
    name for name in NETWORK if issubclass(protocols.get(name), protocols.ContinuousProtocol)
]


@pytest.mark.parametrize("end", ["src", "dst"])
@pytest.mark.parametrize("name", CONTINUOUS)
def test_a_peer_reset_at_the_instant_its_exchange_was_delivered_keeps_the_fresh_row(name, end):
    """An exchange (or push) is delivered; before its callbacks have run, one end is
    preempted and, at that same instant, restored with ``rejoin: reset``. The delivery
    belongs to the old incarnation: it must be applied before the reset, never to the
    fresh row (push-sum would subtract the old half from the fresh draw: x/w out of the
    hull, w possibly negative). The fresh row stays as the reset wrote it, and every
    invariant in force holds throughout."""
    section, fields = {"topology": "ring", "rate": 0.5}, protocols.get(name).Params.model_fields
    mapping = {
        "name": "stateful", "clock": "network", "seed": 3,
        "peers": {
            "count": 7,
            "upload": {"dist": "uniform", "low": 400, "high": 4000},
            "download": {"dist": "uniform", "low": 400, "high": 4000},
            "latency": {"dist": "uniform", "low": 0.002, "high": 0.02},
            "delay": {"dist": "uniform", "low": 0.0, "high": 0.5},
        },
        "churn": {"model": "none", "rejoin": "reset"},
        "vector": {"dim": 2, "init": "normal"},
        "protocol": {"name": name, **{k: v for k, v in section.items() if k in fields}},
        "stop": {"max_rounds": None, "max_time": 1e9, "target_var": None},
    }  # fmt: skip
    machine = NetworkMachine(name)
    machine.start(mapping)
    run, env = machine.run, machine.run.env
    per = 2 if "exchanges" in run.protocol.counters else 1

    def delivered_not_applied() -> list[Flow]:
        flows = [flow for flow in run.flows if flow.id not in run.fetches]
        groups = [flows[k : k + per] for k in range(0, len(flows), per)]
        return next(
            (
                group for group in groups
                if all(f.done.triggered and f.done.ok for f in group)
                and not all(f.done.processed for f in group)
            ),
            [],
        )  # fmt: skip

    while not (group := delivered_not_applied()):
        env.step()
        machine.invariants_hold()
    peer = group[0].src if end == "src" else group[0].dst
    completed = run.protocol.counters["completed"]
    machine.preempt(k=peer, mid_transfer=False)  # nobody is down: candidate k is peer k
    assert machine.down == {peer}
    machine.invariants_hold()
    machine.restore(k=0)
    written = {key: value[peer].copy() for key, value in arrays(run.state).items()}
    assert run.clock.present[peer]
    machine.invariants_hold()
    while env.peek() <= env.now:  # the rest of the instant
        env.step()
        machine.invariants_hold()
    now = arrays(run.state)
    for key, row in written.items():
        assert np.array_equal(now[key][peer], row), f"{key} of the fresh row moved"
    assert run.protocol.counters["completed"] == completed + 1, "the delivery was not applied"
