"""``trace=``: a run's timeline as Chrome trace events (``sim/engine/trace.py``).

The Trace Event Format's required fields (``name``, ``ph``, ``pid``, ``tid``, ``ts``;
``dur`` on complete events; ``M`` metadata naming the tracks), slices that nest on every
track (Perfetto draws nothing else), one track per followed peer, flow bytes that add up
to the traffic, churn slices that are the churn schedule, the cap, and a run that is the
same with and without the trace.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sim
from sim.core.errors import ScenarioError
from sim.engine.trace import MAX_EVENTS, TraceOptions, Tracer, parse_peers

SEED = 3


def moshpit(**changes):
    """16 peers, Moshpit on the network clock, exponential churn; cut mid-flow at 12 s."""
    scenario = {
        "name": "traced", "seed": SEED, "clock": "network",
        "peers": {"count": 16, "upload": "100 Mbit/s", "download": "100 Mbit/s",
                  "latency": "10 ms"},
        "churn": {"model": "exponential", "mtbf": "20 s", "mttr": "5 s", "rejoin": "fetch"},
        "vector": {"dim": 65536},
        "protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 2},
        "stop": {"max_time": "12.003 s", "max_rounds": None, "target_var": None},
    }  # fmt: skip
    scenario.update(changes)
    return scenario


def gossip(**changes):
    """Continuous-time pairwise gossip (flows sent by the protocol's own process)."""
    return moshpit(protocol={"name": "pairwise_gossip"}, **changes)


def traced(scenario, **options):
    return sim.run(scenario, trace=TraceOptions(**options))


def slices(events, cat=None):
    return [e for e in events if e["ph"] == "X" and (cat is None or e.get("cat") == cat)]


def peer_of(tracer_events, n_peers):
    """tid → peer: row 0 is the peer itself, extra rows add a multiple of a power of ten."""
    stride = 10 ** len(str(max(n_peers - 1, 1)))
    return {e["tid"]: e["tid"] % stride for e in tracer_events}


@pytest.fixture(scope="module")
def barrier_run():
    return traced(moshpit())


@pytest.fixture(scope="module")
def gossip_run():
    return traced(gossip())


@pytest.mark.parametrize("run", ["barrier_run", "gossip_run"])
def test_trace_events_have_the_required_fields(run, request):
    events = request.getfixturevalue(run).trace
    assert events
    assert all(isinstance(e, dict) for e in events)
    for event in events:
        assert {"name", "ph", "pid", "tid", "ts"} <= event.keys(), event
        assert isinstance(event["name"], str)
        assert event["name"]
        assert event["ph"] in ("X", "i", "M"), event
        assert event["pid"] == SEED
        assert isinstance(event["tid"], int)
        assert isinstance(event["ts"], int)  # whole µs: ts + dur is exact
        assert math.isfinite(event["ts"])
        if event["ph"] == "X":
            assert isinstance(event["dur"], int), event
            assert event["dur"] >= 0, event
        if event["ph"] == "i":
            assert event["s"] in ("t", "p", "g")
        if event["ph"] == "M":
            assert event["name"] in (
                "process_name", "process_sort_index", "thread_name", "thread_sort_index",
            )  # fmt: skip
            assert "name" in event["args"] or "sort_index" in event["args"]
    names = {(e["tid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    assert {(p, f"peer {p}") for p in range(16)} <= names
    assert {"name": "process_name", "ph": "M", "pid": SEED, "tid": 0, "ts": 0,
            "args": {"name": f"seed {SEED}"}} in events  # fmt: skip
    json.loads(json.dumps(events, allow_nan=False))  # plain, finite JSON values


@pytest.mark.parametrize("run", ["barrier_run", "gossip_run"])
def test_trace_has_one_track_per_followed_peer(run, request):
    events = request.getfixturevalue(run).trace
    names = [e["args"]["name"] for e in events if e["name"] == "thread_name"]
    main = [name for name in names if "·" not in name]
    assert sorted(main) == sorted(f"peer {p}" for p in range(16))  # once each
    tids = [e["tid"] for e in events if e["name"] == "thread_name"]
    assert len(tids) == len(set(tids))
    named = set(tids)
    assert {e["tid"] for e in events if e["ph"] != "M"} <= named  # every event on a named track
    owner = peer_of([e for e in events if e["name"] == "thread_name"], 16)
    for event in events:
        if event["name"] == "thread_name" and "·" in event["args"]["name"]:
            assert event["args"]["name"].startswith(f"peer {owner[event['tid']]} ·")


@pytest.mark.parametrize("run", ["barrier_run", "gossip_run"])
def test_slices_nest_on_every_track(run, request):
    """Perfetto draws only complete events that nest on their thread."""
    by_track = defaultdict(list)
    for event in slices(request.getfixturevalue(run).trace):
        by_track[event["pid"], event["tid"]].append((event["ts"], event["ts"] + event["dur"]))
    if run == "barrier_run":
        assert len(by_track) > 16  # a group's flows overlap: extra rows
    for spans in by_track.values():
        open_ends: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1], (start, end, open_ends)
            open_ends.append(end)


@pytest.mark.parametrize("run", ["barrier_run", "gossip_run"])
def test_flow_slices_add_up_to_the_bytes_each_peer_sent(run, request):
    result = request.getfixturevalue(run)
    flows = slices(result.trace, "flow")
    owner = peer_of(flows, 16)
    sent = np.zeros(16)
    for flow in flows:
        assert flow["name"].startswith("flow → ")
        assert isinstance(flow["args"]["ok"], bool)
        sent[owner[flow["tid"]]] += flow["args"]["bytes"]
    traffic = result.extra_tables["traffic"]
    np.testing.assert_allclose(sent, traffic["bytes_out"].to_numpy(), rtol=1e-12)
    assert sent.sum() == pytest.approx(result.summary["bytes_sent"], rel=1e-12)


def pair(**stop):
    """Two peers at 8 Mbit/s, 10 ms; one group: 8 flows of 524288 or 475712 bytes."""
    return moshpit(
        peers={"count": 2, "upload": "8 Mbit/s", "download": "8 Mbit/s", "latency": "10 ms"},
        churn={"model": "none"}, vector={"dim": 250_000},
        protocol={"name": "moshpit", "group_size": 2, "grid_dims": 1},
        stop={"max_rounds": None, "max_time": None, "target_var": None, **stop},
    )  # fmt: skip


def test_a_flow_slice_lasts_from_its_send_to_its_end():
    result = traced(pair(max_rounds=1))
    flows = slices(result.trace, "flow")
    assert len(flows) == result.summary["messages"] == 8
    first = [f for f in flows if f["ts"] == 0 and f["tid"] == 0]
    assert first == [{"name": "flow → 1", "ph": "X", "cat": "flow", "pid": SEED, "tid": 0,
                      "ts": 0.0, "dur": pytest.approx((0.02 + 524288 * 8 / 8e6) * 1e6),
                      "args": {"bytes": 524288.0, "ok": True}}]  # fmt: skip
    assert sum(f["args"]["bytes"] for f in flows) == result.summary["bytes_sent"] == 4e6


def test_flows_in_flight_when_the_run_ends_count_the_bytes_they_moved():
    result = traced(pair(max_time="1 s"))
    flows = slices(result.trace, "flow")
    cut = [f for f in flows if f["args"].get("in_flight")]
    assert len(cut) == 4
    assert all(not f["args"]["ok"] for f in cut)
    assert all(f["ts"] + f["dur"] == pytest.approx(1e6) for f in cut)
    assert all(0 < f["args"]["bytes"] < 524288 for f in cut)
    sent = [sum(f["args"]["bytes"] for f in flows if f["tid"] == p) for p in (0, 1)]
    np.testing.assert_allclose(sent, result.extra_tables["traffic"]["bytes_out"], rtol=1e-12)


def test_churn_slices_are_the_churn_schedule(tmp_path: Path):
    rows = [(1, 0.5, 2.25), (1, 4.0, 5.5), (3, 1.0, math.inf), (6, 0.0, 3.0)]
    path = tmp_path / "churn.csv"
    path.write_text("peer,down_s,up_s\n" + "".join(f"{p},{d},{u}\n" for p, d, u in rows))
    scenario = moshpit(churn={"model": "trace", "file": str(path), "rejoin": "keep"})
    result = traced(scenario, peers=frozenset({1, 3, 5}))
    absent = sorted((e["tid"] % 100, e["ts"], e["dur"], e.get("args")) for e in slices(
        result.trace, "churn"))  # fmt: skip
    end_us = result.summary["sim_time_s"] * 1e6
    assert [a[0] for a in absent] == [1, 1, 3]  # peer 6 is not followed
    assert absent[0][1:3] == (0.5e6, pytest.approx(1.75e6))
    assert absent[1][1:3] == (4.0e6, pytest.approx(1.5e6))
    assert absent[2][1:] == (1.0e6, pytest.approx(end_us - 1.0e6), {"open": True})
    assert all(e["name"] == "absent" for e in slices(result.trace, "churn"))


def test_an_absence_with_fetch_lasts_until_the_download_has_arrived(tmp_path: Path):
    path = tmp_path / "churn.csv"
    path.write_text("peer,down_s,up_s\n2,1.0,3.0\n")
    scenario = moshpit(churn={"model": "trace", "file": str(path), "rejoin": "fetch"})
    result = traced(scenario)
    (absent,) = slices(result.trace, "churn")
    fetch = [f for f in slices(result.trace, "flow") if f["name"] == "flow → 2"
             and f["ts"] == 3.0e6]  # fmt: skip
    assert len(fetch) == 1
    assert fetch[0]["args"]["bytes"] == 65536 * 8
    assert absent["ts"] == 1.0e6
    assert absent["ts"] + absent["dur"] == pytest.approx(fetch[0]["ts"] + fetch[0]["dur"])


def test_barrier_rounds_are_slices_on_the_peers_present_when_they_start(barrier_run):
    rounds = slices(barrier_run.trace, "round")
    per_round = Counter(e["args"]["round"] for e in rounds)
    assert sorted(per_round) == list(range(1, barrier_run.summary["rounds"] + 1))
    assert all(e["name"] == f"round {e['args']['round']}" for e in rounds)
    assert max(per_round.values()) <= 16
    for peer in range(16):
        mine = sorted((e["ts"], e["dur"]) for e in rounds if e["tid"] % 100 == peer)
        assert all(a[0] + a[1] <= b[0] for a, b in itertools.pairwise(mine))


def training(protocol="a2cid2", **changes):
    """4 peers training a logistic regression, each step 0.2-0.5 s (edge clocks: steps in
    parallel with the exchanges; moshpit: H steps, then a group, in each peer's loop)."""
    groups = {"group_size": 2, "grid_dims": 1} if protocol == "moshpit" else {}
    return moshpit(
        peers={"count": 4, "upload": "100 Mbit/s", "download": "100 Mbit/s", "latency": "10 ms",
               "compute": {"dist": "uniform", "low": "0.2 s", "high": "0.5 s"}},
        churn={"model": "none"}, vector={}, schedule="async",
        protocol={"name": protocol, **groups},
        workload={"name": "logistic", "split": "iid", "batch_size": 8, "local_steps": 2},
        stop={"max_time": "3 s", "max_rounds": None, "target_var": None}, **changes,
    )  # fmt: skip


@pytest.mark.parametrize("protocol", ["a2cid2", "moshpit"])
def test_gradient_steps_are_slices_of_their_compute_time(protocol):
    run = traced(training(protocol))
    steps = slices(run.trace, "step")
    compute = run.peers["compute"].to_numpy(float)
    taken = run.extra_tables["training"].set_index("peer")["grad_steps"]
    tracks = peer_of(run.trace, 4)
    per_peer = Counter(tracks[e["tid"]] for e in steps)
    assert dict(per_peer) == {p: int(taken[p]) for p in range(4) if taken[p]}
    assert sum(per_peer.values()) > 8
    for e in steps:
        assert e["name"] == "gradient step"
        assert abs(e["dur"] - compute[tracks[e["tid"]]] * 1e6) <= 1  # whole microseconds
    for peer in range(4):  # the k-th slice of a peer is its k-th step, back to back or later
        mine = sorted(
            (e["ts"], e["dur"], e["args"]["step"]) for e in steps if tracks[e["tid"]] == peer
        )
        assert [s for _, _, s in mine] == list(range(1, len(mine) + 1))
        assert all(a[0] + a[1] <= b[0] + 1e-3 for a, b in itertools.pairwise(mine))


@pytest.mark.parametrize("make", [moshpit, gossip, training])
def test_tracing_changes_nothing(make):
    plain, recorded = sim.run(make()), traced(make())
    pd.testing.assert_frame_equal(plain.metrics, recorded.metrics)
    pd.testing.assert_frame_equal(plain.extra_tables["traffic"], recorded.extra_tables["traffic"])
    assert np.array_equal(np.asarray(plain.state.x), np.asarray(recorded.state.x))
    drop = {"wall_time_s"}
    assert {k: v for k, v in plain.summary.items() if k not in drop} == {
        k: v for k, v in recorded.summary.items() if k not in drop
    }
    assert plain.trace is None
    assert recorded.trace


def test_trace_peers_limits_the_tracks():
    events = traced(moshpit(), peers=frozenset({2, 7, 99})).trace  # 99: no such peer
    names = sorted(e["args"]["name"] for e in events if e["name"] == "thread_name")
    assert [n for n in names if "·" not in n] == ["peer 2", "peer 7"]
    assert {e["tid"] % 100 for e in events if e["ph"] != "M"} == {2, 7}


def test_trace_cap_truncates_with_a_message():
    full = traced(moshpit())
    result = traced(moshpit(), max_events=40)
    body = [e for e in result.trace if e["ph"] != "M"]
    assert len(body) == 41
    assert body[-1]["name"] == "trace truncated"
    assert body[-1]["ph"] == "i"
    assert body[-1]["s"] == "p"
    at_s = result.trace_truncated_at_s
    assert at_s is not None
    assert 0 < at_s < result.summary["sim_time_s"]
    assert body[-1]["args"] == {"max_events": 40, "at_s": at_s}
    assert full.trace_truncated_at_s is None
    assert not any(e["name"] == "trace truncated" for e in full.trace)


def test_the_rounds_clock_is_refused():
    scenario = moshpit(clock="rounds", stop={"max_rounds": 3})
    with pytest.raises(ScenarioError, match=r"^trace: expected a scenario with clock: network"):
        traced(scenario)


def test_write_result_writes_every_seed_to_trace_json(tmp_path: Path):
    results = sim.run(moshpit(), repeats=2, trace=TraceOptions(peers=frozenset({0, 1})))
    folder = sim.write_result(results, tmp_path / "out")
    with (folder / "trace.json").open(encoding="utf-8") as file:
        document = json.load(file)
    assert document["displayTimeUnit"] == "ms"
    events = document["traceEvents"]
    assert {e["pid"] for e in events} == {SEED, SEED + 1}
    assert events == results[0].trace + results[1].trace
    untraced = sim.write_result(sim.run(moshpit()), tmp_path / "plain")
    assert not (untraced / "trace.json").exists()


def test_overlapping_slices_of_a_peer_go_to_extra_rows_under_it():
    tracer = Tracer(TraceOptions(), seed=5, n_peers=12)
    tracer.slice(3, "round 1", "round", 0.0, 10.0)
    tracer.slice(3, "flow → 1", "flow", 1.0, 4.0)
    tracer.slice(3, "flow → 2", "flow", 2.0, 6.0)  # overlaps the first flow
    tracer.slice(3, "flow → 4", "flow", 5.0, 9.0)  # nests in the round after the first
    tracer.instant(3, "join", 0.0)
    events = tracer.events()
    rows = {e["name"]: e["tid"] for e in events if e["ph"] == "X"}
    assert rows == {"round 1": 3, "flow → 1": 3, "flow → 2": 103, "flow → 4": 3}
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names[3] == "peer 3"
    assert names[103] == "peer 3 ·2"
    order = {e["tid"]: e["args"]["sort_index"] for e in events if e["name"] == "thread_sort_index"}
    assert order[3] < order[103] < order[4]
    (join,) = [e for e in events if e["ph"] == "i"]
    assert join == {"name": "join", "ph": "i", "pid": 5, "tid": 3, "ts": 0.0, "s": "t"}


def test_a_tracer_turns_numpy_values_and_infinities_into_json():
    tracer = Tracer(TraceOptions(), seed=0, n_peers=2)
    args = {"members": np.array([0, 1]), "key": np.int64(7), "timeout": math.inf}
    tracer.slice(np.int64(1), "all-reduce", "all-reduce", 0.5, 0.75, args)
    (event,) = [e for e in tracer.events() if e["ph"] == "X"]
    assert event["args"] == {"members": [0, 1], "key": 7, "timeout": None}
    assert (event["ts"], event["dur"]) == (0.5e6, 0.25e6)
    json.dumps(event, allow_nan=False)


def test_parse_peers_reads_indices_and_ranges():
    assert parse_peers("0-3,7") == frozenset({0, 1, 2, 3, 7})
    assert parse_peers(" 5 ") == frozenset({5})
    for bad in ("", "a", "3-1", "1,,2", "-2", "1-2-3"):
        with pytest.raises(ScenarioError, match=r"^--trace-peers: expected peer indices or ranges"):
            parse_peers(bad)


@pytest.mark.parametrize(
    ("options", "key"),
    [({"max_events": 0}, "trace.max_events"), ({"max_events": 1.5}, "trace.max_events"),
     ({"peers": frozenset({-1})}, "trace.peers")],
)  # fmt: skip
def test_trace_options_are_checked(options, key):
    with pytest.raises(ScenarioError, match=rf"^{key}: expected"):
        TraceOptions(**options)
    assert TraceOptions().max_events == MAX_EVENTS
