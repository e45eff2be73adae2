"""Latches (``FlowNetwork.join_latch``): quiet completions, recorded without an event.

Flows counted on one latch complete quietly while others of the latch are in flight: the
network calls their ``quiet`` instead of settling ``done``, and goes on through the next
completion instants in one wake-up while nothing else happens. The last flow of a latch,
a failure and anything with another event at its instant end as usual, with the latch's
``loud`` callback.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import simpy

from sim.network import FlowNetwork, compiled
from sim.network.flows import DONE, _Instant

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba not installed")

MB = 1e6


def star(n: int = 4) -> tuple[simpy.Environment, FlowNetwork]:
    """Peer 0 uploads to peers 1..n-1, each download slower than the last (distinct
    completion instants), 10 ms latency everywhere."""
    env = simpy.Environment()
    up = np.full(n, 100 * MB)
    down = np.array([100 * MB] + [float(k) * MB for k in range(1, n)])
    return env, FlowNetwork(env, up, down, np.full(n, 0.005), solver="compiled")


def latched(
    env: simpy.Environment, net: FlowNetwork, n: int
) -> tuple[list[Any], dict[int, float], list[tuple[int, float]], int]:
    """n - 1 flows of 1 MB from peer 0, all on one latch; (flows, quiet ends by
    destination, loud ends, the latch)."""
    quiet: dict[int, float] = {}
    loud: list[tuple[int, float]] = []
    latch = net.latches(1)
    sent = []
    for dst in range(1, n):
        flow = net.send(0, dst, MB)
        assert net.join_latch(
            flow,
            latch,
            lambda f: quiet.__setitem__(f.dst, f.end_s),
            lambda f, e: loud.append((f.dst, env.now)),
        )
        sent.append(flow)
    return sent, quiet, loud, latch


def test_all_but_the_last_of_a_latch_end_quietly_at_their_own_instants() -> None:
    env, net = star(5)
    wakes = []
    on_wake = net._on_wake
    net._on_wake = lambda event: (wakes.append(env.now), on_wake(event))  # type: ignore[method-assign]
    sent, quiet, loud, _ = latched(env, net, 5)
    env.run()
    # peer d downloads at d MB/s: alone on its download, 1 MB takes 1/d s after 10 ms
    assert sorted(quiet) == [2, 3, 4]
    for dst, end in quiet.items():
        assert end == pytest.approx(0.01 + 1.0 / dst, rel=1e-12)
        assert sent[dst - 1]._done is None  # quiet: no event was ever made
        assert not sent[dst - 1].done.triggered  # made here, on first use
    assert loud == [(1, pytest.approx(1.01, rel=1e-12))]
    assert [flow.phase for flow in sent] == [DONE] * 4
    assert net.flows_completed == 4
    assert len(wakes) == 2  # the three quiet instants are one wake-up (and the last one)


def test_the_same_flows_without_a_latch_take_a_wake_up_and_an_event_each() -> None:
    env, net = star(5)
    ends = []
    for dst in range(1, 5):
        net.send(0, dst, MB).done.callbacks.append(lambda e: ends.append(env.now))
    env.run()
    env2, net2 = star(5)
    _sent, quiet, loud, _ = latched(env2, net2, 5)
    env2.run()
    assert sorted([*quiet.values(), *(t for _, t in loud)]) == sorted(ends)  # bit for bit
    np.testing.assert_array_equal(net.bytes_in, net2.bytes_in)


def test_another_event_in_between_stops_the_chain() -> None:
    env, net = star(5)
    seen: list[tuple[float, list[int]]] = []
    _sent, quiet, _loud, _ = latched(env, net, 5)
    probe = env.timeout(0.4)  # between the ends at 0.26 and 0.34 ... 0.51
    probe.callbacks.append(lambda e: seen.append((env.now, sorted(quiet))))
    env.run()
    # at 0.4 the flows ending at 0.26 and 0.343 have been recorded, not the one at 0.51
    assert seen == [(0.4, [3, 4])]
    assert sorted(quiet) == [2, 3, 4]


def test_a_failure_counts_off_its_latch_and_the_last_flow_ends_loudly() -> None:
    env, net = star(5)
    _sent, quiet, loud, latch = latched(env, net, 5)

    def preempt() -> Any:
        yield env.timeout(0.1)
        net.fail_peer(1)  # the slowest one, which would have been the loud one

    env.process(preempt())
    env.run()
    assert sorted(quiet) == [3, 4]
    assert [d for d, _ in loud] == [1, 2]  # the failure, then the latch's last flow
    assert loud[1][1] == pytest.approx(0.01 + 1.0 / 2, rel=1e-12)
    net.free_latches(latch, 1)  # nothing in flight: no error


def test_latches_in_flight_cannot_be_freed_and_freed_ones_are_reused() -> None:
    env, net = star(3)
    latch = net.latches(2)
    flow = net.send(0, 1, MB)
    assert net.join_latch(flow, latch + 1, lambda f: None, lambda f, e: None)
    with pytest.raises(RuntimeError, match="in flight"):
        net.free_latches(latch, 2)
    env.run()
    net.free_latches(latch, 2)
    assert net.latches(2) == latch


def test_the_general_core_has_no_latches() -> None:
    env = simpy.Environment()
    net = FlowNetwork(env, np.ones(2), np.ones(2), np.zeros(2), solver="general")
    assert net.latches(3) == -1
    flow = net.send(0, 1, 1.0)
    assert not net.join_latch(flow, 0, lambda f: None, lambda f, e: None)
    assert flow.latch == -1


@pytest.mark.parametrize("now", [0.0, 0.1, 1.0 / 3.0, 3.0380555555555557, 12345.678, 1e9 + 0.5])
@pytest.mark.parametrize("gap", [0.0, 1e-17, 1e-9, 0.2, 1.0 / 7.0, 4.016666666666666, 77.7])
def test_a_wake_up_lands_on_its_exact_instant(now: float, gap: float) -> None:
    """``_Instant``: a SimPy timeout at the very instant, even one that no float delay
    reaches from ``now`` (3.0380555555555557 + d is never 7.054722222222222)."""
    for at in (now + gap, float(np.nextafter(now + gap, np.inf))):
        env = simpy.Environment(initial_time=now)
        simpy.Timeout(env, _Instant(at))
        assert env.peek() == at
        env.step()
        assert env.now == at


def test_some_instants_are_out_of_reach_of_a_plain_delay() -> None:
    """Why ``_Instant`` exists: the case a Hypothesis round met."""
    now, at = 3.0380555555555557, 7.054722222222222
    delay = at - now
    reached = {now + float(np.nextafter(delay, np.inf * k)) for k in (-1, 1)} | {now + delay}
    assert at not in reached


def test_notify_tells_ends_directly_and_in_order_behind_an_event() -> None:
    """``FlowNetwork.notify``: at an instant with nothing else, a notified flow's end is
    told without a ``done`` event; once a flow of the wake-up needs its event (someone
    made ``done``), the notified ends after it go through SimPy too, after it, while
    the quiet ends of the same wake-up stay quiet."""
    env = simpy.Environment()
    net = FlowNetwork(env, np.full(8, 100 * MB), np.full(8, 100 * MB), np.full(8, 0.005),
                      solver="compiled")  # fmt: skip
    calls: list[tuple[str, float, bool]] = []
    latch = net.latches(1)
    held = net.send(0, 1, MB)  # id 0: its done is made (someone holds it)
    held.done.callbacks.append(lambda e: calls.append(("held", env.now, e.ok)))
    quiet = [net.send(0, d, MB) for d in (2, 3)]  # ids 1, 2: one latch, with a later one
    later = net.send(0, 4, 3 * MB)  # id 3: ends after them, so they end quietly
    for flow in (*quiet, later):
        assert net.join_latch(
            flow, latch, lambda f: calls.append(("quiet", f.end_s, True)),
            lambda f, ok: calls.append(("latch", env.now, ok)),
        )  # fmt: skip
    told = net.send(0, 5, MB)  # id 4: notified, behind the held one in the same instant
    net.notify(told, lambda f, ok: calls.append(("told", env.now, ok)))
    alone = net.send(6, 7, MB)  # alone on its links: an instant of its own
    net.notify(alone, lambda f, ok: calls.append(("alone", env.now, ok)))
    env.run()
    assert calls[0] == ("alone", pytest.approx(0.01 + 0.01), True)  # 1 MB at 100 MB/s
    assert alone._done is None  # alone at its instant: told without an event
    shared = calls[1:]
    names = [name for name, _, _ in shared]
    assert names == ["quiet", "quiet", "held", "told", "latch"]  # quiet ones in the wake-up
    assert len({at for _, at, _ in shared[:4]}) == 1  # one instant
    assert [q._done for q in quiet] == [None, None]  # no event made for the quiet ends
    assert told._done is not None  # behind an event: told through one
    assert all(ok for _, _, ok in calls)
