"""The compiled and general paths of the network side by side: the same workload gives
the same completion times, failures and bytes, bit for bit (network.md; issue 13).

Workloads are random: sizes, start times, bandwidth classes (some ``inf``), per-peer
latencies, shared links (:class:`~sim.network.LinkGraph`, full or half duplex, some
infinite), ``rtt_weighted`` sharing, streamed pieces (no latency), preemptions
(``fail_peer``) and cancellations (a receiver's timeout).
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np
import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from sim.network import FlowNetwork, LinkGraph, transfer_times
from sim.network import compiled as compiled_path
from sim.network.flows import COMPILED_MIN_PEERS

pytestmark = pytest.mark.skipif(not compiled_path.available(), reason="numba not installed")

CAPACITIES = [0.5, 1.0, 2.0, 3.0, 1 / 3, 7.5, 10.0, math.inf]
SIZES = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.7]), st.floats(0.01, 20.0, allow_subnormal=False)
)
TIMES = st.one_of(
    st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0, 1.5]), st.floats(0.0, 6.0, allow_subnormal=False)
)


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    """Hosts, latencies, optional links, transfers, preemptions and cancellations."""
    n = draw(st.integers(2, 12))
    up = draw(st.lists(st.sampled_from(CAPACITIES), min_size=n, max_size=n))
    down = draw(st.lists(st.sampled_from(CAPACITIES), min_size=n, max_size=n))
    latency_s = draw(st.lists(st.sampled_from([0.0, 0.01, 0.1, 0.25]), min_size=n, max_size=n))
    sharing = draw(st.sampled_from(["maxmin", "rtt_weighted"]))
    if sharing == "rtt_weighted":
        latency_s = [lat + 0.05 for lat in latency_s]
    links = None
    if draw(st.booleans()):
        graph = nx.Graph()
        for site in range(3):
            capacity = draw(st.sampled_from([1.0, 2.5, 4.0, math.inf]))
            graph.add_edge(f"s{site}", "hub", capacity=capacity, latency=0.01 * site)
        if draw(st.booleans()):  # a direct link: paths of one or two links
            graph.add_edge("s0", "s1", capacity=draw(st.sampled_from([0.7, 3.0])), latency=0.0)
        nodes = draw(st.lists(st.sampled_from(["s0", "s1", "s2"]), min_size=n, max_size=n))
        links = LinkGraph(graph, nodes, duplex=draw(st.sampled_from(["full", "half"])))
    transfer = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), SIZES, TIMES, st.booleans())
    transfers = draw(st.lists(transfer, min_size=1, max_size=30))
    fails = draw(st.lists(st.tuples(TIMES, st.integers(0, n - 1)), max_size=3))
    cancels = draw(st.lists(st.tuples(TIMES, st.integers(0, len(transfers) - 1)), max_size=4))
    return {
        "up": up,
        "down": down,
        "latency_s": latency_s,
        "sharing": sharing,
        "links": links,
        "transfers": transfers,
        "fails": fails,
        "cancels": cancels,
    }


def simulate(workload: dict[str, Any], solver: str) -> dict[str, Any]:
    """Run ``workload`` on ``solver``; every flow's outcome and the bytes counted."""
    env = simpy.Environment()
    net = FlowNetwork(
        env,
        np.array(workload["up"]),
        np.array(workload["down"]),
        workload["latency_s"],
        workload["sharing"],
        workload["links"],
        solver=solver,
    )
    assert net.solver == solver
    flows: list[Any] = [None] * len(workload["transfers"])
    samples: list[Any] = []

    order: list[int] = []  # flows in the order their done events are processed

    def send(k: int, src: int, dst: int, nbytes: float, latency: bool) -> None:
        flows[k] = net.send(src, dst, nbytes, latency=latency)
        flows[k].done.callbacks.append(lambda _, key=flows[k].id: order.append(key))

    def fail(peer: int) -> None:
        samples.append(("fail", env.now, [f.id for f in net.fail_peer(peer)]))
        samples.append(("out", env.now, net.bytes_out.tolist(), net.bytes_in.tolist()))

    def cancel(k: int) -> None:
        if flows[k] is not None:
            samples.append(("moved", env.now, net.moved(flows[k])))
            net.cancel(flows[k])
        samples.append(("rates", env.now, sorted(net.rates().items())))

    for k, (src, dst, nbytes, start_s, latency) in enumerate(workload["transfers"]):
        args = (k, src, dst, nbytes, latency)
        simpy.Timeout(env, start_s).callbacks.append(lambda _, a=args: send(*a))
    for at_s, peer in workload["fails"]:
        simpy.Timeout(env, at_s).callbacks.append(lambda _, p=peer: fail(p))
    for at_s, k in workload["cancels"]:
        simpy.Timeout(env, at_s).callbacks.append(lambda _, k=k: cancel(k))
    env.run()
    outcomes = [(f.id, f.phase, f.end_s, f.bytes_sent, f.done.ok) for f in flows]
    counts = (net.flows_started, net.flows_completed, net.flows_failed)
    out = net.bytes_out.tolist()
    return {"flows": outcomes, "order": order, "samples": samples, "counts": counts, "out": out}


@given(workloads())
def test_compiled_and_general_paths_give_bit_identical_results(workload) -> None:
    general = simulate(workload, "general")
    compiled = simulate(workload, "compiled")
    assert compiled == general  # completion times, failures and bytes: exactly equal
    assert general["counts"][0] == len(workload["transfers"])
    assert general["counts"][1] + general["counts"][2] == len(workload["transfers"])


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_both_paths_agree_under_heavy_contention(seed: int) -> None:
    # 48 hosts in 3 sites, 1500 flows (the compiled arrays grow several times, routes of
    # up to 4 resources), preemptions and cancellations
    rng = np.random.default_rng(seed)
    n = 48
    graph = nx.Graph()
    graph.add_edge("s0", "hub", capacity=float(rng.uniform(20, 60)), latency=0.01)
    graph.add_edge("s1", "hub", capacity=float(rng.uniform(20, 60)), latency=0.02)
    graph.add_edge("s2", "hub", capacity=math.inf, latency=0.0)
    links = LinkGraph(graph, [f"s{i % 3}" for i in range(n)]) if seed != 4 else None
    starts = np.sort(rng.uniform(0, 60, 1500))
    src = rng.integers(0, n, 1500)
    workload = {
        "up": rng.choice([1.0, 2.0, 4.0, math.inf], n).tolist(),
        "down": rng.choice([1.0, 3.0, 8.0, math.inf], n).tolist(),
        "latency_s": rng.uniform(0.01, 0.1, n).tolist(),
        "sharing": "rtt_weighted" if seed == 3 else "maxmin",
        "links": links,
        "transfers": [
            (int(s), int(d), float(b), float(t), bool(lat))
            for s, d, b, t, lat in zip(
                src,
                (src + rng.integers(1, n, 1500)) % n,
                rng.exponential(3.0, 1500),
                starts,
                rng.random(1500) < 0.8,
                strict=True,
            )
        ],
        "fails": [
            (float(t), int(p))
            for t, p in zip(rng.uniform(0, 60, 10), rng.integers(0, n, 10), strict=True)
        ],
        "cancels": [
            (float(t), int(k))
            for t, k in zip(rng.uniform(0, 60, 30), rng.integers(0, 1500, 30), strict=True)
        ],
    }
    general = simulate(workload, "general")
    assert simulate(workload, "compiled") == general
    assert general["counts"][1] > 1000
    assert general["counts"][2] > 0


def test_both_paths_agree_when_one_peer_serves_thousands() -> None:
    # one uploader with up to ~2000 flows at once: its list moves through the pool many
    # times, and leaving flows are shifted out of long lists
    rng = np.random.default_rng(11)
    n = 40
    transfers = [
        (0 if rng.random() < 0.7 else int(rng.integers(1, n)), int(rng.integers(1, n)),
         float(rng.exponential(1.0)), float(t), True)
        for t in np.sort(rng.uniform(0, 5, 3000))
    ]  # fmt: skip
    workload = {
        "up": [50.0] + [5.0] * (n - 1),
        "down": rng.choice([2.0, 4.0, math.inf], n).tolist(),
        "latency_s": [0.01] * n,
        "sharing": "maxmin",
        "links": None,
        "transfers": transfers,
        "fails": [(2.5, 7), (4.0, 0)],
        "cancels": [
            (float(t), int(k))
            for t, k in zip(rng.uniform(0, 5, 20), rng.integers(0, 3000, 20), strict=True)
        ],
    }
    general = simulate(workload, "general")
    assert simulate(workload, "compiled") == general
    assert general["counts"][2] > 100  # the uploader's preemption failed its flows


@pytest.mark.parametrize("solver", ["general", "compiled"])
def test_flows_completing_together_are_delivered_in_id_order(solver: str) -> None:
    # 60 equal flows on distinct peers, sent in a scrambled order, end at the same instant
    n = 120
    env = simpy.Environment()
    net = FlowNetwork(env, np.full(n, 2.0), np.full(n, 2.0), np.full(n, 0.01), solver=solver)
    order: list[int] = []
    for src in np.random.default_rng(5).permutation(60).tolist():
        flow = net.send(src, src + 60, 3.0)
        flow.done.callbacks.append(lambda _, key=flow.id: order.append(key))
    env.run()
    assert order == list(range(60))
    assert net.flows_completed == 60


def test_auto_picks_the_compiled_path_for_large_networks() -> None:
    env = simpy.Environment()
    n = COMPILED_MIN_PEERS
    big = FlowNetwork(env, np.ones(n), np.ones(n), np.zeros(n))
    small = FlowNetwork(env, np.ones(4), np.ones(4), np.zeros(4))
    assert (big.solver, small.solver) == ("compiled", "general")


def test_transfer_times_agree_between_paths_on_many_hosts() -> None:
    # transfer_times on COMPILED_MIN_PEERS hosts takes the compiled path
    rng = np.random.default_rng(7)
    n = COMPILED_MIN_PEERS
    hosts = [(float(u), float(d)) for u, d in rng.choice([1e6, 5e6, 1e8], (n, 2))]
    src = rng.integers(0, n, 3000)
    transfers = [
        (int(s), int((s + o) % n), float(b), float(t))
        for s, o, b, t in zip(
            src,
            rng.integers(1, n, 3000),
            rng.lognormal(12, 1, 3000),
            rng.uniform(0, 5, 3000),
            strict=True,
        )
    ]
    auto = transfer_times(hosts, 0.02, transfers)
    env = simpy.Environment()
    up, down = np.array(hosts).T
    net = FlowNetwork(env, up, down, np.full(n, 0.01), solver="general")
    flows: list[Any] = [None] * len(transfers)
    for k, (s, d, b, t) in enumerate(transfers):
        simpy.Timeout(env, t).callbacks.append(
            lambda _, k=k, a=(s, d, b): flows.__setitem__(k, net.send(*a))
        )
    env.run()
    assert auto == [f.end_s for f in flows]
