"""The closed-form fast path of the edge-clock exchanges (protocols/_solo_exchanges/)
against the general flow path: random workloads run both ways give the same exchanges
at the same times, the same vectors, rows, summaries and traffic, bit for bit; and the
pieces it rests on (exact landing on a time, the closed form of a flow alone, the ring
times of ring_loop, what counts as an interfering event) hold on their own."""

from __future__ import annotations

import json
import math
from typing import Any

import array_api_strict as xps
import numpy as np
import pandas as pd
import pytest
import simpy
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st

import protocols._solo_exchanges as solo
import sim
from protocols._async_net import WINDOW, pairwise_batch, pairwise_rules, ring_loop
from protocols._edge_clocks import PoissonClocks
from protocols.a2cid2 import A2cid2
from protocols.contract import Context, State
from sim.network import FlowNetwork

BANDWIDTHS = ["100 Mbit/s", "1 Mbit/s", "20 kbit/s", "inf"]
LATENCIES = ["10 ms", "0 s", "1 ms", "150 ms"]


@st.composite
def workloads(draw: st.DrawFn) -> dict:
    """A small continuous-time scenario: sizes, bandwidth classes, latencies, churn of
    every kind with every rejoin, compression, sharing and concurrency, exact targets
    (a stop target on ``var`` or ``var_alive``, ``metrics.targets``) or none."""
    n = draw(st.integers(2, 20))
    name = draw(st.sampled_from(["pairwise_gossip", "a2cid2"]))
    protocol = {
        "name": name,
        "topology": draw(st.sampled_from(["ring", "complete"])),
        "rate": draw(st.sampled_from([1.0, 4.0, 20.0])),
        "max_concurrent": draw(st.sampled_from([1, 1, 1, 2])),
        "compression": draw(st.sampled_from(["none", "none", "fp16", "uniform8"])),
    }
    if name == "a2cid2":
        protocol["eta"] = draw(st.sampled_from([0.0, 0.1, 2.0]))
        protocol["alpha_tilde"] = draw(st.sampled_from([0.5, 3.0]))
    peers: dict = {
        "count": n,
        "upload": draw(st.sampled_from(BANDWIDTHS)),
        "download": draw(st.sampled_from(BANDWIDTHS)),
        "latency": draw(st.sampled_from(LATENCIES)),
    }
    if draw(st.booleans()):
        peers["classes"] = [
            {"fraction": 0.5, "upload": draw(st.sampled_from(BANDWIDTHS))},
            {"fraction": 0.5, "latency": draw(st.sampled_from(LATENCIES))},
        ]
    model = draw(st.sampled_from(["none", "exponential", "bernoulli", "waves"]))
    churn: dict = {"model": model}
    if model == "exponential":
        churn.update(mtbf=draw(st.sampled_from([0.5, 4.0])), mttr=draw(st.sampled_from([0.1, 1.0])))
    elif model == "bernoulli":
        churn.update(p=0.2, period=draw(st.sampled_from([0.3, 1.0])))
    elif model == "waves":
        churn.update(rate=1.0, fraction=0.3, duration=draw(st.sampled_from([0.2, 1.5])))
    if model != "none":
        churn["rejoin"] = draw(st.sampled_from(["keep", "reset", "fetch"]))
    sharing = draw(st.sampled_from(["maxmin", "rtt_weighted"]))
    if sharing == "rtt_weighted":  # it needs positive route latencies
        peers["latency"] = "10 ms"
        peers.get("classes", [{}, {}])[1].pop("latency", None)
    return {
        "name": "solo",
        "clock": "network",
        "peers": peers,
        "vector": {
            "dim": draw(st.sampled_from([1, 16])),
            "dtype": draw(st.sampled_from(["float64", "float32"])),
        },
        "protocol": protocol,
        "churn": churn,
        "network": {"sharing": sharing},
        "stop": {
            "max_time": draw(st.sampled_from([2.0, 6.0])),
            "max_rounds": None,
            "target_var": draw(st.sampled_from([0, 0, 1e-2, 1e-4])),
            "target_on": draw(st.sampled_from(["var", "var_alive"])),
        },
        "metrics": {
            "every": draw(st.sampled_from([0.5, 1.0, 4.0])),
            "targets": draw(st.sampled_from([[], [], [1e-1, 1e-3]])),
        },
    }


def run_both(data: dict, seed: int, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple, tuple, int]:
    """(result, exchanges) with the general path, then with the fast path; and how many
    exchanges the fast path applied in segments."""
    scenario = sim.scenario_from_mapping(data)
    out = []
    applied = 0
    commit = solo.SoloExchanges.commit

    def counting(self, segment):
        nonlocal applied
        applied += int(np.count_nonzero(np.array(segment.ends) < segment.end))
        yield from commit(self, segment)

    monkeypatch.setattr(solo.SoloExchanges, "commit", counting)
    for enabled in (False, True):
        log: list = []
        monkeypatch.setattr(solo.settings, "ENABLED", enabled)
        monkeypatch.setattr(solo.settings, "EXCHANGES", log)
        out.append((sim.run(scenario, seed=seed), sorted(log)))
    return out[0], out[1], applied


def assert_same(general: tuple, fast: tuple) -> None:
    (a, log_a), (b, log_b) = general, fast
    same_runs(a, log_a, b, log_b)
    for name, table in a.extra_tables.items():
        pd.testing.assert_frame_equal(table, b.extra_tables[name])


def same_runs(a: Any, log_a: list, b: Any, log_b: list) -> None:
    """The same exchanges (started and completed at the same times), final vectors and
    state, metrics and summary (but the wall time)."""
    assert log_a == log_b
    np.testing.assert_array_equal(np.asarray(a.state.x), np.asarray(b.state.x))
    for key, array in a.state.extra.items():
        np.testing.assert_array_equal(np.asarray(array), np.asarray(b.state.extra[key]))
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    left, right = (
        json.dumps({k: v for k, v in r.summary.items() if "wall" not in k}, default=str)
        for r in (a, b)
    )
    assert left == right


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=workloads(), seed=st.integers(0, 2**16))
def test_fast_path_gives_the_general_paths_run(data, seed, monkeypatch):
    general, fast, applied = run_both(data, seed, monkeypatch)
    event(f"fast path applied exchanges: {applied > 0}")
    assert_same(general, fast)


@pytest.mark.parametrize("name", ["pairwise_gossip", "a2cid2"])
@pytest.mark.parametrize(
    "knob",
    [
        {},
        {"SEGMENT_RINGS": 5},  # segments cut short: straddlers and adopted exchanges
        {"SEGMENT_RINGS": 5, "SEGMENT_PEERS": 8},  # 3 × longer with 24 peers
        {"refuse": True},  # every segment refused: one ring at a time throughout
        {"RETRY_RINGS": 0, "NEAR_FACTOR": 1e9},  # refusals retried at every ring
    ],
)
def test_segment_limits_and_refusals_change_nothing(name, knob, monkeypatch):
    data = {
        "name": "solo",
        "clock": "network",
        "peers": {"count": 24, "upload": "10 Mbit/s", "download": "100 Mbit/s", "latency": "5 ms"},
        "vector": {"dim": 8},
        "protocol": {"name": name, "topology": "ring", "rate": 3.0},
        "churn": {"model": "exponential", "mtbf": 3.0, "mttr": 0.5, "rejoin": "fetch"},
        "stop": {"max_time": 8.0, "max_rounds": None, "target_var": 0},
        "metrics": {"every": 1.0},
    }
    for key, value in knob.items():
        if key == "refuse":
            monkeypatch.setattr(solo.SoloExchanges, "_safe", lambda *args: False)
        else:
            monkeypatch.setattr(solo.settings, key, value)
    general, fast, applied = run_both(data, 3, monkeypatch)
    assert_same(general, fast)
    if "refuse" in knob:
        assert applied == 0
    else:
        assert applied > 0


def test_exchanges_that_share_a_link_with_a_download_stay_general(monkeypatch):
    """Rejoins fetch their vector over the network while exchanges are in flight: an
    exchange sent while a download may share its links is never timed in closed form
    (found by comparing the paths on random workloads)."""
    data = {
        "name": "solo",
        "clock": "network",
        "peers": {"count": 8, "upload": "1 Mbit/s", "download": "1 Mbit/s", "latency": "1 ms"},
        "vector": {"dim": 500},
        "protocol": {"name": "pairwise_gossip", "topology": "complete", "rate": 10.0},
        "churn": {
            "model": "waves",
            "rate": 1.0,
            "fraction": 0.3,
            "duration": 0.2,
            "rejoin": "fetch",
        },
        "stop": {"max_time": 4.0, "max_rounds": None, "target_var": 0},
        "metrics": {"every": 1.0},
    }
    general, fast, applied = run_both(data, 0, monkeypatch)
    assert_same(general, fast)
    assert applied > 0


def test_closed_form_needs_the_rate_set_before_half_the_finish():
    """Another flow's completion at W < F/2 re-schedules the network's wake-up for a
    flow of finish F at W + (F − W), which need not be F: the fast path refuses a
    segment with such a flow (F > 2·t1)."""
    t1, rate, nbytes, w = 0.02, 3000.0, 1239.0, 0.11514568893924346
    env = simpy.Environment()
    net = FlowNetwork(env, [rate, rate, nbytes / w, nbytes / w], [1e12] * 4, [0.0] * 4)
    flows = []

    def start():
        flows.append(net.send(2, 3, nbytes))  # completes at w
        yield env.timeout(t1)
        flows.append(net.send(0, 1, nbytes))

    env.process(start())
    env.run()
    finish = t1 + nbytes / rate
    assert flows[0].end_s == w < finish / 2
    assert flows[1].end_s != finish  # the closed form is not the network's time here
    process = object.__new__(solo.SoloExchanges)
    process.times = solo.EdgeTimes([t1], [nbytes / rate], [t1], [nbytes / rate])
    segment = solo.Segment()
    segment.starts, segment.edges = [0.0], [0]
    assert finish > 2 * t1
    assert not process._safe(segment, [])
    segment.starts = [finish]  # the same transfer started later is safe
    assert process._safe(segment, [])


def test_most_exchanges_of_a_quiet_run_are_timed_in_closed_form(monkeypatch):
    data = {
        "name": "solo",
        "clock": "network",
        "peers": {"count": 128, "latency": "10 ms"},
        "vector": {"dim": 16},
        "protocol": {"name": "pairwise_gossip", "topology": "ring"},
        "stop": {"max_time": 20.0, "max_rounds": None, "target_var": 0},
        "metrics": {"every": 5.0},
    }
    general, fast, applied = run_both(data, 0, monkeypatch)
    assert_same(general, fast)
    assert applied > 0.95 * len(fast[1])


@pytest.mark.parametrize(
    "changes",
    [
        {"protocol.max_concurrent": 2},
        # exact targets on decaying rows of events that do not keep the sum (a lossy
        # wire): the tracker takes no batches
        {"protocol.name": "a2cid2", "stop.target_var": 1e-3, "protocol.compression": "fp16"},
    ],
)
def test_runs_the_fast_path_cannot_time_take_the_general_path(changes, monkeypatch):
    data = {
        "name": "solo",
        "clock": "network",
        "peers": {"count": 16},
        "vector": {"dim": 4},
        "protocol": {"name": "pairwise_gossip", "topology": "ring"},
        "stop": {"max_time": 3.0, "max_rounds": None, "target_var": 0},
    }
    built = []
    build = solo.SoloExchanges.build

    def spy(cls, *args):
        built.append(build(*args))
        return built[-1]

    monkeypatch.setattr(solo.SoloExchanges, "build", classmethod(spy))
    sim.run(sim.scenario_from_mapping(data), seed=0)
    assert built
    assert built[-1] is not None
    sim.run(sim.scenario_from_mapping(data, changes), seed=0)
    assert built[-1] is None


def watched_run(name: str = "pairwise_gossip", **changes) -> dict:
    """A quiet network run with exact targets that crosses them mid-segment."""
    data = {
        "name": "solo",
        "clock": "network",
        "peers": {"count": 24, "upload": "10 Mbit/s", "download": "100 Mbit/s", "latency": "5 ms"},
        "vector": {"dim": 8},
        "protocol": {"name": name, "topology": "complete", "rate": 1.0},
        "stop": {"max_time": 30.0, "max_rounds": None, "target_var": 1e-6},
        "metrics": {"every": 4.0, "targets": [1e-1, 1e-2, 1e-3, 1e-4]},
    }
    for key, value in changes.items():
        section, field = key.split("__")
        data.setdefault(section, {})[field] = value
    return data


def count_cuts(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Count the segments shown to a watcher and those it cut short."""
    seen = {"settled": 0, "cut": 0}
    settle = solo.SoloExchanges.settle

    def counting(self, segment, edge):
        out = settle(self, segment, edge)
        seen["settled"] += 1
        seen["cut"] += out is not segment
        return out

    monkeypatch.setattr(solo.SoloExchanges, "settle", counting)
    return seen


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"stop__target_on": "var_alive"},
        # events do not keep the sum (a coarser target: the wire's error floors var)
        {"protocol__compression": "uniform8", "stop__target_var": 1e-3},
        {"vector__dtype": "float32"},
        {
            "churn__model": "exponential",
            "churn__mtbf": 6.0,
            "churn__mttr": 0.5,
            "churn__rejoin": "keep",
            "stop__target_on": "var_alive",
        },
    ],
)
def test_exact_targets_are_timed_with_segments(changes, monkeypatch):
    """With the tracker watching, segments are applied and shown to it; it stops taking
    them at each crossing and resync, the rest goes out as flows: the crossings, the
    stop instant and everything else are the general path's, bit for bit."""
    data = watched_run(**changes)
    seen = count_cuts(monkeypatch)
    general, fast, applied = run_both(data, 1, monkeypatch)
    assert_same(general, fast)
    summary = fast[0].summary
    assert summary["stop_reason"] == "target"
    assert summary["time_to_target_s"] < 30.0
    assert summary["time_to_1e-02_s"] is not None
    assert applied > len(fast[1]) / 2  # most exchanges timed in closed form
    assert seen["cut"] >= 5  # four metrics.targets, the stop target, resyncs


def test_batched_events_give_the_trackers_sums_of_one_at_a_time(monkeypatch):
    """The tracker's variance after every exchange (its trace) is the same, bit for bit,
    whether the exchanges came one at a time or in segments; with resyncs every few
    events (the rule moved down to 1 event per peer) and the variance's fall rule."""
    import sim.engine.observe.segments as segments
    import sim.engine.observe.tracker as tracker_module
    from sim.engine.observe.tracker import Tracker

    for module in (segments, tracker_module):
        monkeypatch.setattr(module, "EVENTS_PER_PEER", 1)
    traces: list = []
    resync = Tracker.resync

    def tracing(self, time_s=None):
        if self.trace is None:
            self.trace = []
            traces.append(self.trace)
        resync(self, time_s)

    monkeypatch.setattr(Tracker, "resync", tracing)
    data = watched_run(protocol__compression="fp16", stop__target_on="var_alive")
    seen = count_cuts(monkeypatch)
    general, fast, applied = run_both(data, 2, monkeypatch)
    assert_same(general, fast)
    assert len(traces) == 2
    assert traces[0] == traces[1]
    assert len(traces[0]) == 2 * len(fast[1])  # var and var_alive after every exchange
    assert applied > 0
    assert seen["settled"] > 10


def test_a_crossing_at_a_segments_first_exchange_goes_one_ring_at_a_time(monkeypatch):
    """A watcher that takes nothing: every segment is undone and planned again up to its
    first exchange (none when that one completes at once), and the run is the general
    path's."""
    from sim.engine.observe.tracker import Tracker

    monkeypatch.setattr(Tracker, "take", lambda self, rows, *rest: 0)
    data = watched_run(stop__max_time=6.0, peers__latency="0 s")
    seen = count_cuts(monkeypatch)
    general, fast, applied = run_both(data, 0, monkeypatch)
    assert_same(general, fast)
    assert applied == 0
    assert seen["settled"] > 0
    assert seen["cut"] == seen["settled"]


def test_a_shared_link_on_a_route_takes_the_general_path():
    env = simpy.Environment()
    edges = np.array([[0, 1]])
    net = FlowNetwork(env, [1e6] * 2, [1e6] * 2, [0.01] * 2)
    assert solo.EdgeTimes.of(net, edges, 100.0) is not None
    import networkx as nx

    from sim.network.routes import LinkGraph

    graph = nx.Graph()
    graph.add_edge("a", "b", capacity=5e5, latency=0.002)
    linked = FlowNetwork(env, [1e6] * 2, [1e6] * 2, [0.01] * 2, links=LinkGraph(graph, ["a", "b"]))
    assert solo.EdgeTimes.of(linked, edges, 100.0) is None
    graph["a"]["b"]["capacity"] = math.inf  # a link that only adds latency
    free = FlowNetwork(env, [1e6] * 2, [1e6] * 2, [0.01] * 2, links=LinkGraph(graph, ["a", "b"]))
    times = solo.EdgeTimes.of(free, edges, 100.0)
    assert times is not None
    assert times.lat_ij == [0.022]


@given(now=st.floats(0, 1e7, allow_nan=False), at=st.floats(0, 2e7, allow_nan=False))
@example(now=0.3253071657902543, at=1.6776900092609839)  # no one delay lands on it
def test_hops_land_exactly_on_the_time(now, at):
    assume(at >= now)
    delays = solo.hops(now, at)
    assert 1 <= len(delays) <= 2
    for delay in delays:
        assert delay >= 0.0
        now += delay  # as SimPy moves its clock
    assert now == at


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    n_pairs=st.integers(1, 6),
    sharing=st.sampled_from(["maxmin", "rtt_weighted"]),
)
def test_closed_form_is_the_networks_completion_of_a_flow_alone(data, n_pairs, sharing):
    """Flows alone on their resources (disjoint pairs of peers), started at random times
    amid each other's wake-ups: each completes exactly at start + latency + bytes/rate
    whenever F ≤ 2·t1 (the check the fast path makes)."""
    n = 2 * n_pairs
    capacity = st.sampled_from([1e3, 1.25e5, 1.25e7, 3.3e6, math.inf])
    up = [data.draw(capacity) for _ in range(n)]
    down = [data.draw(capacity) for _ in range(n)]
    low = 1e-3 if sharing == "rtt_weighted" else 0.0
    latency = [data.draw(st.floats(low, 0.2)) for _ in range(n)]
    edges = np.array([[2 * k, 2 * k + 1] for k in range(n_pairs)])
    nbytes = float(data.draw(st.sampled_from([0.0, 1.0, 512.0, 65536.0])))
    starts = [data.draw(st.floats(0.0, 20.0)) for _ in range(n_pairs)]
    env = simpy.Environment()
    net = FlowNetwork(env, up, down, latency, sharing=sharing)
    times = solo.EdgeTimes.of(net, edges, nbytes)
    assert times is not None
    flows: list = []

    def start(k: int):
        yield env.timeout(starts[k])
        flows.append(
            (k, env.now, net.send(2 * k, 2 * k + 1, nbytes), net.send(2 * k + 1, 2 * k, nbytes))
        )

    for k in range(n_pairs):
        env.process(start(k))
    env.run()
    for k, t0, forward, backward in flows:
        for flow, lat, d in (
            (forward, times.lat_ij[k], times.d_ij[k]),
            (backward, times.lat_ji[k], times.d_ji[k]),
        ):
            t1 = t0 + lat
            finish = t1 + d
            if finish <= 2 * t1:
                assert flow.end_s == finish
            else:
                event("transfer longer than its start time: left to the network")


@given(rates=st.lists(st.floats(0.1, 30.0), min_size=1, max_size=6), seed=st.integers(0, 1000))
def test_ring_stream_walks_ring_loops_times(rates, seed):
    """The yield points of RingStream, moved along as the planner moves (now + max(at −
    now, 0)), are exactly the times ring_loop's rings run at in SimPy."""
    clocks = PoissonClocks(np.array(rates))
    env = simpy.Environment()
    seen: list[tuple[float, int]] = []
    loop = ring_loop(
        env, clocks, np.random.default_rng(seed), list, lambda e: seen.append((env.now, int(e)))
    )
    env.process(loop)
    env.run(until=5.0)
    stream = solo.RingStream(clocks, np.random.default_rng(seed), 0.0, WINDOW)
    now, walked = 0.0, list[tuple[float, int]]()
    while len(walked) < len(seen):
        now = now + max(stream.at() - now, 0.0)
        edge = stream.step()
        if edge is not None:
            walked.append((now, edge))
    assert walked == seen


def test_only_the_processes_own_network_events_are_harmless():
    env = simpy.Environment()
    net = FlowNetwork(env, [1e6] * 4, [1e6] * 4, [0.01] * 4)
    live: dict = {}
    exchange = solo.Exchange(0, 1, None, lambda *a: None, [0] * 4, {})
    exchange.live = live
    flow = net.send(0, 1, 1000.0)  # the network's latency timeout, due at 0.02
    flow.done.callbacks.append(exchange.on_end)
    env.timeout(0.5)  # nobody waits on it: harmless
    sample = env.timeout(0.7)
    sample.callbacks.append(lambda _e: None)  # someone else's: interfering

    def harmless(callback):
        owner = getattr(callback, "__self__", None)
        return owner is net or (isinstance(owner, solo.Exchange) and owner.live is live)

    assert solo.next_interfering(env, harmless) == 0.7
    env.run(until=0.021)  # the flow entered its bandwidth phase: a wake-up is queued
    assert solo.next_interfering(env, harmless) == 0.7


@pytest.mark.parametrize("wire", ["none", "uniform8"])
def test_batch_of_exchanges_is_the_rules_one_by_one_on_any_backend(wire):
    """pairwise_batch on array_api_strict arrays (the path CuPy takes) gives the rows the
    (snapshot, apply) rules give one exchange at a time."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 40))
    pairs = np.array([[0, 1], [2, 3], [1, 2], [4, 5], [0, 5]])
    one = State(x=xps.asarray(x))
    snapshot, apply = pairwise_rules(one, wire)
    for i, j in pairs.tolist():
        apply(i, j, snapshot(i, j))
    batched = State(x=xps.asarray(x))
    a, b = pairs[:, 0], pairs[:, 1]
    waves = [np.array([0, 1]), np.array([2, 3]), np.array([4])]
    pairwise_batch(batched, wire)(a, b, np.zeros(5), np.ones(5), waves)
    np.testing.assert_array_equal(np.asarray(batched.x), np.asarray(one.x))


@pytest.mark.parametrize("strict", [False, True])
def test_forward_pairs_is_forward_of_each_pair(strict):
    """A²CiD²'s batched mixing of disjoint pairs (the fast path's, and CuPy's through
    the array API) moves each row as :meth:`A2cid2.forward` of its pair does, a pair with
    both coefficients 0 left alone."""
    params = A2cid2.Params(topology="ring", eta=0.7, alpha_tilde=1.0)
    protocol = A2cid2(params, Context(8, 5, 8, np.random.default_rng(0)))
    rng = np.random.default_rng(2)
    x, tilde = rng.normal(size=(8, 5)), rng.normal(size=(8, 5))
    last = np.array([0.0, 0.5, 1.0, 1.0, 0.2, 2.0, 0.0, 3.0])
    i, j = np.array([0, 2, 4, 7]), np.array([1, 3, 5, 6])
    now = np.array([1.0, 1.0, 3.0, 3.0])  # pair (2, 3) is already there: c = 0, 0
    wrap = xps.asarray if strict else np.copy
    one = State(x=wrap(x), extra={"x_tilde": wrap(tilde)})
    protocol.last = last.copy()
    for a, b, t in zip(i.tolist(), j.tolist(), now.tolist(), strict=True):
        protocol.forward(one, np.array([a, b]), t)
    last_one = protocol.last.copy()
    both = State(x=wrap(x), extra={"x_tilde": wrap(tilde)})
    protocol.last = last.copy()
    protocol.forward_pairs(both, np.concatenate((i, j)), np.concatenate((now, now)))
    np.testing.assert_array_equal(protocol.last, last_one)
    np.testing.assert_array_equal(np.asarray(both.x), np.asarray(one.x))
    np.testing.assert_array_equal(
        np.asarray(both.extra["x_tilde"]), np.asarray(one.extra["x_tilde"])
    )
