"""Network-clock engines whose state changes between samples (continuous time, async).

The run's process starts the schedule (:meth:`SampledEngine.start`) once the churn's
time-0 step has applied and the first row is recorded, then only samples: every
``metrics.every`` seconds (and at ``stop.max_rounds`` seconds) it brings the state to
now (:meth:`~sim.engine.network.NetworkEngine.sync`) and measures, until a stop rule
fires. ``rounds`` counts whole seconds elapsed. The exact-target tracker times crossings
between samples (its predicted crossings are timers in simulated time).

With a ``workload`` the run's gradient steps (:class:`~sim.engine.training_net.
GradientSlots`) are built with the clock; the schedule uses them (gradient clocks on an
edge clock, the local work of the peer loops), and the result gets the ``training``
table (each peer's gradient steps). Training metrics are sampled with the rest; a
sample at T then waits one zero-delay timeout, so that the steps whose slots end at T
(scheduled before it) are in its row.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Generator
from typing import Any, ClassVar

import simpy

from sim.engine.base import Progress
from sim.engine.netclock import NetworkClock
from sim.engine.network import NetworkEngine
from sim.engine.observe.wiring import timer
from sim.engine.training_net import gradient_slots


class SampledEngine(NetworkEngine):
    """Starts its schedule, then samples every ``metrics.every`` seconds.

    A subclass implements :meth:`start` and
    :meth:`~sim.engine.network.NetworkEngine.update_counters`.
    """

    #: With a workload: every present peer steps every ``compute`` seconds, endlessly
    #: (edge clocks), rather than in runs of ``local_steps`` the schedule starts.
    gradient_clock: ClassVar[bool] = False

    def process(self, progress: Progress | None) -> Generator[simpy.Event, Any, None]:
        """Start the schedule, then sample until a stop rule fires."""
        clock = self.network_clock()
        self.gradients = gradient_slots(self, clock, self.gradient_clock)
        stop, every = self.scenario.stop, self.scenario.metrics.every
        yield self.env.timeout(0)  # let the churn process apply its time-0 step first
        done = self.observe(clock.present, first=True)
        self.start(clock)
        self.tracker.schedule = timer(self.env)
        k = 0
        while not done:
            k += 1
            at = k * every
            if stop.max_rounds is not None and self.env.now < stop.max_rounds:
                at = min(at, float(stop.max_rounds))
            yield self.env.timeout(max(at - self.env.now, 0.0))
            if self.gradients is not None:  # the steps that end now come first
                yield self.env.timeout(0)
            self.update_counters()
            self.sync()
            done = self.observe(clock.present)
            self.report(progress)

    @abstractmethod
    def start(self, clock: NetworkClock) -> None:
        """Start the schedule's processes (after the first row)."""

    def now(self) -> tuple[int, float]:
        """(round, time) of a change now: rounds are whole seconds."""
        now = float(self.env.now)
        return math.floor(now + 1e-9), now
