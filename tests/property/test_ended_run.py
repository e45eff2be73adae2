"""``RoundState.ended_run`` counts a run of pieces in numba as ``ended_inside`` does in
Python, and ``RoundState.ended`` a delivered flow as its Python loop does: the same
flows released in the same order, the same counters left (``need``, ``gate_left``), the
same flows delivered, the same gates opened and continuations kept,
in the same order, and ``done`` settled with the round's last end.

The plans are random (gates opened and waited for, flows after others, pieces on a
connection, streams), the runs random sequences of flows, in runs of random lengths,
whether or not a real round could end them in that order: both paths must agree on
anything. A small room for the flows released makes numba's loop stop and resume."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.contract import Flows, RoundPlan
from sim.engine.netclock import round_state
from sim.engine.netclock.round_state import RoundState

pytestmark = pytest.mark.skipif(
    round_state._ends_kernel("ended_run") is None, reason="numba not installed"
)


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 40))
    n_gates = draw(st.integers(1, 6))
    gate = st.integers(-1, n_gates - 1)
    followers = [0] * n
    after, previous, taken = [], [], set()
    for j in range(n):
        i = draw(st.integers(-1, j - 1))
        if i >= 0 and followers[i] < 2:
            followers[i] += 1
            after.append(i)
        else:
            after.append(-1)
        p = draw(st.integers(-1, j - 1))
        previous.append(p if p >= 0 and p not in taken else -1)
        taken.add(previous[-1])
    return {
        "src": draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)),
        "dst": draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)),
        "opens": draw(st.lists(gate, min_size=n, max_size=n)),
        "waits": draw(st.lists(gate, min_size=n, max_size=n)),
        "after": after,
        "previous": previous,
        "streamed": draw(st.lists(st.booleans(), min_size=n, max_size=n)),
        "order": draw(st.permutations(range(n))),
        "cuts": draw(st.lists(st.integers(1, 8), max_size=20)),
    }


class _Gates:
    """Stands for the round's chains: records the gates opened, in order."""

    def __init__(self) -> None:
        self.opened: list[int] = []

    def gate_opened(self, gate: int) -> None:
        self.opened.append(gate)


def _state(plan: dict[str, Any], kernel: bool) -> tuple[RoundState, list[int], _Gates]:
    index = np.intp
    flows = Flows(
        src=np.array(plan["src"], dtype=index), dst=np.array(plan["dst"], dtype=index),
        nbytes=np.ones(len(plan["src"])), opens=np.array(plan["opens"], dtype=index),
        waits=np.array(plan["waits"], dtype=index), after=np.array(plan["after"], dtype=index),
        previous=np.array(plan["previous"], dtype=index),
        streamed=np.array(plan["streamed"], dtype=bool),
    )  # fmt: skip
    round_plan = RoundPlan(finish=lambda *_: None, flows=lambda: flows)
    round_plan.delivered = np.zeros(flows.src.size, dtype=bool)
    env = simpy.Environment()
    state = RoundState(round_plan, flows, env.event(), True, False, lambda flow: None)
    kept: list[int] = []
    state._keep_for = kept.append  # type: ignore[method-assign]
    gates = _Gates()
    state.chains = gates  # type: ignore[assignment]
    if not kernel:
        state._run = None
    return state, kept, gates


@settings(max_examples=300, deadline=None)
@given(plans(), st.sampled_from([0, 2, 1024]))
def test_numba_counts_a_run_of_ends_as_python_does(plan: dict[str, Any], room: int) -> None:
    fast, kept_fast, gates_fast = _state(plan, kernel=True)
    slow, kept_slow, gates_slow = _state(plan, kernel=False)
    if fast.cont is None or fast._nexts is None:
        return  # no stream: ended_run never runs on such a plan
    flat = np.array(plan["order"], dtype=np.int64)
    saved = round_state._RUN_ROOM
    round_state._RUN_ROOM = room
    try:
        start = 0
        for cut in [*plan["cuts"], flat.size]:
            stop = min(start + cut, flat.size)
            ready_fast: list[int] = []
            ready_slow: list[int] = []
            fast.ended_run(flat, start, stop, ready_fast)
            slow.ended_run(flat, start, stop, ready_slow)
            assert fast._run is not None  # the numba loop ran
            assert ready_fast == ready_slow
            assert list(fast.need) == list(slow.need)
            assert list(fast.gate_left) == list(slow.gate_left)
            assert fast.left == slow.left
            start = stop
            if start == flat.size:
                break
    finally:
        round_state._RUN_ROOM = saved
    assert fast.plan.delivered is not None
    assert slow.plan.delivered is not None
    np.testing.assert_array_equal(fast.plan.delivered, slow.plan.delivered)
    assert kept_fast == kept_slow
    assert gates_fast.opened == gates_slow.opened
    assert fast.done.triggered == slow.done.triggered == (fast.left == 0)


@settings(max_examples=300, deadline=None)
@given(plans(), st.lists(st.booleans(), min_size=40, max_size=40))
def test_numba_counts_single_ends_as_python_does(plan: dict[str, Any], ok: list[bool]) -> None:
    """Flows ended one by one, delivered or not (the failures take the Python loop on
    both sides): each one's released flows, and the counters, gates and continuations
    kept after it, agree."""
    fast, kept_fast, gates_fast = _state(plan, kernel=True)
    slow, kept_slow, gates_slow = _state(plan, kernel=False)
    if fast._nexts is None:
        return  # a flow with three followers or more: no numba loop for such a plan
    for i, delivered in zip(plan["order"], ok, strict=False):
        assert fast.ended(i, delivered) == slow.ended(i, delivered)
        assert list(fast.need) == list(slow.need)
        assert list(fast.gate_left) == list(slow.gate_left)
        assert fast.broken == slow.broken
        assert fast.left == slow.left
        assert kept_fast == kept_slow
        assert gates_fast.opened == gates_slow.opened
    assert fast._run is not None
    if any(ok[: len(plan["order"])]):
        assert fast._run_arrays  # the numba loop ran
    assert fast.plan.delivered is not None
    assert slow.plan.delivered is not None
    np.testing.assert_array_equal(fast.plan.delivered, slow.plan.delivered)
    assert fast.done.triggered == slow.done.triggered == (fast.left == 0)


def test_round_state_reads_ended_ones_answers_as_the_kernel_gives_them() -> None:
    """``RoundState`` tells ``ended_one``'s "read the counts" from a released flow by
    its own copy of the kernel module's value (that module imports only with numba)."""
    kernels = pytest.importorskip("sim.engine.netclock._ends_jit")
    assert round_state._READ_COUNTS == kernels.READ_COUNTS
    assert kernels.ONE_OR_NONE == -1 > kernels.READ_COUNTS
