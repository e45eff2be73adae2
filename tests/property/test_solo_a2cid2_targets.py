"""A²CiD² with exact targets on the closed-form fast path (issue 13): the tracker takes a
segment's exchanges as trajectories of decaying rows (sim/engine/observe/segments.py),
stops at a crossing between two exchanges, at a resync and where the reference time of
the decay moves, and the segment is cut at the predicted crossing's timer. Runs with
the fast path on and off give the same exchanges at the same times, the same vectors
and the same crossing instants (time_to_* and the stop time, to 1e-9 relative; in
practice bit for bit)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import protocols._solo_exchanges as solo
import sim

#: Relative round-off allowed on a crossing instant (the issue's bound).
REL = 1e-9


def scenario(n: int, eta: float, target: float, churn: dict, dim: int = 4, **more) -> dict:
    """A small ring of A²CiD² peers on the network clock with exact targets."""
    data = {
        "name": "solo-a2cid2",
        "clock": "network",
        "peers": {"count": n, "upload": "10 Mbit/s", "download": "100 Mbit/s", "latency": "5 ms"},
        "vector": {"dim": dim},
        "protocol": {"name": "a2cid2", "topology": "ring", "rate": 3.0, "eta": eta},
        "churn": churn,
        "stop": {"max_time": 40.0, "max_rounds": None, "target_var": target},
        "metrics": {"every": 2.0, "targets": [1e-1, 1e-2]},
    }
    for key, value in more.items():
        section, field = key.split("__")
        data.setdefault(section, {})[field] = value
    return data


def run_both(data: dict, seed: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list, int, dict]:
    """[(result, exchange log)] with the fast path off then on; exchanges the fast path
    applied in segments; segments shown to the tracker and cut short."""
    applied, seen = [0], {"settled": 0, "cut": 0}
    commit, settle = solo.SoloExchanges.commit, solo.SoloExchanges.settle

    def counting(self, segment):
        applied[0] += int(np.count_nonzero(np.array(segment.ends) < segment.end))
        yield from commit(self, segment)

    def settling(self, segment, edge):
        out = settle(self, segment, edge)
        seen["settled"] += 1
        seen["cut"] += out is not segment
        return out

    monkeypatch.setattr(solo.SoloExchanges, "commit", counting)
    monkeypatch.setattr(solo.SoloExchanges, "settle", settling)
    out = []
    for enabled in (False, True):
        log: list = []
        monkeypatch.setattr(solo.settings, "ENABLED", enabled)
        monkeypatch.setattr(solo.settings, "EXCHANGES", log)
        out.append((sim.run(sim.scenario_from_mapping(data), seed=seed), sorted(log)))
    return out, applied[0], seen


def close(a: object, b: object) -> bool:
    """Equal, or floats within :data:`REL` (and 1e-12 absolute: quantities of round-off
    size, such as the mean's drift, measured at instants that differ by round-off)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=REL, abs_tol=1e-12)
    return a == b


def assert_same(general: tuple, fast: tuple) -> None:
    """Same exchanges (start and end times, bit for bit), same crossing instants and stop
    (to :data:`REL`), same vectors (to round-off when the run stopped between events: the
    final sync is at the stop instant)."""
    (a, log_a), (b, log_b) = general, fast
    assert log_a == log_b
    left = {k: v for k, v in a.summary.items() if "wall" not in k}
    right = {k: v for k, v in b.summary.items() if "wall" not in k}
    assert left.keys() == right.keys()
    for key, value in left.items():
        assert close(value, right[key]), (key, value, right[key])
    for key in ("x", *a.state.extra):
        first = np.asarray(a.state.x if key == "x" else a.state.extra[key])
        second = np.asarray(b.state.x if key == "x" else b.state.extra[key])
        np.testing.assert_allclose(first, second, rtol=REL, atol=1e-12)
    pd.testing.assert_frame_equal(a.metrics, b.metrics, rtol=REL, check_exact=False)


CHURN = [
    {"model": "none"},
    {"model": "exponential", "mtbf": 4.0, "mttr": 0.5, "rejoin": "keep"},
    {"model": "exponential", "mtbf": 4.0, "mttr": 0.5, "rejoin": "fetch"},
    {"model": "bernoulli", "p": 0.2, "period": 1.0, "rejoin": "reset"},
    {"model": "waves", "rate": 1.0, "fraction": 0.3, "duration": 0.5, "rejoin": "keep"},
]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(3, 16),
    eta=st.sampled_from([0.05, 0.5, 2.0]),
    target=st.sampled_from([0.0, 1e-2, 1e-3, 1e-5]),
    churn=st.sampled_from(CHURN),
    target_on=st.sampled_from(["var", "var_alive"]),
    dtype=st.sampled_from(["float64", "float32"]),
    seed=st.integers(0, 2**16),
)
def test_a2cid2_with_targets_gives_the_general_paths_run(
    n, eta, target, churn, target_on, dtype, seed, monkeypatch
):
    data = scenario(n, eta, target, churn, stop__target_on=target_on, vector__dtype=dtype)
    (general, fast), applied, _ = run_both(data, seed, monkeypatch)
    event(f"applied in segments: {applied > 0}")
    event(f"stop: {fast[0].summary['stop_reason']}")
    assert_same(general, fast)


@pytest.mark.parametrize("churn", CHURN[:3])
@pytest.mark.parametrize("eta", [0.1, 0.3])
def test_a2cid2_targets_are_timed_in_segments(churn, eta, monkeypatch):
    """Most exchanges go in segments, the segments are cut (crossings, resyncs, the
    reference time, the predicted crossing), every target is reached at the general
    path's instant and the run stops at the stop target's."""
    data = scenario(24, eta, 1e-4, churn, dim=8, metrics__targets=[1e-1, 1e-2, 1e-3])
    (general, fast), applied, seen = run_both(data, 1, monkeypatch)
    assert_same(general, fast)
    summary = fast[0].summary
    assert summary["stop_reason"] == "target"
    assert summary["time_to_1e-03_s"] is not None
    assert applied > len(fast[1]) / 2
    assert seen["cut"] >= 2  # crossings inside segments (and resyncs) cut them


def test_a_crossing_between_exchanges_cuts_the_segment_at_its_timer(monkeypatch):
    """A workload whose stop target is crossed between two exchanges (the mixing of x
    towards x̃ crosses it): the run ends at the predicted instant (a timer), not at an
    exchange, and the segment planned over it was cut there."""
    data = scenario(12, 1.0, 1e-3, {"model": "none"}, protocol__rate=3.0)
    timer_cuts = [0]
    apply_watched = solo.SoloExchanges._apply_watched

    def watching(self, segment):
        cut = apply_watched(self, segment)
        if cut is None and solo.next_interfering(self.env, self._harmless) < segment.end:
            timer_cuts[0] += 1  # all taken, the predicted crossing's timer inside
        return cut

    monkeypatch.setattr(solo.SoloExchanges, "_apply_watched", watching)
    (general, fast), applied, seen = run_both(data, 0, monkeypatch)
    assert_same(general, fast)
    assert timer_cuts[0] >= 1
    stop = fast[0].summary["time_to_target_s"]
    assert stop is not None
    ends = [end for *_, end in fast[1]]
    assert min(abs(stop - end) for end in ends) > 1e-6  # between exchanges
    assert applied > 0
    assert seen["cut"] >= 1


def test_the_trackers_variance_after_every_exchange_is_one_at_a_times(monkeypatch):
    """The tracker's trace (var after every exchange) from segments equals the one at a
    time, with resyncs every N events."""
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
    data = scenario(16, 0.3, 1e-5, {"model": "none"}, dim=8)
    (general, fast), applied, _ = run_both(data, 2, monkeypatch)
    assert_same(general, fast)
    assert len(traces) == 2
    assert len(traces[0]) == len(traces[1]) > len(fast[1])  # var and var_alive
    for (t0, m0, v0), (t1, m1, v1) in zip(*traces, strict=True):
        assert (t0, m0) == (t1, m1)
        assert math.isclose(v0, v1, rel_tol=1e-9, abs_tol=1e-15)
    assert applied > 0


def test_lossy_wire_keeps_a2cid2_targets_on_the_general_path(monkeypatch):
    """Exchanges that do not keep the sum (compression) need rows before each event: the
    tracker takes no batches of decaying rows then."""
    data = scenario(12, 0.5, 1e-2, {"model": "none"}, protocol__compression="fp16")
    (general, fast), applied, seen = run_both(data, 0, monkeypatch)
    assert_same(general, fast)
    assert applied == 0
    assert seen["settled"] == 0
