"""The observer: what a run measures and when it stops, the same on every clock.

One :class:`Observer` per run holds the recorder (rows every ``metrics.every``), the
thresholds and their first crossings (:class:`~sim.engine.observe.targets.Targets`), the stop
rule with its reason, the numerical-health check and the interrupt. It also owns the
exact-target tracker (:mod:`sim.engine.observe.tracker`), which reports crossings and NaNs
between samples (:meth:`Observer.stop_now`). The engine's clocks call
:meth:`Observer.measure` whenever they measure the state.

Stop reasons (``stop_reason`` in the summary), checked in this order at each sample:

- ``nan``: a NaN or inf appeared in the estimates (``nan``: round, time, first peer);
- ``interrupted``: the run's ``interrupt`` event was set (the run still ends with a
  complete result, at this sample). The run's environment (:meth:`Observer.environment`)
  also looks at the event every :data:`POLL_EVENTS` events, so that a run that goes
  long without a sample (a long round of flows under heavy churn, a continuous protocol
  sampled rarely) ends within a few milliseconds all the same, as a target crossed
  between samples does;
- ``target``: ``stop.target_var`` crossed on ``stop.target_on``;
- ``max_rounds``, ``max_time``: a bound was reached.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import simpy

from protocols.base import Protocol
from protocols.contract import State
from sim.core.backend import to_numpy
from sim.engine.observe.targets import Targets
from sim.engine.observe.tracker import Masks, Now, Tracker
from sim.engine.observe.training import TrainingProbe
from sim.engine.recorder import Recorder, Sample, statistics
from sim.kernels.bounds import all_within
from sim.model.scenario.models import Scenario
from sim.model.training import Trainer

#: Every value ``stop_reason`` can take.
STOP_REASONS = ("target", "max_time", "max_rounds", "nan", "interrupted")
#: SimPy events between two looks at the interrupt (a look costs a few nanoseconds, an
#: event microseconds).
POLL_EVENTS = 256


class Observer:
    """Recorder, thresholds, stop rule and health check of one run.

    Parameters
    ----------
    scenario, seed
        The run's scenario (``stop``, ``metrics``) and seed (the rows' ``seed``).
    protocol, state
        The run's protocol (:meth:`~protocols.base.Protocol.estimate`, ``conserved_mean``)
        and state.
    mean0
        The initial mean (float64, (dim,)) that ``err_init`` and ``mean_drift`` refer to.
    interrupt
        Optional event; once set, the run ends at its next sample (``interrupted``).
    trainer
        With a ``workload``: the run's trainer, whose metrics are recorded beside
        ``var`` and whose loss targets are timed (:mod:`sim.engine.observe.training`).
    """

    def __init__(
        self,
        scenario: Scenario,
        seed: int,
        protocol: Protocol,
        state: State,
        mean0: Any,
        interrupt: threading.Event | None = None,
        trainer: Trainer | None = None,
    ) -> None:
        self.stop = scenario.stop
        self.recorder = Recorder(seed, scenario.metrics.every)
        self.targets = Targets(scenario)
        self.training = None if trainer is None else TrainingProbe(trainer, self.targets)
        if self.training is not None:
            self.recorder.workload_columns = self.training.columns
        self.protocol, self.state, self.mean0, self.interrupt = protocol, state, mean0, interrupt
        self.tracker: Tracker | None = None
        self.reason: str | None = None
        self.nan: dict[str, Any] | None = None
        #: Called once when a reason is set between samples (the network clock ends the
        #: run at that instant).
        self.on_halt: Callable[[], None] | None = None
        self.last: Sample | None = None

    def track(self, masks: Masks, now: Now, events: bool) -> Tracker:
        """Start the exact-target tracker (see :class:`~sim.engine.observe.tracker.Tracker`);
        protocols with ``events`` report their events to it."""
        tracker = Tracker(self.protocol, self.state, self.targets, masks, now,
                          lambda reason: self.stop_now(reason, tracker.nan), events)  # fmt: skip
        self.protocol.watcher = tracker if events and not tracker.off else None

        def retire() -> None:  # nothing left to time: stop listening to the events
            self.protocol.watcher = None

        self.targets.on_done = retire
        self.tracker = tracker
        return tracker

    def measure(
        self,
        present: np.ndarray,
        exists: np.ndarray,
        rounds: int,
        time_s: float,
        traffic: tuple[float, int],
        record: bool = False,
    ) -> bool:
        """:meth:`sample` the run's state, the tracker brought to ``time_s`` before and
        resynchronised after. Returns True when the run ends."""
        if self.tracker is not None:
            self.tracker.advance(time_s)
        done = self.sample(self.state, present, exists, rounds, time_s, traffic, record)
        if self.tracker is not None:
            self.tracker.observed(self.last, time_s)
        return done

    def environment(self) -> simpy.Environment:
        """The run's SimPy environment. With an ``interrupt``, one that looks at it every
        :data:`POLL_EVENTS` events and, once it is set, ends the run as a reason found
        between samples does (:meth:`stop_now`); the events and their order are those
        of a plain environment."""
        if self.interrupt is None:
            return simpy.Environment()
        return PolledEnvironment(self._look_at_interrupt)

    def _look_at_interrupt(self) -> None:
        if self.interrupt is not None and self.interrupt.is_set():
            self.stop_now("interrupted")

    def halt_event(self, env: simpy.Environment) -> simpy.Event:
        """An event that succeeds when a reason is found between samples (the network
        clock runs until it, to end the run at that instant)."""
        halt = env.event()

        def succeed() -> None:
            if not halt.triggered:
                halt.succeed()

        self.on_halt = succeed
        return halt

    def sample(
        self,
        state: State,
        present: np.ndarray,
        exists: np.ndarray,
        rounds: int,
        time_s: float,
        traffic: tuple[float, int],
        record: bool = False,
    ) -> bool:
        """Measure the state at (rounds, time_s); record a row when due, when ``record``
        or when the run ends here. Returns True when the run ends.

        A sample that nothing reads (no row due, no variance threshold pending, no
        workload, the tracker off) only checks that ``var`` is finite, which the
        numerical-health check needs: from the estimates' extremes, when they bound it
        (:func:`variance_is_finite`); else, or when the run ends here, it measures in full.
        """
        estimate = self.protocol.estimate(state)
        if not record and self._unread(time_s) and variance_is_finite(estimate):
            done = self.decide(rounds, time_s)
            if not done:
                return False  # else the run ends here: its row, from the full statistics
        rows = None if exists.all() else np.flatnonzero(exists)
        conserved = self.protocol.conserved_mean(state, rows)
        stats = statistics(estimate, present, self.mean0, exists, conserved)
        self.last = stats
        if not math.isfinite(stats.var) and exists.any() and self.nan is None:
            self._locate_nan(estimate, exists, rounds, time_s)
        self.targets.below("var", stats.var, rounds, time_s)
        self.targets.below("var_alive", stats.var_alive, rounds, time_s)
        if self.training is not None:
            self.training.check(stats, rounds, time_s)
        done = self.decide(rounds, time_s)
        if record or done or self.recorder.due(time_s):
            alive = float(present.sum() / max(1, exists.sum()))
            workload = () if self.training is None else self.training.row(estimate, stats, exists)
            self.recorder.record(rounds, time_s, stats, alive, traffic, workload)
        return done

    def _unread(self, time_s: float) -> bool:
        """True when a sample at ``time_s`` would be read by nothing but the health check
        and the stop rule: no row due, no variance threshold left, no workload, the
        exact-target tracker off."""
        tracker = self.tracker
        return (
            self.training is None
            and not self.targets.active
            and (tracker is None or tracker.off)
            and not self.recorder.due(time_s)
        )

    def decide(self, rounds: int, time_s: float) -> bool:
        """Apply the stop rule at (rounds, time_s); True when the run ends."""
        if self.reason is None:
            stop = self.stop
            if self.interrupt is not None and self.interrupt.is_set():
                self.reason = "interrupted"
            elif self.targets.stop_reached:
                self.reason = "target"
            elif stop.max_rounds is not None and rounds >= stop.max_rounds:
                self.reason = "max_rounds"
            elif stop.max_time is not None and time_s >= stop.max_time:
                self.reason = "max_time"
        return self.reason is not None

    def stop_now(self, reason: str, nan: dict[str, Any] | None = None) -> None:
        """End the run for ``reason`` (``target``, ``nan``, ``interrupted``) found
        between samples."""
        if nan is not None and self.nan is None:
            self.nan = nan
        if self.reason is None:
            self.reason = reason
            if self.on_halt is not None:
                self.on_halt()

    def progress(self, rounds: int, time_s: float) -> float | None:
        """How far the run is towards its bounds (0 … 1), or None without bounds."""
        parts = []
        if self.stop.max_rounds:
            parts.append(rounds / self.stop.max_rounds)
        if self.stop.max_time:
            parts.append(time_s / self.stop.max_time)
        return min(1.0, max(parts)) if parts else None

    def fields(self) -> dict[str, Any]:
        """The summary fields the observer owns: targets, ``stop_reason``, ``nan``, and
        with a workload the training fields (:meth:`TrainingProbe.fields`)."""
        fields = {**self.targets.fields(), "stop_reason": self.reason, "nan": self.nan}
        if self.training is not None:
            fields.update(self.training.fields())
        return fields

    def _locate_nan(self, estimate: Any, exists: np.ndarray, rounds: int, time_s: float) -> None:
        """A sample's statistics are not finite: find the first existing peer whose
        estimate is (lowest index); stop with ``nan`` when there is one."""
        finite = np.isfinite(to_numpy(estimate)).all(axis=1)
        bad = np.flatnonzero(~finite & exists)
        if bad.size:
            self.nan = {"round": int(rounds), "time_s": float(time_s), "peer": int(bad[0])}
            self.reason = self.reason or "nan"


class PolledEnvironment(simpy.Environment):
    """A SimPy environment that calls ``poll()`` before every :data:`POLL_EVENTS`-th
    event it processes (``poll`` must not schedule anything it would not otherwise)."""

    def __init__(self, poll: Callable[[], None]) -> None:
        super().__init__()
        self._poll, self._left = poll, POLL_EVENTS

    def step(self) -> None:
        """Process the next event (see :meth:`simpy.Environment.step`)."""
        self._left -= 1
        if not self._left:
            self._left = POLL_EVENTS
            self._poll()
        super().step()


#: Estimates no larger than this in magnitude give a finite variance: the statistics'
#: float64 sums of squares are at most N·(2·1e100)² for N elements, far below the
#: largest float for any N a machine holds.
FINITE_BOUND = 1e100


def variance_is_finite(estimate: Any) -> bool:
    """True when every estimate is finite and at most :data:`FINITE_BOUND` in magnitude,
    so that :func:`~sim.engine.recorder.statistics` gives a finite ``var``; False when
    unsure (a NaN or inf, a huge value, no element): then the statistics tell."""
    return all_within(estimate, FINITE_BOUND)
