"""The loop's fill that keeps the last fill's steps (:func:`sim.engine.netclock._alone_fill.rerate`)
gives the floats of a fill from scratch, bit for bit (stop 43).

Random resources and flows (one or two resources each, equal capacities and equal byte
counts likely, so that shares tie) go through random instants at which flows enter and
leave their bandwidth phase, as the loop makes them. After each instant the same flows
are re-rated twice from the same state: once from the steps the last fill kept, once
from scratch (the state of a fill with no steps). Rates, bytes left, when last advanced
and finishes agree exactly, and so do the steps each fill ends with.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.engine.netclock import _alone_fill
from sim.engine.netclock._alone_fill import enter, fill_state, leave, rerate


@st.composite
def fills(draw: Any) -> dict[str, Any]:
    n_res = draw(st.integers(1, 10))
    n = draw(st.integers(1, 24))
    caps = st.sampled_from([1.0, 2.0, 3.0]) | st.floats(0.5, 8.0)
    cap = np.array([draw(caps) for _ in range(n_res)])
    res = np.full((n, 2), -1, np.int64)
    for i in range(n):
        first = draw(st.integers(0, n_res - 1))
        res[i, 0] = first
        if n_res > 1 and draw(st.booleans()):
            other = draw(st.integers(0, n_res - 2))
            res[i, 1] = other + (other >= first)  # any resource but the first
    nbytes = np.array([draw(st.sampled_from([1.0, 2.0]) | st.floats(0.1, 9.0)) for _ in range(n)])
    # instants: each flips some flows (in the bandwidth phase or not)
    instants = draw(st.lists(st.lists(st.integers(0, n - 1), max_size=4), min_size=1, max_size=12))
    return {"cap": cap, "res": res, "nbytes": nbytes, "instants": instants}


class Rates:
    """The per-flow and per-resource arrays :func:`rerate` updates, with a fill's state."""

    def __init__(self, plan: dict[str, Any]) -> None:
        n, n_res = plan["nbytes"].size, plan["cap"].size
        self.rem = plan["nbytes"].copy()
        self.rate, self.t_last = np.zeros(n), np.zeros(n)
        self.finish = np.full(n, math.inf)
        self.left, self.count = np.empty(n_res), np.empty(n_res, np.int64)
        self.nbw, self.head = np.zeros(n_res, np.int64), np.full(n_res, -1, np.int64)
        self.nxt, self.prv = np.empty(2 * n, np.int64), np.empty(2 * n, np.int64)
        self.stamp = np.zeros(n, np.int64)
        self.state = fill_state(n, n_res)

    def copy(self) -> Rates:
        other = object.__new__(Rates)
        for name, value in vars(self).items():
            copied = tuple(a.copy() for a in value) if name == "state" else value.copy()
            setattr(other, name, copied)
        return other

    def enter(self, i: int, res: np.ndarray) -> None:
        fstep, fill, marks, marked = self.state[:4]
        enter(i, res, self.nbw, self.head, self.nxt, self.prv, fstep, marks, marked, fill)

    def leave(self, i: int, res: np.ndarray) -> None:
        _, fill, marks, marked = self.state[:4]
        leave(i, res, self.nbw, self.head, self.nxt, self.prv, marks, marked, fill)

    def rerate(self, now: float, todo: int, epoch: int, plan: dict[str, Any]) -> None:
        rerate(now, todo, epoch, plan["res"], plan["cap"], self.rem, self.rate, self.t_last,
               self.finish, self.left, self.count, self.nbw, self.head, self.nxt, self.stamp,
               *self.state)  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(fills())
def test_a_fill_from_the_last_ones_steps_is_a_fill_from_scratch(plan):
    res = plan["res"]
    kept = Rates(plan)
    inside = np.zeros(plan["nbytes"].size, bool)
    for epoch, flips in enumerate(plan["instants"], start=1):
        now = float(epoch)
        for i in dict.fromkeys(flips):  # each flow once an instant, in order
            if inside[i]:
                kept.leave(i, res)
            else:
                kept.enter(i, res)
                kept.rem[i], kept.rate[i], kept.t_last[i], kept.finish[i] = (
                    plan["nbytes"][i], 0.0, now, math.inf,
                )  # fmt: skip
            inside[i] = not inside[i]
        scratch = kept.copy()
        scratch.state[1][1] = 0  # no fill kept: from scratch
        for rates in (kept, scratch):
            rates.rerate(now, int(inside.sum()), epoch, plan)
        for name in ("rate", "rem", "t_last", "finish", "left", "count"):
            np.testing.assert_array_equal(getattr(kept, name), getattr(scratch, name), err_msg=name)
        steps = kept.state[1][0]
        assert steps == scratch.state[1][0]
        for a, b in zip(kept.state[4:7], scratch.state[4:7], strict=True):  # best_at, share_at, nfz
            np.testing.assert_array_equal(a[:steps], b[:steps])
        np.testing.assert_array_equal(kept.state[0][inside], scratch.state[0][inside])  # fstep
        assert not kept.state[2].any()  # marks cleared
        assert kept.state[1][2] == 0
    # every frozen flow took the share of the step it froze at
    fstep, share_at = kept.state[0], kept.state[5]
    assert all(kept.rate[i] == share_at[fstep[i]] for i in np.flatnonzero(inside))


def test_steps_before_a_change_are_kept_not_redone():
    """r0 (capacity 1, 4 flows) freezes first; a flow leaving r2 changes only later
    steps: r0's flows keep their stamp (not touched again) and the rates are those from
    scratch."""
    res = np.array([[0, -1]] * 4 + [[1, -1], [2, -1], [2, -1]], np.int64)
    plan = {"cap": np.array([1.0, 10.0, 10.0]), "res": res, "nbytes": np.ones(7)}
    kept = Rates(plan)
    for i in range(7):
        kept.enter(i, res)
    kept.rerate(0.0, 7, 1, plan)
    assert list(kept.rate) == [0.25] * 4 + [10.0, 5.0, 5.0]
    kept.leave(6, res)
    scratch = kept.copy()
    scratch.state[1][1] = 0
    kept.rerate(1.0, 6, 2, plan)
    scratch.rerate(1.0, 6, 2, plan)
    assert list(kept.stamp[:4]) == [1] * 4  # step 0 kept
    assert list(scratch.stamp[:6]) == [2] * 6
    np.testing.assert_array_equal(kept.rate, scratch.rate)
    np.testing.assert_array_equal(kept.finish, scratch.finish)
    assert kept.rate[5] == 10.0


def test_many_resources_fill_from_scratch_every_time(monkeypatch):
    """Above MAX_KEPT resources no steps are kept (no rows): each fill is from scratch."""
    monkeypatch.setattr(_alone_fill, "MAX_KEPT", 2)
    state = fill_state(4, 3)
    assert state[7].shape[0] == 0
    assert state[9].shape[0] == 0
