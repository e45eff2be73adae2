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

from sim.engine.observe.floating import held_floating_errors
from sim.engine.resources import guard
from sim.engine.result import RunResult
from sim.engine.schedules import Progress, engine_for
from sim.engine.summary import summarize
from sim.model.scenario.models import Scenario


def run(
    scenario: Scenario,
    seed: int | None = None,
    progress: Progress | None = None,
    interrupt: threading.Event | None = None,
) -> RunResult:
    """Run ``scenario`` once with ``seed`` (default: the scenario's) and return the result.

    ``interrupt``: once set (from another thread, a signal handler), the run ends at its
    next sample with ``stop_reason: interrupted`` and a complete result.
    """
    seed = scenario.seed if seed is None else int(seed)
    guard(scenario)  # refuse a run that would not fit in memory, warn when it takes hours
    started = time.perf_counter()
    with held_floating_errors() as errors:  # a NaN is said once, by its stop message
        engine = engine_for(scenario, seed, interrupt)
        engine.simulate(progress)
    errors.release(stopped_at_nan=engine.observer.nan is not None)
    wall = time.perf_counter() - started
    metrics = engine.recorder.frame()
    summary = summarize(
        scenario, seed, engine.rounds, metrics, wall, engine.observer.fields(),
        engine.protocol.counters,
    )  # fmt: skip
    return RunResult(
        metrics=metrics,
        summary=summary,
        scenario=scenario.model_dump(mode="json"),
        peers=engine.peers,
        state=engine.state,
        extra_tables=engine.tables(),
    )


__all__ = ["run"]
