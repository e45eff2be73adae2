"""The pieces of groups run alone (:mod:`sim.engine.netclock.alone_groups`): a group's
part, the component its parts run in (one loop over their flows), and the order in which
a component's sends and ends are counted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import simpy

from protocols.contract import Flows
from sim.core.sets import unique_ints
from sim.engine.netclock.alone import (
    DELIVERED,
    FAILED,
    TIMED_OUT,
    AlonePlan,
    AloneRun,
    LoopState,
)  # fmt: skip
from sim.network import FlowNetwork


def ended(outcome: np.ndarray) -> np.ndarray:
    """Which flows were sent as flows and ended (delivered, failed, timed out: the
    outcomes 1 to 3, not refused or broken)."""
    return (outcome >= DELIVERED) & (outcome <= TIMED_OUT)


assert (DELIVERED, FAILED, TIMED_OUT) == (1, 2, 3)  # the range ended tests


class Part:
    """One group of a component: its plan, flows, start, component, where its flows are
    in the component's arrays, and its end."""

    __slots__ = ("comp", "end", "flows", "span", "t0")

    def __init__(self, flows: Flows, t0: float, end: simpy.Event) -> None:
        self.flows, self.t0, self.end = flows, t0, end
        self.span = (0, 0)
        self.comp: Component | None = None


class CountOrder:
    """A component's run's flows in the order they are counted: by send instant
    (``by_send``, ``send_times``) and, those sent as flows that ended, by end instant
    then send order (``ends``, ``end_times``); how many of each are counted so far."""

    __slots__ = ("by_send", "end_times", "ends", "ends_done", "send_times", "sends_done")

    def __init__(
        self, by_send: np.ndarray, send_times: np.ndarray, ends: np.ndarray, end_times: np.ndarray
    ) -> None:
        self.by_send, self.send_times, self.ends, self.end_times = (
            by_send, send_times, ends, end_times,
        )  # fmt: skip
        self.sends_done = self.ends_done = 0


class Component:
    """Groups running alone together (one, unless a member joined a second before the
    first ended): the loop over their flows, presence at the start, the changes of
    presence seen since and those the churn schedule announces up to ``horizon``, the
    run they give, what of it is counted, and each group's end."""

    __slots__ = ("_run", "alone", "ends_counted", "expected", "horizon", "live", "order",
                 "parts", "pending", "present", "seen", "sends_counted", "version",
                 "waiting", "wake")  # fmt: skip

    def __init__(self) -> None:
        self.parts: list[Part] = []
        #: the changes of its members' presence seen since the start (instant, peer, up)
        self.seen: list[tuple[float, int, bool]] = []
        #: those announced and not seen yet, up to ``horizon``
        self.expected: list[tuple[float, int, bool]] = []
        self.horizon = 0.0
        self.present = np.zeros(0, dtype=bool)
        self.sends_counted = np.zeros(0, dtype=bool)
        self.ends_counted = np.zeros(0, dtype=bool)
        self.version = 0
        #: groups whose process has not yet seen their end
        self.waiting = 0
        self.alone: AlonePlan
        #: the loop run to the end (:attr:`run`), and one run only as far as asked
        #: (``live``, the bytes in flight at a sample; None: not asked since the last start)
        self._run: AloneRun
        self.live: LoopState | None = None
        #: while a worker thread times it: what gives :attr:`run` (it waits for the
        #: worker), and the instant before its first end when its ends are armed
        self.pending: Callable[[], AloneRun] | None = None
        self.wake = math.inf
        #: ``run``'s sends and ends in time order, and how far they are counted (None:
        #: not sorted since the last run)
        self.order: CountOrder | None = None

    @property
    def run(self) -> AloneRun:
        """The loop run to the end (waiting for the worker thread timing it, if one is)."""
        if self.pending is not None:
            finish, self.pending = self.pending, None
            self._run = finish()
        return self._run

    @run.setter
    def run(self, run: AloneRun) -> None:
        """Its run, timed here (no worker thread has it any more)."""
        self.pending = None
        self._run = run

    @property
    def changes(self) -> list[tuple[float, int, bool]]:
        """Every change the loop takes: those seen, then those announced."""
        return self.seen + self.expected

    def add(self, part: Part, present: np.ndarray, net: FlowNetwork, delay_s: Any) -> None:
        """Join ``part`` (``present``: who is present now), with a new loop. Its
        peers new to the component have no flow before now: their presence now is their
        presence at the component's start, for the loop."""
        if not self.parts:
            self.present = present.copy()
        else:
            known = np.zeros(present.size, dtype=bool)
            for old in self.parts:
                known[old.flows.src] = True
                known[old.flows.dst] = True
            peers = unique_ints(np.r_[part.flows.src, part.flows.dst])
            new = peers[~known[peers]]
            self.present[new] = present[new]
        self.parts.append(part)
        self.waiting += 1
        n = part.flows.src.size
        self.sends_counted = np.r_[self.sends_counted, np.zeros(n, dtype=bool)]
        self.ends_counted = np.r_[self.ends_counted, np.zeros(n, dtype=bool)]
        self.plan(net, delay_s)

    def plan(self, net: FlowNetwork, delay_s: Any) -> None:
        """The loop over its groups' flows (:class:`AlonePlan`), each group's place in it."""
        self.alone = AlonePlan([(p.flows, p.t0) for p in self.parts], net, delay_s)
        for p, span in zip(self.parts, self.alone.bounds, strict=True):
            p.span, p.comp = span, self


def in_time_order(run: AloneRun) -> CountOrder:
    """``run``'s flows by send instant (its send order: the loop's clock only moves on;
    never sent: last), and those that ended by (end instant, send order)."""
    seq = run.seq
    sent = seq >= 0
    by_send = np.empty(seq.size, dtype=np.int64)
    by_send[seq[sent]] = np.flatnonzero(sent)
    by_send[np.count_nonzero(sent) :] = np.flatnonzero(~sent)
    ends = by_send[ended(run.outcome[by_send])]  # in send order
    ends = ends[np.argsort(run.end_at[ends], kind="stable")]
    return CountOrder(by_send, run.sent_at[by_send], ends, run.end_at[ends])


def sends_after(comp: Component, peer: int, now: float) -> bool:
    """Whether a flow of ``comp`` uses ``peer``'s links after ``now`` (sent, not refused,
    ending later)."""
    run, alone = comp.run, comp.alone
    mine = (alone.src == peer) | (alone.dst == peer)
    return bool((mine & ended(run.outcome) & (run.end_at > now)).any())


__all__ = ["Component", "CountOrder", "Part", "ended", "in_time_order", "sends_after"]
