"""Churn schedules, whatever the model and parameters: well-formed steps, and presence
sampled with ``present_at`` equal to replaying the steps."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sim.model.churn import build_round_churn, build_schedule, load_trace
from sim.model.churn.schedule import TraceSchedule
from sim.model.scenario.churn import BernoulliChurn
from tests.strategies import churn_sections, peer_counts, seeds, trace_rows

HORIZON_S = 30.0
MAX_STEPS = 300


def replay(schedule, horizon_s=HORIZON_S):
    """The steps up to ``horizon_s`` (at most MAX_STEPS of them)."""
    out = []
    for change in schedule:
        if change.time_s > horizon_s or len(out) == MAX_STEPS:
            break
        out.append(change)
    return out


def state_at(changes, n_peers, t_s):
    state = np.ones(n_peers, dtype=bool)
    for change in changes:
        if change.time_s > t_s:
            break
        state[change.down], state[change.up] = False, True
    return state


def check_well_formed(changes, n_peers):
    state = np.ones(n_peers, dtype=bool)
    times = [c.time_s for c in changes]
    assert all(a < b for a, b in itertools.pairwise(times)), "strictly increasing"
    for change in changes:
        for peers in (change.down, change.up):
            assert peers.dtype == np.intp
            assert np.all(np.diff(peers) > 0), "sorted, no repeats"
        assert state[change.down].all(), "a peer goes down only from up"
        assert not state[change.up].any(), "a peer comes up only from down"
        state[change.down], state[change.up] = False, True


@given(churn=churn_sections(), n_peers=peer_counts(0, 30), seed=seeds)
def test_steps_alternate_per_peer_in_increasing_time(churn, n_peers, seed):
    changes = replay(build_schedule(churn, n_peers, np.random.default_rng(seed)))
    check_well_formed(changes, n_peers)


@given(
    churn=churn_sections(),
    n_peers=peer_counts(1, 30),
    seed=seeds,
    times=st.lists(st.floats(0, HORIZON_S), max_size=20),
)
def test_present_at_equals_replaying_the_steps(churn, n_peers, seed, times):
    changes = replay(build_schedule(churn, n_peers, np.random.default_rng(seed)))
    limit_s = changes[-1].time_s if len(changes) == MAX_STEPS else HORIZON_S
    sampled = build_schedule(churn, n_peers, np.random.default_rng(seed))
    for t_s in sorted(t for t in times if t < limit_s):
        np.testing.assert_array_equal(sampled.present_at(t_s), state_at(changes, n_peers, t_s))


@given(p=st.floats(0, 1), n_peers=peer_counts(0, 30), seed=seeds)
def test_bernoulli_on_rounds_is_the_historical_draw(p, n_peers, seed):
    rounds = build_round_churn(
        BernoulliChurn(model="bernoulli", p=p), n_peers, np.random.default_rng(seed)
    )
    reference = np.random.default_rng(seed)
    for t in range(5):
        expected = np.ones(n_peers, bool) if p == 0 else reference.random(n_peers) >= p
        np.testing.assert_array_equal(rounds.present(t), expected)


@st.composite
def traces(draw):
    n_peers = draw(peer_counts(1, 6))
    return n_peers, draw(trace_rows(n_peers))


@given(trace=traces(), times=st.lists(st.floats(0, 12), max_size=20))
def test_a_trace_is_replayed_exactly_through_its_csv(trace, times):
    n_peers, rows = trace
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.csv"
        lines = ["peer,down_s,up_s", *(f"{p},{d!r},{u!r}" for p, d, u in rows)]
        path.write_text("\n".join(lines) + "\n")
        loaded = load_trace(path, n_peers)
    changes = list(TraceSchedule(n_peers, loaded))
    check_well_formed(changes, n_peers)
    sampled = TraceSchedule(n_peers, loaded)
    for t_s in sorted(times):
        expected = np.ones(n_peers, dtype=bool)
        for peer, down_s, up_s in rows:
            if down_s <= t_s < up_s:
                expected[peer] = False
        np.testing.assert_array_equal(sampled.present_at(t_s), expected)
        np.testing.assert_array_equal(state_at(changes, n_peers, t_s), expected)
