"""The compiled ring loop of a segment plan (sim/kernels/solo_plan.py) plans the bits the
Python loop plans: on random rings, and in whole runs next to the general path (the
fast path's plans made by either loop, with and without looks at an interrupt)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import protocols._solo_exchanges as solo
import sim
from protocols._async_net import WINDOW
from protocols._edge_clocks import PoissonClocks
from sim.kernels import solo_plan
from sim.network.flows import COMPILED_MIN_PEERS
from tests.property.test_solo_exchanges import same_runs

needs_numba = pytest.mark.skipif(
    solo_plan.compiled() is None, reason="numba does not import (the extra fast)"
)


@st.composite
def rings(draw: st.DrawFn) -> dict:
    """One window of rings on a random graph, with peers absent, busy, in earlier
    waves, and segment bounds that may stop the loop anywhere."""
    n_peers = draw(st.integers(2, 12))
    n_edges = draw(st.integers(1, 20))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    ends_i = rng.integers(0, n_peers, n_edges)
    ends_j = (ends_i + rng.integers(1, n_peers, n_edges)) % n_peers
    n_times = draw(st.integers(0, 60))
    # ring times with ties and rings "in the past" (a window starting before now)
    times = np.sort(rng.choice([0.0, 0.5, 1.0], n_times) + rng.random(n_times))
    # route latencies and transfer times, 0 included (a flow that completes on entering)
    grid = np.array([0.0, 0.01, 0.1, 0.3, 1e-17])
    return {
        "n_peers": n_peers,
        "ends_i": ends_i.astype(np.intp),
        "ends_j": ends_j.astype(np.intp),
        "present": rng.random(n_peers) < draw(st.sampled_from([1.0, 0.8])),
        "free_at": rng.choice([-np.inf, 0.0, 0.4, 1.5], n_peers),
        "level": rng.integers(0, 3, n_peers),
        "times": [
            grid[rng.integers(0, grid.size, n_edges)] + rng.random(n_edges) * 0.1 for _ in range(4)
        ],
        "ring_times": times,
        "picked": rng.integers(0, n_edges, n_times).astype(np.intp),
        "now": draw(st.sampled_from([0.0, 0.3, 1.2])),
        "k": draw(st.integers(0, n_times)),
        "horizon": draw(st.sampled_from([np.inf, 0.9, 1.7, 3.0])),
        "most": draw(st.integers(1, 80)),
        "cap": draw(st.integers(1, 80)),
        "limit": draw(st.integers(0, 80)),
        "edge": int(rng.integers(0, n_edges)),
    }


def call(kernel, case: dict, arrays: bool):
    """Run ``kernel`` on the case (arrays, or lists as the Python loop gets them);
    returns (what it returned, the state and outputs after)."""
    size = case["most"] + 1

    def as_(values, dtype):
        array = np.array(values, dtype=dtype)
        return array if arrays else array.tolist()

    free_at, level = as_(case["free_at"], np.float64), as_(case["level"], np.int64)
    outputs = [as_(np.zeros(size), np.float64), as_(np.zeros(size), np.float64),
               as_(np.zeros(size), np.intp), as_(np.zeros(size), np.int64)]  # fmt: skip
    returned = kernel(
        case["edge"], case["now"], case["now"], case["k"], 1, case["limit"], 0, 0, 0,
        as_(case["ring_times"], np.float64), as_(case["picked"], np.intp),
        case["horizon"], case["most"], case["cap"], as_(case["present"], np.bool_),
        free_at, level, as_(case["ends_i"], np.intp), as_(case["ends_j"], np.intp),
        *(as_(t, np.float64) for t in case["times"]), *outputs,
    )  # fmt: skip
    n = returned[6]
    after = [np.asarray(free_at), np.asarray(level)]
    after += [np.asarray(o)[:n] for o in outputs]
    return returned, after


@needs_numba
@settings(max_examples=300, deadline=None)
@given(case=rings())
def test_compiled_loop_plans_the_python_loops_bits(case):
    compiled = solo_plan.compiled()
    assert compiled is not None
    expected, expected_after = call(solo_plan.plan_rings, case, arrays=False)
    got, got_after = call(compiled, case, arrays=True)
    assert [type(v) for v in got] == [type(v) for v in expected]  # Python int and float
    assert got == expected
    for a, b in zip(got_after, expected_after, strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.tobytes() == np.asarray(b, dtype=a.dtype).tobytes()  # -0.0, NaN bits


@needs_numba
def test_loop_stops_where_only_the_caller_can_go_on():
    """NEXT at the ring a look at the interrupt is due (uncounted), WINDOW_END after the
    window's last ring, STOP at a bound (the time of the yield point not passed)."""
    case = {
        "n_peers": 4, "ends_i": np.array([0, 2], dtype=np.intp),
        "ends_j": np.array([1, 3], dtype=np.intp), "present": np.ones(4, dtype=bool),
        "free_at": np.full(4, -np.inf), "level": np.zeros(4, dtype=np.int64),
        "times": [np.array([0.01, 0.01]), np.array([0.1, 0.5])] * 2,
        "ring_times": np.array([0.2, 0.4, 0.6]), "picked": np.array([1, 0, 1], dtype=np.intp),
        "now": 0.0, "k": 0, "horizon": np.inf, "most": 100, "cap": 100, "limit": 2, "edge": 0,
    }  # fmt: skip
    (status, edge, now, _, k, rings, n, *_), _ = call(solo_plan.compiled(), case, True)
    assert (status, edge, now, k, rings, n) == (solo_plan.NEXT, 0, 0.4, 2, 2, 2)
    case["limit"] = 100
    (status, edge, now, _, k, rings, n, _, skipped), after = call(solo_plan.plan_rings, case, False)
    assert (status, edge, now, k, rings, n, skipped) == (solo_plan.WINDOW_END, 1, 0.6, 3, 4, 3, 1)
    np.testing.assert_array_equal(after[5], [0, 0, 1])  # waves: ring 0.6 waits for 0.2's
    case["horizon"] = 0.5
    (status, _, now, later, k, rings, n, *_), _ = call(solo_plan.plan_rings, case, False)
    assert (status, now, later, k, rings, n) == (solo_plan.STOP, 0.4, 0.6, 2, 3, 3)


@given(rates=st.lists(st.floats(0.1, 30.0), min_size=1, max_size=6), seed=st.integers(0, 1000))
def test_ring_stream_in_arrays_holds_the_lists_values(rates, seed):
    clocks = PoissonClocks(np.array(rates))
    lists = solo.RingStream(clocks, np.random.default_rng(seed), 0.25, WINDOW)
    arrays = solo.RingStream(clocks, np.random.default_rng(seed), 0.25, WINDOW, arrays=True)
    for _ in range(3):
        lists.extend()
        arrays.extend()
    for (t1, e1, b1), (t2, e2, b2) in zip(lists.windows, arrays.windows, strict=True):
        assert t2.dtype == np.float64
        assert e2.dtype == np.intp
        assert b1 == b2
        assert t1 == t2.tolist()
        assert e1 == e2.tolist()
    for _ in range(50):
        at = arrays.at()
        assert type(at) is float
        assert at == lists.at()
        edge = arrays.step()
        assert edge == lists.step()
        assert type(edge) in (int, type(None))


def gossip(name: str, n: int, **more) -> dict:
    data = {
        "name": "solo-kernel",
        "clock": "network",
        "peers": {"count": n, "upload": "10 Mbit/s", "download": "100 Mbit/s", "latency": "5 ms"},
        "vector": {"dim": 4},
        "protocol": {"name": name, "topology": "ring", "rate": 3.0},
        "churn": {"model": "exponential", "mtbf": 3.0, "mttr": 0.5, "rejoin": "fetch"},
        "stop": {"max_time": 6.0, "max_rounds": None, "target_var": 0},
        "metrics": {"every": 1.0},
    }
    for key, value in more.items():
        section, field = key.split("__")
        data[section][field] = value
    return data


def runs(data: dict, monkeypatch: pytest.MonkeyPatch, polled: bool) -> list:
    """(result, exchange log, plans by the compiled loop) with the general path, the
    fast path with the Python loop, the fast path with the compiled loop."""
    scenario, out = sim.scenario_from_mapping(data), []
    plan = solo.SoloExchanges.plan
    compiled = [0]

    def counting(self, *args, **kwargs):
        compiled[0] += self.compiled
        return plan(self, *args, **kwargs)

    monkeypatch.setattr(solo.SoloExchanges, "plan", counting)
    for enabled, peers in ((False, 0), (True, 1 << 62), (True, 0)):
        log: list = []
        compiled[0] = 0
        monkeypatch.setattr(solo.settings, "ENABLED", enabled)
        monkeypatch.setattr(solo.settings, "EXCHANGES", log)
        monkeypatch.setattr(solo.settings, "COMPILED_PEERS", peers)
        interrupt = threading.Event() if polled else None
        out.append((sim.run(scenario, seed=5, interrupt=interrupt), sorted(log), compiled[0]))
    return out


def assert_same(a, b) -> None:
    (x, log_x, _), (y, log_y, _) = a, b
    same_runs(x, log_x, y, log_y)


@pytest.mark.parametrize(
    ("name", "knobs", "more"),
    [
        ("pairwise_gossip", {}, {}),
        ("a2cid2", {}, {}),
        ("pairwise_gossip", {"SEGMENT_RINGS": 5, "POLL_RINGS": 3}, {}),
        ("a2cid2", {"SEGMENT_RINGS": 7, "POLL_RINGS": 2}, {}),
        # exact targets: segments shown to the tracker, cut and planned again
        ("a2cid2", {}, {"stop__target_var": 1e-3}),
        ("pairwise_gossip", {"POLL_RINGS": 1}, {"stop__target_var": 1e-4}),
    ],
)
@needs_numba
@pytest.mark.parametrize("polled", [False, True])
def test_runs_planned_by_either_loop_are_the_general_paths(name, knobs, more, polled, monkeypatch):
    for key, value in knobs.items():
        monkeypatch.setattr(solo.settings, key, value)
    general, python, compiled = runs(gossip(name, 24, **more), monkeypatch, polled)
    assert python[2] == 0
    assert compiled[2] > 0
    assert_same(general, python)
    assert_same(general, compiled)


@pytest.mark.parametrize("numba_imports", [True, False])
def test_small_runs_and_runs_without_numba_keep_the_python_loop(numba_imports, monkeypatch):
    """Below COMPILED_PEERS, or when numba does not import, the plans run the Python loop
    on lists (a small run does not load the kernel), and give the general path's run."""
    data = gossip("pairwise_gossip", 24)
    if numba_imports:
        monkeypatch.setattr(solo.settings, "COMPILED_PEERS", 25)
    else:
        monkeypatch.setattr(solo.settings, "COMPILED_PEERS", 0)
        monkeypatch.setattr(solo_plan, "compiled", lambda: None)
    monkeypatch.setattr(solo.settings, "ENABLED", False)
    general = sim.run(sim.scenario_from_mapping(data), seed=5)
    monkeypatch.setattr(solo.settings, "ENABLED", True)
    seen = []
    plan = solo.SoloExchanges.plan

    def recording(self, *args, **kwargs):
        seen.append((self.compiled, type(self.free_at), type(self.stream.windows[0][0])))
        return plan(self, *args, **kwargs)

    monkeypatch.setattr(solo.SoloExchanges, "plan", recording)
    fast = sim.run(sim.scenario_from_mapping(data), seed=5)
    assert seen
    assert set(seen) == {(False, list, list)}
    assert_same((general, [], 0), (fast, [], 0))


@needs_numba
@pytest.mark.parametrize("target", [0, 1e-4])
def test_runs_whose_network_runs_compiled_plan_with_the_compiled_loop(target, monkeypatch):
    """From COMPILED_MIN_PEERS peers the flow network runs compiled, numba is loaded: the
    plans run the compiled loop below COMPILED_PEERS too, with the Python loop's run (and
    the general path's)."""
    data = gossip("pairwise_gossip", COMPILED_MIN_PEERS, stop__target_var=target)
    data["stop"]["max_time"] = 2.0
    assert COMPILED_MIN_PEERS < solo.settings.COMPILED_PEERS
    plan = solo.SoloExchanges.plan
    seen: list[bool] = []

    def recording(self, *args, **kwargs):
        seen.append(self.compiled)
        return plan(self, *args, **kwargs)

    monkeypatch.setattr(solo.SoloExchanges, "plan", recording)
    scenario = sim.scenario_from_mapping(data)
    compiled = sim.run(scenario, seed=5)
    assert seen
    assert all(seen)
    seen.clear()
    monkeypatch.setattr(solo_plan, "compiled", lambda: None)
    python = sim.run(scenario, seed=5)
    assert seen
    assert not any(seen)
    monkeypatch.setattr(solo.settings, "ENABLED", False)
    general = sim.run(scenario, seed=5)
    assert_same((python, [], 0), (compiled, [], 0))
    assert_same((general, [], 0), (compiled, [], 0))
