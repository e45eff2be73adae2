"""moshpit on the network clock: butterfly timing, matchmaking, fault models, timeouts,
client mode and compression (invariants table of ``protocols/moshpit.py``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from protocols import _moshpit_net as net
from sim.engine.schedules import BarrierEngine, engine_for
from sim.kernels.compression import wire_bytes

UP = 12.5e6  # 100 Mbit/s
LAT = 0.005  # one-way per peer: a route takes 10 ms


def scenario(count=4, dim=4096, overrides=None, **protocol):
    data = {
        "name": "moshpit-net",
        "clock": "network",
        "peers": {"count": count, "upload": UP, "download": UP, "latency": LAT},
        "vector": {"dim": dim},
        "protocol": {"name": "moshpit", "group_size": count, "grid_dims": 1, **protocol},
        "stop": {"max_rounds": 1, "target_var": 0},
    }
    return sim.scenario_from_mapping(data, overrides or {})


def one_round(sc, preempt=(), seed=0):
    """Run round 0 by hand, preempting ``(time_s, peer)`` pairs; (run, plan, flows, x0,
    lost): the round's plan (``delivered``, ``timed_out``) and the flows it sent."""
    run = engine_for(sc, seed)
    assert isinstance(run, BarrierEngine)
    clock = run.network_clock()
    x0 = np.array(run.state.x, copy=True)
    plan = run.protocol.plan(clock.present.copy(), 0)
    flows = plan.flows()
    plan.flows = lambda: flows  # the clock sends exactly these

    def killer():
        for at, peer in sorted(preempt):
            yield run.env.timeout(max(at - run.env.now, 0.0))
            clock.preempt(np.array([peer]))

    run.env.process(killer())
    run.env.run(until=run.env.process(clock.transmit(plan)))
    lost = clock.lost.copy()
    plan.finish(run.state, lost)
    return run, plan, flows, x0, lost


# -- timing ------------------------------------------------------------------------------


@pytest.mark.parametrize("g", [2, 4, 8])
def test_butterfly_time_is_the_closed_form_per_phase(g):
    """Equal bandwidths and shares: each phase takes lat + S/g / (b/(g−1)), i.e. in all
    max_i S·(1 + (g−2)·w_i)/b_i plus one route latency per phase."""
    dim = 4096 * g
    result = sim.run(scenario(count=g, dim=dim))
    s_bytes = dim * 8
    w = 1 / g
    expected = s_bytes * (1 + (g - 2) * w) / UP + 2 * (2 * LAT)
    assert result.summary["sim_time_s"] == pytest.approx(expected, rel=1e-12)
    assert result.summary["bytes_sent"] == pytest.approx(2 * (g - 1) * s_bytes)
    x = result.state.x
    np.testing.assert_allclose(x, np.broadcast_to(x.mean(axis=0), x.shape), rtol=0, atol=1e-12)


def test_pieces_stream_and_give_the_same_vectors():
    whole = sim.run(scenario(count=4, dim=4096))
    pieces = sim.run(scenario(count=4, dim=4096, part_bytes=1000))
    np.testing.assert_array_equal(whole.state.x, pieces.state.x)
    # 1024 coordinates per part, 125 per piece: 9 pieces per part, 3 requests + 3 replies each
    assert pieces.summary["messages"] == 4 * 9 * 3 * 2
    assert pieces.summary["bytes_sent"] == pytest.approx(whole.summary["bytes_sent"])
    # only a stream's first piece pays the latency, and the all-gather of early pieces
    # overlaps the reduce-scatter of later ones: faster, but never below the bandwidth bound
    bound = 4096 * 8 * (1 + 2 / 4) / UP + 2 * LAT
    assert bound < pieces.summary["sim_time_s"] < whole.summary["sim_time_s"]


def test_load_balancing_reaches_the_lp_time_when_parts_stream():
    """6 fast members (4b) and 2 slow ones (b/2): the LP gives the slow ones no part and
    needs max_i S·(1 + (g−2)·w_i)/b_i = 2·S/b, against 3.5·S/b for the equal split. With
    parts streamed in small pieces the flows reach it (plus a latency per phase). The
    equal split reaches its bound exactly, plus one route latency: a slow member's
    uplink is busy from its first request's arrival to its last reply, and its replies
    to each sender follow each other on one stream (no latency of their own)."""
    classes = [
        {"name": "fast", "fraction": 0.75, "upload": 4 * UP, "download": 4 * UP},
        {"name": "slow", "fraction": 0.25, "upload": UP / 2, "download": UP / 2},
    ]
    dim = 65536
    s_bytes = dim * 8
    times = {}
    for balance in (True, False):
        sc = scenario(
            count=8, dim=dim, overrides={"peers.classes": classes}, load_balance=balance,
            part_bytes="1 KiB",
        )  # fmt: skip
        result = sim.run(sc)
        times[balance] = result.summary["sim_time_s"]
        x = result.state.x
        np.testing.assert_allclose(x, np.broadcast_to(x.mean(axis=0), x.shape), atol=1e-12)
    assert times[True] == pytest.approx(2 * s_bytes / UP + 2 * (2 * LAT), rel=0.02)
    assert times[False] == pytest.approx(3.5 * s_bytes / UP + 2 * LAT, rel=1e-9)


def test_network_clock_matches_the_rounds_clock_on_a_full_grid():
    """Same groups (same seeded shuffle), same kernel: bit-identical vectors each round."""
    overrides = {"peers.count": 64, "protocol.group_size": 8, "protocol.grid_dims": 2}
    for rounds in (1, 2):
        overrides["stop.max_rounds"] = rounds
        on_net = sim.run(scenario(overrides=overrides))
        on_rounds = sim.run(scenario(overrides={**overrides, "clock": "rounds"}))
        np.testing.assert_array_equal(on_net.state.x, on_rounds.state.x)
    assert on_net.summary["final_var"] < 1e-25  # exact after d = 2 rounds


# -- matchmaking ---------------------------------------------------------------------------


def test_matchmaking_closes_at_the_group_size_or_the_deadline():
    labels = np.array([0, 0, 0, 0, 0, 1, 1, -1])
    arrival = np.array([0.0, 1.0, 2.0, 3.0, 9.0, 0.0, 8.0, 0.0])
    rank = np.arange(8)
    matched = net.matchmake(labels, arrival, rank, size=3, min_size=2, wait_s=5.0)
    groups = [m.tolist() for m in matched.groups]
    # key 0: full at its 3rd arrival (t = 2); peer 3 opens a new batch whose deadline
    # (t = 8) passes before peer 4 arrives: a batch of one does not form, nor does peer 4's.
    # key 1: peer 6 arrives after peer 5's deadline (t = 5): neither forms.
    assert groups == [[0, 1, 2]]
    np.testing.assert_array_equal(matched.start_s, [2.0])
    assert matched.latest_s == pytest.approx(14.0)


def test_a_straggler_misses_its_group_and_keeps_its_vector():
    classes = [
        {"name": "on_time", "fraction": 0.875},
        {"name": "late", "fraction": 0.125, "delay": "10 s"},
    ]
    sc = scenario(count=8, overrides={"peers.classes": classes}, matchmaking_time="5 s")
    run, _, flows, x0, _ = one_round(sc)
    late = np.flatnonzero(run.peers["class"].to_numpy() == 1)
    assert late.size == 1
    x = run.state.x
    np.testing.assert_array_equal(x[late], x0[late])
    others = np.setdiff1d(np.arange(8), late)
    np.testing.assert_allclose(x[others], np.broadcast_to(x0[others].mean(axis=0), (7, 4096)))
    assert np.all(flows.start_s == pytest.approx(5.0))  # the group waited for its deadline
    assert late[0] not in flows.src
    assert late[0] not in flows.dst


# -- fault models ------------------------------------------------------------------------


def _mid_round(sc):
    """A time inside the reduce-scatter of an unloaded round of ``sc``."""
    return 2 * LAT + 0.5 * sc.vector.dim * 8 / UP / sc.protocol.group_size


def test_idealized_loss_survivors_average_among_themselves():
    sc = scenario(count=4, fault_model="idealized")
    run, _, _, x0, lost = one_round(sc, preempt=[(_mid_round(sc), 2)])
    assert lost.tolist() == [False, False, True, False]
    x = run.state.x
    np.testing.assert_array_equal(x[2], x0[2])
    rest = [0, 1, 3]
    np.testing.assert_allclose(x[rest], np.broadcast_to(x0[rest].mean(axis=0), (3, 4096)))
    np.testing.assert_allclose(x.sum(axis=0), x0.sum(axis=0), rtol=1e-12, atol=1e-12)


def test_abort_loss_keeps_every_vector():
    sc = scenario(count=4, fault_model="abort")
    run, _, _, x0, _ = one_round(sc, preempt=[(_mid_round(sc), 1)])
    np.testing.assert_array_equal(run.state.x, x0)


def test_partial_loss_of_a_reducer_leaves_its_part_local():
    sc = scenario(count=4, fault_model="partial")
    # peer 2 dies after the reduce-scatter, before it replies: its part stays local
    phase = 2 * LAT + 4096 * 8 * 3 / 4 / UP
    run, _, flows, x0, _ = one_round(sc, preempt=[(phase + LAT, 2)])
    members = run.protocol.keys  # unused: members come from the flows below
    del members
    x = run.state.x
    part = flows.src[flows.opens < 0]  # replies: src is the reducer
    assert 2 in part
    mean = x0[[0, 1, 2, 3]].mean(axis=0)
    changed = ~np.isclose(x[[0, 1, 3]], x0[[0, 1, 3]])
    averaged = np.isclose(x[[0, 1, 3]], mean)
    assert np.all(changed <= averaged)
    np.testing.assert_array_equal(x[2], x0[2])
    assert np.any(~changed)  # some coordinates (peer 2's part) kept their local values


@settings(max_examples=25)
@given(
    g=st.integers(2, 4),
    seed=st.integers(0, 2**16),
    fault=st.sampled_from(["idealized", "abort"]),
    kills=st.lists(st.tuples(st.floats(0.0, 0.02), st.integers(0, 3)), max_size=3),
)
def test_global_mean_is_preserved_under_idealized_and_abort(g, seed, fault, kills):
    sc = scenario(count=g, dim=64 * g, fault_model=fault, part_bytes=200)
    preempt = [(at, peer % g) for at, peer in kills]
    run, _, _, x0, _ = one_round(sc, preempt=preempt, seed=seed)
    np.testing.assert_allclose(run.state.x.sum(axis=0), x0.sum(axis=0), rtol=1e-12, atol=1e-9)


@settings(max_examples=25)
@given(
    g=st.integers(2, 4),
    seed=st.integers(0, 2**16),
    kills=st.lists(st.tuples(st.floats(0.0, 0.02), st.integers(0, 3)), max_size=3),
)
def test_partial_every_coordinate_is_a_contributors_mean_or_local(g, seed, kills):
    """Each coordinate of each survivor is its old value, or the mean of a subset of the
    group's old values that contains the coordinate's reducer."""
    sc = scenario(count=g, dim=16 * g, fault_model="partial", part_bytes=40)
    preempt = [(at, peer % g) for at, peer in kills]
    run, _, flows, x0, lost = one_round(sc, preempt=preempt, seed=seed)
    x = run.state.x
    np.testing.assert_array_equal(x[lost], x0[lost])
    reducer_of = np.empty(x.shape[1], dtype=int)  # peer reducing each coordinate
    replies = flows.opens < 0
    dim = x.shape[1]
    counts = np.full(g, dim // g)  # equal bandwidths: equal parts
    starts = np.concatenate([[0], np.cumsum(counts)])
    members = np.unique(flows.src[replies], return_index=True)
    assert members[0].size == g
    order = [int(p) for p in flows.src[replies][np.sort(members[1])]]
    for j, peer in enumerate(order):
        reducer_of[starts[j] : starts[j + 1]] = peer
    for c in range(dim):
        r = reducer_of[c]
        others = [p for p in range(g) if p != r]
        means = [
            x0[[r, *subset], c].mean()
            for k in range(len(others) + 1)
            for subset in itertools.combinations(others, k)
        ]
        for i in np.flatnonzero(~lost):
            assert x[i, c] == x0[i, c] or np.isclose(means, x[i, c], rtol=1e-12).any()


# -- timeouts, clients, compression -------------------------------------------------------


def test_a_slow_sender_is_dropped_after_the_sender_timeout():
    classes = [
        {"name": "fast", "fraction": 0.75},
        {"name": "slow", "fraction": 0.25, "upload": UP / 100},
    ]
    overrides = {"peers.classes": classes}
    sc = scenario(
        count=4, overrides=overrides, fault_model="idealized", sender_timeout="50 ms",
        load_balance=False,
    )  # fmt: skip
    run, plan, flows, x0, _ = one_round(sc)
    slow = int(np.flatnonzero(run.peers["class"].to_numpy() == 1)[0])
    assert plan.timed_out[(flows.src == slow) & (flows.opens >= 0)].all()
    x = run.state.x
    np.testing.assert_array_equal(x[slow], x0[slow])
    rest = np.setdiff1d(np.arange(4), [slow])
    np.testing.assert_allclose(x[rest], np.broadcast_to(x0[rest].mean(axis=0), (3, 4096)))
    # without the timeout the whole group waits for the slow sender and averages exactly
    waiting = sim.run(scenario(count=4, overrides=overrides, load_balance=False))
    assert waiting.summary["sim_time_s"] > 3 * run.env.now  # the timeouts cut the round short


def test_a_client_reduces_nothing_but_gets_the_mean():
    classes = [{"fraction": 0.75}, {"fraction": 0.25, "client": True}]
    sc = scenario(count=4, overrides={"peers.classes": classes})
    run, _, flows, x0, _ = one_round(sc)
    client = int(np.flatnonzero(run.peers["client"].to_numpy())[0])
    requests = flows.opens >= 0
    assert client not in flows.dst[requests]
    assert client in flows.src[requests]
    x = run.state.x
    np.testing.assert_allclose(x, np.broadcast_to(x0.mean(axis=0), x.shape), atol=1e-12)


@pytest.mark.parametrize("method", ["fp16", "uniform8", "quantile8"])
def test_compression_shrinks_bytes_and_its_error_is_measured(method):
    plain = sim.run(scenario(count=4, dim=8192))
    packed = sim.run(scenario(count=4, dim=8192, compression=method))
    # 4 parts of 2048 coordinates, 12 requests and 12 replies
    assert packed.summary["bytes_sent"] == 24 * wire_bytes(method, 2048, 8)
    assert packed.summary["sim_time_s"] < plain.summary["sim_time_s"]
    x, x_plain = packed.state.x, plain.state.x
    error = np.sqrt(np.mean((x - x_plain) ** 2))
    assert 0 < error < 0.05  # dequantized values, standard normal init
    assert packed.summary["final_mean_drift"] > plain.summary["final_mean_drift"]
    assert packed.summary["final_var"] < 1e-3


def test_rounds_clock_compression_matches_the_network_clock():
    overrides = {"peers.count": 16, "protocol.group_size": 4, "protocol.grid_dims": 2}
    sc = scenario(overrides=overrides, compression="uniform8", load_balance=False)
    on_net = sim.run(sc)
    on_rounds = sim.run(
        scenario(overrides={**overrides, "clock": "rounds"}, compression="uniform8")
    )
    np.testing.assert_array_equal(on_net.state.x, on_rounds.state.x)


# -- counters in the summary ----------------------------------------------------------------


def test_summary_counts_groups_failures_and_timeouts():
    classes = [
        {"name": "fast", "fraction": 0.75},
        {"name": "slow", "fraction": 0.25, "upload": UP / 100},
    ]
    timed = sim.run(
        scenario(count=4, overrides={"peers.classes": classes}, sender_timeout="50 ms")
    ).summary
    assert timed["groups_formed"] == 1
    assert timed["members_failed"] == 1
    assert timed["flows_timed_out"] > 0
    abort = scenario(
        count=4, overrides={"peers.classes": classes}, sender_timeout="50 ms", fault_model="abort"
    )
    aborted = sim.run(abort).summary
    assert (aborted["groups_formed"], aborted["groups_aborted"]) == (0, 1)
    late = [{"fraction": 0.875}, {"fraction": 0.125, "delay": "10 s"}]
    straggled = sim.run(scenario(count=8, overrides={"peers.classes": late})).summary
    assert (straggled["groups_formed"], straggled["groups_failed"]) == (1, 1)


def test_rounds_clock_counts_groups_too():
    summary = sim.run(
        scenario(overrides={"clock": "rounds", "peers.count": 64, "protocol.group_size": 8,
                            "protocol.grid_dims": 2, "stop.max_rounds": 2})
    ).summary  # fmt: skip
    assert summary["groups_formed"] == 16
    assert summary["flows_timed_out"] == 0
