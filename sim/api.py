"""``sim.run``: the command line's ``avsim run`` as a function.

``sim.run(sc, seed=0)`` returns one :class:`~sim.engine.result.RunResult`, as
:func:`sim.engine.run` does. ``repeats=k`` makes ``k`` runs with seeds ``seed, seed + 1,
…`` and returns them as a list (even for ``k = 1``), ready for
:func:`sim.output.run_folder.write_result`. The scenario may be a :class:`Scenario`, a scenario file
or a mapping; ``overrides`` are the CLI's ``--set`` as a ``{dotted.key: value}`` mapping.
Nothing is written unless ``out`` is given. ``trace=TraceOptions(...)`` records each
run's timeline (:mod:`sim.engine.trace`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, overload

from sim.core.errors import ScenarioError
from sim.engine.result import RunResult
from sim.engine.trace import TraceOptions
from sim.model.scenario import Scenario, load_scenario, scenario_from_mapping

#: ``progress(fraction)``: the fraction of all the runs done, from 0 to 1.
Progress = Callable[[float], None]
ScenarioLike = Scenario | Mapping[str, Any] | str | os.PathLike[str]


@overload
def run(
    scenario: ScenarioLike,
    seed: int | None = None,
    progress: Progress | None = None,
    *,
    repeats: None = None,
    overrides: Mapping[str, Any] | None = None,
    out: str | os.PathLike[str] | None = None,
    force: bool = False,
    trace: TraceOptions | None = None,
    **engine_options: Any,
) -> RunResult: ...


@overload
def run(
    scenario: ScenarioLike,
    seed: int | None = None,
    progress: Progress | None = None,
    *,
    repeats: int,
    overrides: Mapping[str, Any] | None = None,
    out: str | os.PathLike[str] | None = None,
    force: bool = False,
    trace: TraceOptions | None = None,
    **engine_options: Any,
) -> list[RunResult]: ...


def run(
    scenario: ScenarioLike,
    seed: int | None = None,
    progress: Progress | None = None,
    *,
    repeats: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    out: str | os.PathLike[str] | None = None,
    force: bool = False,
    trace: TraceOptions | None = None,
    **engine_options: Any,
) -> RunResult | list[RunResult]:
    """Run a scenario once, or ``repeats`` times, and optionally write its result folder.

    Parameters
    ----------
    scenario
        A :class:`Scenario`, a scenario file path or a scenario mapping.
    seed
        Seed of the (first) run [default: the scenario's ``seed``].
    progress
        Called with the fraction of the work done (0 to 1) as the runs advance.
    repeats
        Number of runs, with seeds ``seed, seed + 1, …``; the result is then a list.
        ``None`` (default): one run, returned as a :class:`RunResult`. Pass
        ``repeats=sc.repeats`` for the CLI's default.
    overrides
        ``{dotted.key: value}`` applied to the scenario first (the CLI's ``--set``).
    out
        Result folder to write (all the runs); ``None`` (default) writes nothing.
    force
        Overwrite a non-empty ``out``.
    trace
        Record each run's timeline as Chrome trace events (``RunResult.trace``, and
        ``trace.json`` in ``out``): :class:`~sim.engine.trace.TraceOptions` says which
        peers and how many events at most. Network clock only.
    **engine_options
        Passed on to :func:`sim.engine.run`.

    Returns
    -------
    RunResult or list of RunResult
        One result without ``repeats``, else one per repeat in seed order.

    Raises
    ------
    ScenarioError
        When the scenario, an override, ``seed`` or ``repeats`` is invalid, or on
        ``trace`` when the scenario is on the rounds clock.
    ResultExistsError
        When ``out`` is not empty and ``force`` is false (checked before running).
    """
    from sim.engine import run as run_once
    from sim.output.run_folder import check_folder, write_result

    sc = resolve(scenario, overrides)
    first = sc.seed if seed is None else _count("seed", seed, minimum=0)
    count = 1 if repeats is None else _count("repeats", repeats, minimum=1)
    if out is not None:
        check_folder(out, force)
    results = []
    for k in range(count):
        step = None if progress is None else _scaled(progress, k, count)
        results.append(run_once(sc, seed=first + k, progress=step, trace=trace, **engine_options))
    if out is not None:
        write_result(results, out, force=force)
    return results[0] if repeats is None else results


def resolve(scenario: ScenarioLike, overrides: Mapping[str, Any] | None = None) -> Scenario:
    """The validated scenario of a :class:`Scenario`, a file path or a mapping, with
    ``overrides`` applied."""
    changes = dict(overrides or {})
    if isinstance(scenario, Scenario):
        if not changes:
            return scenario
        return scenario_from_mapping(scenario.model_dump(mode="json"), changes)
    if isinstance(scenario, Mapping):
        return scenario_from_mapping(dict(scenario), changes)
    if isinstance(scenario, str | os.PathLike):
        return load_scenario(Path(scenario), changes)
    raise ScenarioError(
        "scenario", type(scenario).__name__, "a Scenario, a scenario file path or a mapping"
    )


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScenarioError(name, value, f"an integer >= {minimum}")
    return value


def _scaled(progress: Progress, k: int, count: int) -> Progress:
    """Progress of run ``k`` of ``count`` as a fraction of all of them."""

    def report(fraction: float) -> None:
        progress((k + fraction) / count)

    return report
