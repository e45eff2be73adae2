"""A group's flows run alone (:func:`sim.engine.netclock.alone.run_alone`) as the network
clock runs them piece by piece (issue 13).

Random plans — gates, ``after`` and ``previous`` chains, streamed pieces, zero-byte
flows, immediate and later roots, timeouts, zero and positive latencies, absent members
and preemptions — go through both: the network clock with a flow per piece
(:attr:`~sim.engine.netclock.NetworkClock.streams` off) in a SimPy environment of its own,
and the loop. Which flows are delivered, timed out and refused, how many messages were
sent, and every flow's send and end instant agree; the instants to 1e-9 relative (the
two compute rates differently, so not bit for bit). The loop in Python and compiled by
numba give the same floats.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from protocols.contract import Flows
from sim.engine.netclock import _alone_loop
from sim.engine.netclock.alone import AlonePlan, run_alone
from sim.engine.netclock.replay import on_the_clock
from sim.network import FlowNetwork, compiled
from sim.network.maxmin import REL_EPS
from tests.strategies import group_flow_plans

RTOL = 1e-9


def _flows(plan: dict[str, Any]) -> Flows:
    keys = ("src", "dst", "nbytes", "opens", "waits", "after", "start_s", "timeout_s",
            "streamed", "previous")  # fmt: skip
    return Flows(**{k: plan[k] for k in keys})


def _net_args(plan: dict[str, Any]) -> tuple[Any, ...]:
    """The group's links: ``FlowNetwork``'s arguments after the environment."""
    return (np.array(plan["up"]), np.array(plan["down"]), np.array(plan["latency"]),
            "maxmin", None, "general")  # fmt: skip


def _piece_by_piece(plan: dict[str, Any]) -> dict[str, Any]:
    """The network clock's run of the plan, a flow per piece, every flow recorded."""
    t0 = plan["t0"]
    preemptions = [(t0 + at, peer) for at, peer in plan["preemptions"]]
    return on_the_clock(_net_args(plan), _flows(plan), t0, plan["present"], True, preemptions)


def _alone(plan: dict[str, Any]) -> Any:
    net = FlowNetwork(simpy.Environment(), *_net_args(plan))
    t0 = plan["t0"]
    return run_alone(_flows(plan), net, plan["present"], t0,
                     preemptions=[(t0 + at, p) for at, p in plan["preemptions"]])  # fmt: skip


def _tied(plan: dict[str, Any], run: Any) -> bool:
    """Whether a preemption falls on an instant of the group's own (a send, an end, a
    root's start, a latency's end): the order of two events of one instant is the
    order SimPy scheduled them in, which the loop does not know (docs/design.md)."""
    t0 = plan["t0"]
    lat = np.array(plan["latency"])
    instants = np.r_[run.sent_at, run.end_at, t0 + plan["start_s"],
                     run.sent_at + lat[plan["src"]] + lat[plan["dst"]]]  # fmt: skip
    return any(np.any(instants == t0 + at) for at, _ in plan["preemptions"])


def _close(mine: np.ndarray, theirs: np.ndarray, where: np.ndarray) -> None:
    np.testing.assert_allclose(mine[where], theirs[where], rtol=RTOL, atol=0.0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(group_flow_plans())
def test_a_group_alone_runs_as_the_network_clock_piece_by_piece(plan: dict[str, Any]) -> None:
    ref = _piece_by_piece(plan)
    got = _alone(plan)
    assume(not _tied(plan, got))
    np.testing.assert_array_equal(got.delivered, ref["delivered"])
    np.testing.assert_array_equal(got.timed_out, ref["timed_out"])
    assert (got.messages, got.refused) == (ref["messages"], ref["refused"])
    assert math.isclose(got.done_at, ref["end"], rel_tol=RTOL, abs_tol=0.0)
    networked = np.isfinite(ref["sent_at"])  # sent as a flow: not refused, not broken
    assert np.array_equal(networked, np.isin(got.outcome, (1, 2, 3)))
    _close(got.sent_at, ref["sent_at"], networked)
    _close(got.end_at, ref["end_at"], networked)


@pytest.mark.skipif(not compiled.available(), reason="numba is not installed")
@settings(max_examples=60, deadline=None)
@given(group_flow_plans())
def test_the_loop_gives_the_same_floats_in_python_and_compiled(plan: dict[str, Any]) -> None:
    compiled_run = _alone(plan)
    python_run = _python(plan)
    for name in ("sent_at", "end_at", "moved"):
        np.testing.assert_array_equal(getattr(python_run, name), getattr(compiled_run, name))
    np.testing.assert_array_equal(python_run.outcome, compiled_run.outcome)
    assert python_run.done_at == compiled_run.done_at


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(group_flow_plans(), st.lists(st.floats(0.0, 3.0), min_size=1, max_size=6))
def test_a_loop_stopped_and_resumed_gives_the_run_of_one_call(
    plan: dict[str, Any], steps: list[float]
) -> None:
    """Stopping the loop at instants (:meth:`AlonePlan.advance` with ``until``, the
    changes of presence given in pieces as they come) and going on from its state
    gives every float of one uninterrupted run."""
    net = FlowNetwork(simpy.Environment(), *_net_args(plan))
    t0 = plan["t0"]
    changes = [(t0 + at, peer, False) for at, peer in plan["preemptions"]]
    one = AlonePlan([(_flows(plan), t0)], net)
    whole = one.run(plan["present"], changes)
    state = one.start(plan["present"])
    until, run = t0, None
    for step in [*steps, math.inf]:
        until += step
        known = [c for c in changes if c[0] <= until]  # what is known by then
        run = one.advance(state, known if step < math.inf else changes, until)
        if run.done_at < math.inf:
            break
        np.testing.assert_array_equal(run.seq >= 0, whole.sent_at <= until)
    assert run is not None
    for name in ("sent_at", "end_at", "moved", "outcome", "seq"):
        np.testing.assert_array_equal(getattr(run, name), getattr(whole, name))
    assert (run.done_at, run.messages, run.refused) == (whole.done_at, whole.messages,
                                                        whole.refused)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(group_flow_plans())
def test_a_group_with_every_member_present_lasts_at_least_its_least_duration(
    plan: dict[str, Any],
) -> None:
    """:meth:`AlonePlan.least_duration`, the bound before which the background timing
    arms a group's ends (``AloneGroups._wake``, at half of it): with every member present
    and none going down, the last flow ends no earlier (its bytes through its busiest
    resource, or a timeout; REL_EPS of a size may be left)."""
    net = FlowNetwork(simpy.Environment(), *_net_args(plan))
    t0 = plan["t0"]
    one = AlonePlan([(_flows(plan), t0)], net)
    run = one.run(np.ones_like(plan["present"]))
    assert run.done_at - t0 >= one.least_duration() * (1 - 1e-9)


def _python(plan: dict[str, Any]) -> Any:
    from sim.engine.netclock import alone

    solver = alone._solver
    alone._solver = lambda: _alone_loop.solve
    try:
        return _alone(plan)
    finally:
        alone._solver = solver


def test_the_loop_counts_completion_as_the_network_does() -> None:
    assert _alone_loop.REL_EPS == REL_EPS
