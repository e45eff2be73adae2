"""One-shot barrier rounds (``sim.engine.round_solver``) against the general path.

A round of independent flows is sent twice from the same state: through
:meth:`NetworkClock.transmit` (a ``Flow``, a SimPy event and a callback per message) and
through :class:`OneShotRounds` (replayed by :func:`sim.network.oneshot.round_timeline`).
Networks are random: bandwidth classes (some ``inf``), per-peer latencies (some zero,
which the replay leaves to the general path), shared links, ``rtt_weighted`` sharing,
straggler offsets, absent peers (refused messages), and an outside event (a preemption,
or a process's timeout) that may fall inside the round and must send it down the
general path. Times agree to 1e-9 relative (bit for bit on a ring of equal peers), counts
and bytes exactly.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np
import pytest
import simpy
from hypothesis import event, given, settings
from hypothesis import strategies as st

from protocols.contract import Flows, RoundPlan, RoundStats
from sim.engine import round_solver
from sim.engine.netclock import NetworkClock
from sim.network import FlowNetwork, LinkGraph
from sim.network.maxmin import maxmin_rates
from sim.network.oneshot import RouteTable, fill_levels, round_timeline

CAPACITIES = [0.5, 1.0, 2.0, 3.0, 1 / 3, 7.5, 10.0, math.inf]
LATENCIES = [0.0, 0.01, 0.1, 0.25]


@st.composite
def rounds(draw: st.DrawFn) -> dict[str, Any]:
    """A network, one round of independent flows, who is present, an outside event."""
    n = draw(st.integers(2, 10))
    uniform = draw(st.booleans())  # one capacity and latency for every peer
    if uniform:
        up = [draw(st.sampled_from(CAPACITIES[:-1]))] * n
        down = [draw(st.sampled_from(CAPACITIES))] * n
        latency_s = [draw(st.sampled_from(LATENCIES[1:]))] * n
    else:
        up = draw(st.lists(st.sampled_from(CAPACITIES), min_size=n, max_size=n))
        down = draw(st.lists(st.sampled_from(CAPACITIES), min_size=n, max_size=n))
        latency_s = draw(st.lists(st.sampled_from(LATENCIES), min_size=n, max_size=n))
    sharing = draw(st.sampled_from(["maxmin", "maxmin", "rtt_weighted"]))
    if sharing == "rtt_weighted":
        latency_s = [lat + 0.05 for lat in latency_s]
    links = None
    if not uniform and draw(st.booleans()):
        graph = nx.Graph()
        for site in range(3):
            capacity = draw(st.sampled_from([1.0, 2.5, 4.0, math.inf]))
            graph.add_edge(f"s{site}", "hub", capacity=capacity, latency=0.01 * site)
        nodes = draw(st.lists(st.sampled_from(["s0", "s1", "s2"]), min_size=n, max_size=n))
        links = LinkGraph(graph, nodes, duplex=draw(st.sampled_from(["full", "half"])))
    k = draw(st.integers(1, 24))
    src = draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k))
    if draw(st.booleans()):  # one size for all (a gossip round), any float
        size = draw(st.one_of(st.sampled_from([0.0, 1.0, 2.5]), st.floats(0.01, 20.0)))
        nbytes = [size] * k
    else:  # whole bytes
        nbytes = [float(b) for b in draw(st.lists(st.integers(0, 30), min_size=k, max_size=k))]
    start_s = None
    if draw(st.booleans()):
        offsets = st.sampled_from([0.0, 0.0, 0.05, 0.3, 1.0])
        start_s = draw(st.lists(offsets, min_size=k, max_size=k))
    present = draw(st.lists(st.booleans(), min_size=n, max_size=n).filter(any))
    outside = draw(st.none() | st.tuples(st.floats(0.0, 12.0), st.integers(-1, n - 1)))
    return {
        "up": up, "down": down, "latency_s": latency_s, "sharing": sharing, "links": links,
        "src": src, "dst": dst, "nbytes": nbytes, "start_s": start_s, "present": present,
        "outside": outside, "t0": draw(st.sampled_from([0.0, 0.1, 3.7])),
    }  # fmt: skip


class Recording(NetworkClock):
    """The general path, recording when each flow ended."""

    ends: dict[int, float]

    def run(self, plan: Any, idle_s: float = 0.0) -> Any:
        self.ends = {}
        yield from super().run(plan, idle_s)

    def _on_refused(self, i: int, state: Any, event: Any) -> None:
        self.ends[i] = float(self.env.now)
        super()._on_refused(i, state, event)

    def _ended(self, i: int, state: Any, ok: bool) -> None:
        self.ends[i] = float(self.env.now)
        super()._ended(i, state, ok)


def send_round(case: dict[str, Any], one_shot: bool) -> dict[str, Any]:
    """Send ``case``'s round from ``t0``; what the run looks like once it is over."""
    env = simpy.Environment()
    n = len(case["up"])
    net = FlowNetwork(
        env, np.array(case["up"]), np.array(case["down"]), case["latency_s"],
        case["sharing"], case["links"], solver="general",
    )  # fmt: skip
    delay_s = np.linspace(0.0, 0.2, n)  # stragglers, when the flows have no start_s
    clock_type = NetworkClock if one_shot else Recording
    clock = clock_type(env, net, np.array(case["present"]), delay_s)
    start = None if case["start_s"] is None else np.array(case["start_s"])
    flows = Flows(
        np.array(case["src"]), np.array(case["dst"]), np.array(case["nbytes"]), start_s=start
    )
    plan = RoundPlan(lambda *_: RoundStats(), lambda: flows)
    sender = round_solver.OneShotRounds(clock)
    out: dict[str, Any] = {}

    def body() -> Any:
        yield env.timeout(case["t0"])
        yield from (sender.transmit(plan) if one_shot else clock.transmit(plan))
        out["end_s"] = float(env.now)

    if case["outside"] is not None:
        at_s, peer = case["outside"]
        if peer >= 0:
            event = env.timeout(at_s)
            event.callbacks.append(lambda _: clock.preempt(np.array([peer])))
        else:
            env.timeout(at_s)  # another process's event, nothing more
    env.process(body())
    env.run()
    out.update(
        delivered=plan.delivered.tolist(),
        timed_out=plan.timed_out.tolist(),
        lost=clock.lost.tolist(),
        counts=(clock.messages, clock.failed_messages, net.flows_started,
                net.flows_completed, net.flows_failed),
        bytes_out=net.bytes_out.tolist(),
        bytes_in=net.bytes_in.tolist(),
        one_shot=sender.one_shot,
        ends=None if one_shot else clock.ends,
    )  # fmt: skip
    return out


def one_shot_ends(case: dict[str, Any]) -> Any:
    """The replay's own per-flow end times (None: it leaves the round to the general path)."""
    net = FlowNetwork(
        simpy.Environment(), np.array(case["up"]), np.array(case["down"]), case["latency_s"],
        case["sharing"], case["links"], solver="general",
    )  # fmt: skip
    n = len(case["up"])
    src = np.array(case["src"])
    start = np.linspace(0.0, 0.2, n)[src] if case["start_s"] is None else case["start_s"]
    table = RouteTable(net.routes)
    return round_timeline(
        table, case["sharing"], src, np.array(case["dst"]), np.array(case["nbytes"]),
        np.asarray(start, dtype=float), np.array(case["present"]), case["t0"],
        round_solver.BUDGET,
    )  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(rounds())
def test_a_one_shot_round_is_the_general_round(case: dict[str, Any]) -> None:
    general = send_round(case, one_shot=False)
    fast = send_round(case, one_shot=True)
    assert general["one_shot"] == 0
    event("one-shot" if fast["one_shot"] else "general path")
    assert fast["end_s"] == pytest.approx(general["end_s"], rel=1e-9, abs=1e-12)
    for key in ("delivered", "timed_out", "lost", "counts", "bytes_out", "bytes_in"):
        assert fast[key] == general[key], key
    quiet = case["outside"] is None or case["outside"][0] > general["end_s"]
    timeline = one_shot_ends(case) if quiet else None
    if timeline is not None:
        ends = [general["ends"][i] for i in range(len(case["src"]))]
        assert timeline.end_s.tolist() == pytest.approx(ends, rel=1e-9, abs=1e-12)
    if fast["one_shot"] and quiet:
        assert timeline is not None
        assert fast["end_s"] == timeline.last_s
    if case["outside"] is not None and case["t0"] < case["outside"][0] <= general["end_s"]:
        assert fast["one_shot"] == 0  # something happened inside the round: general path


def test_a_ring_round_is_one_shot_and_bit_identical() -> None:
    n = 64
    peers = np.arange(n)
    case = {
        "up": [12.5e6] * n, "down": [12.5e6] * n, "latency_s": [0.01] * n,
        "sharing": "maxmin", "links": None,
        "src": np.concatenate((peers, peers)).tolist(),
        "dst": np.concatenate(((peers + 1) % n, (peers - 1) % n)).tolist(),
        "nbytes": [256.0] * (2 * n), "start_s": [0.0] * (2 * n),
        "present": [True] * n, "outside": (50.0, 3), "t0": 1.3,
    }  # fmt: skip
    general = send_round(case, one_shot=False)
    fast = send_round(case, one_shot=True)
    assert fast["one_shot"] == 1
    assert fast == {**general, "one_shot": 1, "ends": None}
    assert general["end_s"] == 1.3 + 0.02 + 256.0 / (12.5e6 / 2)  # latency, then half the NIC


def test_a_round_over_the_budget_takes_the_general_path() -> None:
    # every flow at its own rate: more breakpoints than the budget
    n = 2 * round_solver.BUDGET
    case = {
        "up": (np.arange(n) + 1.0).tolist(), "down": [math.inf] * n, "latency_s": [0.01] * n,
        "sharing": "maxmin", "links": None, "src": list(range(n)),
        "dst": [(i + 1) % n for i in range(n)], "nbytes": [10.0] * n, "start_s": None,
        "present": [True] * n, "outside": None, "t0": 0.0,
    }  # fmt: skip
    assert one_shot_ends(case) is None
    general = send_round(case, one_shot=False)
    fast = send_round(case, one_shot=True)
    assert fast["one_shot"] == 0
    assert fast == {**general, "one_shot": 0, "ends": None}


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 8).flatmap(
        lambda n: st.tuples(
            st.lists(
                st.lists(st.integers(0, n - 1), min_size=1, max_size=3), min_size=1, max_size=12
            ),
            st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0, 1 / 3, 7.5]), min_size=n, max_size=n),
            st.lists(st.sampled_from([1.0, 0.5, 2.0, 1 / 7]), min_size=12, max_size=12),
        )
    )
)
def test_filling_gives_the_max_min_rates(args: Any) -> None:
    routes, capacity, weights = args
    routes = [sorted(set(r)) for r in routes]
    w = np.array(weights[: len(routes)])
    e_flow = np.array([f for f, r in enumerate(routes) for _ in r])
    e_res = np.array([s for r in routes for s in r])
    levels, _ = fill_levels(e_flow, e_res, w[e_flow], np.array(capacity), len(routes))
    expected = maxmin_rates(routes, capacity, w.tolist())
    assert (levels * w).tolist() == pytest.approx(expected.tolist(), rel=1e-12)
