"""The shared part of the ``schedule: async`` engines: one SimPy loop per present peer.

:class:`PeerLoopEngine` holds the loops, the step book (steps per peer, phase times) and
each peer's local work per step (:meth:`PeerLoopEngine.local_work`); it starts a fresh
loop when a peer is present again and stops a peer's loop the instant it is preempted.

Local work is ``compute`` + ``delay`` seconds. With a ``workload`` it is ``local_steps``
H gradient steps of ``compute`` seconds each, every step applied at the end of its slot
(:class:`~sim.engine.training_net.GradientSlots`: peers whose slots end at one instant
step in one batch), then the ``delay``: H·compute + delay seconds before the averaging
step, as without a workload for H = 1. A preempted peer's slot under way is cancelled
(no step); a returning peer's fresh loop starts with fresh slots.

A subclass implements :meth:`_loop` (one peer's loop) and extends :meth:`down` with what
else a preemption ends (a group, a mailbox).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from sim.engine.sampled import SampledEngine
from sim.engine.steps import COLUMNS, StepBook
from sim.model.scenario.models import Scenario

#: Matchmaking counts of a run without matchmaking.
NO_MATCHMAKING = dict.fromkeys(("messages", "disbanded", "rejected"), 0)


class PeerLoopEngine(SampledEngine):
    """Per-peer loops under ``schedule: async`` (subclasses: the group and mailbox engines)."""

    schedules = frozenset({"async"})
    reports_events = True  # steps change rows between samples

    def __init__(
        self, scenario: Scenario, seed: int, interrupt: threading.Event | None = None
    ) -> None:
        super().__init__(scenario, seed, interrupt)
        self.book = StepBook(self.exists.size)
        self.recorder.extra_columns = COLUMNS
        self.recorder.extra = lambda: self.book.row(float(self.env.now), self.exists)
        table = self.peers
        compute, self.delay_s = table["compute"].to_numpy(float), table["delay_s"].to_numpy(float)
        self.compute_s = compute
        workload = scenario.workload
        #: Gradient steps per averaging step with a workload (``local_steps``).
        self.local_steps = int(getattr(workload, "local_steps", 1))
        self.local_s = (
            compute * (self.local_steps if self.trainer is not None else 1) + self.delay_s
        )
        self.loops: dict[int, simpy.Process] = {}

    def local_work_s(self, peer: int) -> float:
        """Seconds of ``peer``'s next local work without a workload: its ``compute``
        (this step's, under ``compute_jitter``) + its ``delay``."""
        if not self.jitter.varies:
            return float(self.local_s[peer])
        return self.jitter.compute_s(peer, float(self.compute_s[peer])) + float(self.delay_s[peer])

    def local_work(self, peer: int) -> Generator[simpy.Event, Any, None]:
        """``peer``'s local work before an averaging step (see the module doc)."""
        gradients = self.gradients
        if gradients is None:
            yield self.env.timeout(self.local_work_s(peer))
            return
        yield gradients.run(peer, self.local_steps)
        delay = self.delay_s[peer]
        if delay > 0:
            yield self.env.timeout(delay)

    def _loop(self, peer: int) -> Generator[simpy.Event, Any, None]:
        """One peer's loop, from its return (or the start) until it is preempted."""
        raise NotImplementedError

    # -- presence (a listener of the network clock) ----------------------------------------
    def down(self, peers: np.ndarray) -> None:
        """``peers`` were preempted: their loops stop now."""
        for p in peers.tolist():
            self.stop_loop(p)

    def stop_loop(self, peer: int) -> None:
        """Interrupt ``peer``'s loop, if it runs."""
        loop = self.loops.pop(peer, None)
        if loop is not None and loop.is_alive:
            loop.interrupt()

    def up(self, peers: np.ndarray) -> None:
        """``peers`` are present again: each starts a fresh loop."""
        for p in peers.tolist():
            self.loops[p] = self.env.process(self._loop(p))

    def update_counters(self) -> None:
        """Whole seconds elapsed; bytes the network moved; messages: flows started and
        refused ones."""
        self.clock.settle()  # pieces that ended inside chunks count from their end
        net = self.clock.net
        self.rounds = math.floor(self.env.now + 1e-9)
        self.bytes_sent = net.bytes_sent_total
        self.messages = net.flows_started + self.clock.failed_messages
