"""Record the groups an async run hands the network clock, and run one again on the
clock's events in an environment of its own: what the equivalence tests and
``bench/bench_alone.py`` compare :mod:`sim.engine.netclock.alone` with.

:func:`recorded_groups` runs a scenario with every group on the clock's events
(:attr:`NetworkClock.groups_alone` off) and keeps each group that ended: its start,
flows, presence at the start and end. :func:`on_the_clock` runs a group's flows again
from its start on the same links, a flow per piece (``pieces``, each flow recorded) or
as the clock does by default, with preemptions at given instants.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import simpy

from protocols.contract import Flows, GroupPlan
from sim.engine.netclock.clock import NetworkClock
from sim.network import FlowNetwork


def recorded_groups(run: Any) -> tuple[tuple[Any, ...], list[dict[str, Any]]]:
    """Call ``run()`` (a :func:`sim.run`) with every group on the clock's events; the
    network's arguments after the environment, and each group that ended, as
    ``{"t0", "flows", "present", "end"}``."""
    links: list[tuple[Any, ...]] = []
    groups: list[dict[str, Any]] = []
    net_init, clock_run, alone = FlowNetwork.__init__, NetworkClock.run, NetworkClock.groups_alone

    def network_init(net: Any, env: Any, *args: Any) -> None:
        links.append(args)
        net_init(net, env, *args)

    def recording(clock: Any, plan: Any, idle_s: float = 0.0) -> Any:
        flows = plan.flows()
        plan.flows = lambda: flows
        group = {"t0": clock.env.now, "flows": flows, "present": clock.present.copy()}
        yield from clock_run(clock, plan, idle_s)
        group["end"] = clock.env.now
        groups.append(group)

    FlowNetwork.__init__ = network_init  # type: ignore[method-assign,assignment]
    NetworkClock.run = recording  # type: ignore[method-assign,assignment]
    NetworkClock.groups_alone = False
    try:
        run()
    finally:
        FlowNetwork.__init__ = net_init  # type: ignore[method-assign]
        NetworkClock.run = clock_run  # type: ignore[method-assign]
        NetworkClock.groups_alone = alone
    return links[0], groups


def on_the_clock(
    net_args: tuple[Any, ...],
    flows: Flows,
    t0: float,
    present: np.ndarray,
    pieces: bool = True,
    preemptions: Sequence[tuple[float, int]] = (),
) -> dict[str, Any]:
    """The network clock's run of ``flows`` from ``t0`` on a network of ``net_args``
    (``FlowNetwork``'s arguments after the environment), a flow per piece with every
    flow's send and end instant (``pieces``) or as by default; members ``preemptions``
    (instant, peer) go down meanwhile. Returns the end, ``delivered``, ``timed_out``,
    ``messages``, ``refused``, ``sent_at``, ``end_at`` (NaN: not sent as a flow) and
    the clock."""
    env = simpy.Environment(initial_time=t0)
    net = FlowNetwork(env, *net_args)
    clock = NetworkClock(env, net, present.copy(), np.zeros(present.size))
    sent: list[Any] = []
    if pieces:
        clock.streams = False
        raw = net.send

        def send(*args: Any, **kwargs: Any) -> Any:
            flow = raw(*args, **kwargs)
            sent.append(flow)
            return flow

        net.send = send  # type: ignore[method-assign]
    for at, peer in preemptions:
        timer = env.timeout(at - t0)
        timer.callbacks.append(functools.partial(_preempt, clock, peer))
    plan = GroupPlan(np.zeros(0, dtype=np.intp), _never, lambda: flows)
    env.run(env.process(clock.run(plan)))
    n = flows.src.size
    sent_at, end_at = np.full(n, math.nan), np.full(n, math.nan)
    for flow in sent:
        sent_at[flow.tag], end_at[flow.tag] = flow.start_s, flow.end_s
    return {
        "end": env.now, "delivered": plan.delivered, "timed_out": plan.timed_out,
        "messages": clock.messages, "refused": clock.failed_messages, "sent_at": sent_at,
        "end_at": end_at, "clock": clock,
    }  # fmt: skip


def _preempt(clock: NetworkClock, peer: int, _event: Any) -> None:
    clock.preempt(np.array([peer]))


def _never(state: Any, lost: np.ndarray) -> np.ndarray:
    raise AssertionError("a replayed group is not settled")
