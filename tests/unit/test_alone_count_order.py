"""The order in which a group alone's sends and ends are counted
(``alone_parts.in_time_order``): its sends by the loop's send order, whose instants
never go back, and its ends by (end instant, send order). Checked against the sorts it
replaced, on runs with ties in both instants."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.netclock.alone import AloneRun
from sim.engine.netclock.alone_parts import ended, in_time_order


@st.composite
def runs(draw):
    n = draw(st.integers(1, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    sent = rng.random(n) < 0.8
    seq = np.full(n, -1, dtype=np.int64)
    seq[sent] = rng.permutation(int(sent.sum()))
    # instants on a coarse grid (ties), never back in send order
    steps = rng.integers(0, 3, int(sent.sum())).astype(float)
    sent_at = np.full(n, np.nan)
    sent_at[sent] = np.cumsum(steps)[seq[sent]]
    outcome = np.where(sent, rng.integers(1, 5, n), rng.choice([0, 5], n)).astype(np.int8)
    end_at = np.where(outcome >= 1, sent_at + rng.integers(0, 4, n), np.nan)
    end_at[outcome == 5] = rng.random(int((outcome == 5).sum()))  # broken: ended unsent
    moved = rng.random(n)
    return AloneRun(sent_at, end_at, outcome, moved, seq, 0.0, int(sent.sum()), 0)


@settings(max_examples=200, deadline=None)
@given(runs())
def test_counting_order_is_that_of_the_sorts(run):
    order = in_time_order(run)
    by_send = np.argsort(run.sent_at, kind="stable")  # the sorts it replaced
    ends = np.flatnonzero(ended(run.outcome))
    ends = ends[np.lexsort((run.seq[ends], run.end_at[ends]))]
    np.testing.assert_array_equal(order.ends, ends)
    np.testing.assert_array_equal(order.end_times, run.end_at[ends])
    np.testing.assert_array_equal(order.send_times, run.sent_at[by_send])
    for until in (-1.0, *np.unique(run.sent_at[~np.isnan(run.sent_at)]).tolist(), np.inf):
        hi = int(np.searchsorted(order.send_times, until, side="right"))
        want = by_send[: int(np.searchsorted(run.sent_at[by_send], until, side="right"))]
        assert set(order.by_send[:hi].tolist()) == set(want.tolist())
