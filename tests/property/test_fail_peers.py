"""Preemptions in the flow network (``fail_peer``, ``fail_peers``): which flows fail, in
what order, against a record the test keeps of every flow it sent or resumed.

The network finds a peer's flows in flight when the peer fails (its latency batches and
its core's flows), not from per-peer dicts kept up to date at every completion; these
tests hold it to the definition: every flow in its latency or bandwidth phase (a parked
stream is neither) from or to the peer, by id (a resumed stream under its new id), a
flow between two peers of one wave failing with the first.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from sim.network import FlowNetwork
from sim.network import compiled as compiled_path
from sim.network.flows import BANDWIDTH, LATENCY

SOLVERS = ["general", "compiled"] if compiled_path.available() else ["general"]
CAPACITIES = [0.5, 1.0, 2.0, 3.0, 7.5, math.inf]
TIMES = st.one_of(st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.floats(0.0, 4.0))


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    """Hosts, transfers (some streams of several pieces, some without latency) and waves
    of preemptions (several peers at one instant, repeats included)."""
    n = draw(st.integers(2, 8))
    caps = st.lists(st.sampled_from(CAPACITIES), min_size=n, max_size=n)
    peer = st.integers(0, n - 1)
    sizes = st.floats(0.0, 6.0)
    wave = st.tuples(TIMES, st.lists(peer, min_size=1, max_size=4))
    transfer = st.tuples(
        peer, peer, st.lists(sizes, min_size=1, max_size=4), TIMES, st.booleans()
    )  # fmt: skip
    return {
        "up": draw(caps),
        "down": draw(caps),
        "latency_s": draw(st.lists(st.sampled_from([0.0, 0.05, 0.3]), min_size=n, max_size=n)),
        "transfers": draw(st.lists(transfer, min_size=1, max_size=25)),
        "waves": draw(st.lists(wave, max_size=3)),
    }


def in_flight(flow: Any) -> bool:
    """In its latency or bandwidth phase (a parked stream's piece is done)."""
    return flow.phase is LATENCY or flow.phase is BANDWIDTH


def simulate(workload: dict[str, Any], solver: str, one_by_one: bool) -> dict[str, Any]:
    """Run ``workload``; each wave through ``fail_peers`` or ``fail_peer`` per peer. The
    record: each wave's failed flows (id, peer blamed) and the expected ones, the rates
    (in the network's order) at each wave, and every flow's outcome."""
    env = simpy.Environment()
    up, down = np.array(workload["up"]), np.array(workload["down"])
    net = FlowNetwork(env, up, down, workload["latency_s"], solver=solver)
    sent: list[Any] = []  # every flow the test sent or resumed (a stream once per piece)
    waves: list[Any] = []

    def piece(flow: Any, rest: list[float], event: simpy.Event) -> None:
        if event.ok and rest and flow.parked:  # the next piece follows on the connection
            # (a piece without bytes or resources completes at once, unparked)
            resumed = net.resume(flow, rest[0], keep=len(rest) > 1)
            sent.append(resumed)
            resumed.done.callbacks.append(lambda e, f=resumed, r=rest[1:]: piece(f, r, e))
        elif not event.ok:
            event.defused = True

    def send(src: int, dst: int, pieces: list[float], latency: bool) -> None:
        flow = net.send(src, dst, pieces[0], latency=latency, keep=len(pieces) > 1)
        sent.append(flow)
        flow.done.callbacks.append(lambda e, f=flow, r=pieces[1:]: piece(f, r, e))

    def fail(peers: list[int]) -> None:
        expected, gone = [], set()
        for peer in peers:
            live = [f for f in sent if in_flight(f) and peer in (f.src, f.dst)]
            unique = {id(f): f for f in live if id(f) not in gone}  # a stream: once
            mine = sorted(unique.values(), key=lambda f: f.id)
            gone.update(id(f) for f in mine)
            expected += [(f.id, peer) for f in mine]
        rates = list(net.rates().items())
        if one_by_one:
            failed = [f for peer in peers for f in net.fail_peer(peer)]
        else:
            failed = net.fail_peers(peers)
        got = [(f.id, f.done.value.peer) for f in failed]
        waves.append((env.now, expected, got, rates, net.bytes_out.tolist()))

    for src, dst, pieces, start_s, latency in workload["transfers"]:
        args = (src, dst, pieces, latency)
        simpy.Timeout(env, start_s).callbacks.append(lambda _, a=args: send(*a))
    for at_s, peers in workload["waves"]:
        simpy.Timeout(env, at_s).callbacks.append(lambda _, p=peers: fail(p))
    env.run()
    outcomes = [(f.id, f.phase, f.end_s, f.bytes_sent) for f in sent]
    counts = (net.flows_started, net.flows_completed, net.flows_failed)
    return {"waves": waves, "outcomes": outcomes, "counts": counts, "idle": net.idle}


@pytest.mark.parametrize("solver", SOLVERS)
@given(workloads())
def test_a_wave_fails_each_peers_flows_in_flight_by_id(solver: str, workload) -> None:
    run = simulate(workload, solver, one_by_one=False)
    for _, expected, got, _, _ in run["waves"]:
        assert got == expected
    assert run["idle"]
    assert run["counts"][0] == run["counts"][1] + run["counts"][2]


@pytest.mark.parametrize("solver", SOLVERS)
@given(workloads())
def test_a_wave_is_its_peers_failed_one_by_one(solver: str, workload) -> None:
    assert simulate(workload, solver, one_by_one=False) == simulate(
        workload, solver, one_by_one=True
    )


@pytest.mark.skipif(len(SOLVERS) < 2, reason="numba not installed")
@given(workloads())
def test_both_cores_list_their_flows_in_the_same_order(workload) -> None:
    # rates() lists the flows in their bandwidth phase in the order they entered it (a
    # resumed stream as of its resumption): the general core's dict, the compiled
    # core's entry counts; bytes_out sums the flows in flight in that order
    assert simulate(workload, "compiled", False) == simulate(workload, "general", False)


def test_a_wave_between_two_of_its_peers_blames_the_first() -> None:
    env = simpy.Environment()
    net = FlowNetwork(env, np.ones(3), np.ones(3), [0.0, 0.0, 0.0])
    a = net.send(0, 1, 5.0)
    b = net.send(1, 2, 5.0)
    c = net.send(2, 0, 5.0)
    env.run(1.0)
    failed = net.fail_peers([1, 0])
    assert [(f.id, f.done.value.peer) for f in failed] == [(a.id, 1), (b.id, 1), (c.id, 0)]
    assert net.fail_peers([0, 1, 2]) == []
    assert net.idle
