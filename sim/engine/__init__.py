"""The runner: ``run(scenario, seed)`` builds the run's engine and runs it.

The engine (:mod:`sim.engine.schedules`) follows the scenario's clock and the protocol's class:
synchronous rounds, barrier rounds of flows, or a continuous-time process on the
network clock. It builds the run (Ciw-style: resolve peers → draw initial vectors →
build the protocol and churn with their own generators), runs its schedule until the
observer's stop rule fires (:mod:`sim.engine.observe`), and this module summarizes.
"""

from __future__ import annotations

import threading
import time

from sim.core.errors import ScenarioError
from sim.engine.observe.floating import held_floating_errors
from sim.engine.resources import guard
from sim.engine.result import RunResult
from sim.engine.schedules import Progress, engine_for
from sim.engine.summary import summarize
from sim.engine.trace import TraceOptions, Tracer
from sim.model.scenario.models import Scenario


def run(
    scenario: Scenario,
    seed: int | None = None,
    progress: Progress | None = None,
    interrupt: threading.Event | None = None,
    trace: TraceOptions | None = None,
) -> RunResult:
    """Run ``scenario`` once with ``seed`` (default: the scenario's) and return the result.

    ``interrupt``: once set (from another thread, a signal handler), the run ends at its
    next sample with ``stop_reason: interrupted`` and a complete result.

    ``trace``: record the run's timeline (:mod:`sim.engine.trace`) into
    ``RunResult.trace``; network clock only (a ``ScenarioError`` on ``trace`` otherwise).
    """
    seed = scenario.seed if seed is None else int(seed)
    if trace is not None and scenario.clock != "network":
        raise ScenarioError("trace", f"clock: {scenario.clock}", "a scenario with clock: network")
    guard(scenario)  # refuse a run that would not fit in memory, warn when it takes hours
    started = time.perf_counter()
    with held_floating_errors() as errors:  # a NaN is said once, by its stop message
        engine = engine_for(scenario, seed, interrupt)
        tracer = None if trace is None else Tracer(trace, seed, engine.exists.size)
        engine.tracer = tracer
        engine.simulate(progress)
        if tracer is not None:
            tracer.close(float(engine.env.now))
    errors.release(stopped_at_nan=engine.observer.nan is not None)
    wall = time.perf_counter() - started
    metrics = engine.recorder.frame()
    summary = summarize(
        scenario, seed, engine.rounds, metrics, wall, engine.observer.fields(),
        engine.protocol.counters,
    )  # fmt: skip
    summary.update(engine.summary_fields())  # the schedule's own fields, after the counters
    return RunResult(
        metrics=metrics,
        summary=summary,
        scenario=scenario.model_dump(mode="json"),
        peers=engine.peers,
        state=engine.state,
        extra_tables=engine.tables(),
        trace=None if tracer is None else tracer.events(),
        trace_truncated_at_s=None if tracer is None else tracer.truncated_at_s,
    )


__all__ = ["run"]
