"""Expand a sweep into its runs: grid cells × cases × repeats, in a fixed order.

Order: grid cells in the cartesian order of the grid's keys as written, then the cases in
file order, then the repeats (seed, seed + 1, ...). Each run's scenario is the base, then
its case, then the command line's ``--set`` overrides, then its grid cell: ``--set``
wins over the base and the cases, and may not touch a key the grid sweeps (an error).
Every run's scenario is validated here, before anything runs or touches the disk; a
sweep of more than :data:`MAX_RUNS` runs is refused before it is expanded.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sim.core.errors import ScenarioError
from sim.engine.observe.targets import target_fields
from sim.engine.resources import estimate_memory
from sim.engine.summary import counter_fields, schedule_fields, workload_fields
from sim.model.scenario import Scenario, apply_overrides, scenario_from_mapping
from sim.model.scenario.models import MAX_REPEATS
from sim.output.sweeps.labels import (
    case_label,
    case_labels,
    case_overrides,
    flatten,
    row_label,
    run_dir_names,
    run_name_parts,
    show,
)
from sim.output.sweeps.spec import Sweep

__all__ = ["RunSpec", "case_label", "case_labels", "expand", "flatten", "run_key", "show"]

#: Summary fields every run has (the result contract plus the engine's extras).
SUMMARY_FIELDS = (
    "seed", "rounds", "sim_time_s", "final_var", "rounds_to_target", "time_to_target_s",
    "bytes_sent", "messages", "final_mean_drift", "wall_time_s",
)  # fmt: skip
#: Resolved scenario values every run records (figures need the clock and the protocol).
RESOLVED_KEYS = ("clock", "protocol.name", "churn.model")
#: Most runs a sweep may have (cases × grid cells × repeats): more is a typo (a zero too
#: many), refused before the sweep is expanded rather than expanded for hours.
MAX_RUNS = 1_000_000


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep.

    Attributes
    ----------
    index
        Position in the sweep's fixed order (row order of ``runs.parquet``).
    cell, case
        Index of the grid cell and of the case.
    label
        The case's short label, e.g. ``moshpit(load_balance=false)``.
    columns
        The run's overrides by dotted key (the case's, then the grid's).
    mapping
        The base scenario mapping with the case and ``--set`` applied.
    grid
        The grid cell's overrides by dotted key.
    seed
        The run's seed (the scenario's seed + repeat index).
    key
        Digest of the resolved scenario and the seed: the identity ``--resume`` uses.
    resolved
        The resolved values of :data:`RESOLVED_KEYS`.
    row
        The table row's label: the case label, then the grid values.
    memory
        The run's estimated peak memory, bytes (:func:`sim.engine.resources.estimate_memory`).
    dirname
        Name of the run's folder under ``runs/`` with ``keep_runs`` (unique, safe).
    """

    index: int
    cell: int
    case: int
    label: str
    columns: dict[str, Any]
    mapping: dict[str, Any]
    grid: dict[str, Any]
    seed: int
    key: str
    resolved: dict[str, Any] = dataclasses.field(default_factory=dict)
    row: str = ""
    memory: int = 0
    dirname: str = ""


def expand(
    sweep: Sweep, overrides: Mapping[str, Any] | None = None, repeats: int | None = None
) -> list[RunSpec]:
    """All runs of ``sweep`` in order; raises ScenarioError naming the sweep key at fault.

    Parameters
    ----------
    sweep
        The sweep to expand.
    overrides
        Dotted-key overrides (``--set``) applied to every run after its case.
    repeats
        Runs per grid cell and case (``--repeats``); default: the sweep's ``repeats``,
        else the base scenario's.

    Raises
    ------
    ScenarioError
        Also when the sweep has more than :data:`MAX_RUNS` runs (checked first).
    """
    spec = sweep.spec
    _check_repeats(repeats)
    overrides = dict(overrides or {})
    _check_overrides(overrides, spec.grid)
    n_cells = math.prod(len(values) for values in spec.grid.values())
    written = "repeats" if repeats or spec.repeats else "grid"
    _check_size(len(spec.cases), n_cells, [repeats or spec.repeats or 1], written)
    labels = case_labels(spec.cases, sweep.base)
    mappings = [_with_case(sweep, case, index, overrides) for index, case in enumerate(spec.cases)]
    if repeats is None and spec.repeats is None:  # each case's scenario says how many
        _check_size(len(spec.cases), n_cells, [m.repeats for m in mappings], "repeats")
    cells = [
        dict(zip(spec.grid, values, strict=True))
        for values in itertools.product(*spec.grid.values())
    ]
    runs: list[dict[str, Any]] = []  # each run's RunSpec fields but its folder name
    fields: set[str] = set(SUMMARY_FIELDS)
    for cell_index, cell in enumerate(cells):
        for case_index, (case, mapping) in enumerate(zip(spec.cases, mappings, strict=True)):
            scenario = _with_cell(sweep, mapping.mapping, cell)
            fields.update(target_fields(scenario))
            fields.update(counter_fields(scenario))
            fields.update(schedule_fields(scenario))
            fields.update(workload_fields(scenario))
            count = repeats or spec.repeats or scenario.repeats
            if len(runs) + count > MAX_RUNS:  # the grid sets `repeats` itself
                raise ScenarioError("grid.repeats", len(runs) + count, _size_expected())
            label = labels[case_index]
            common = {
                "cell": cell_index, "case": case_index, "label": label,
                "columns": {**flatten(case_overrides(case)), **cell}, "mapping": mapping.mapping,
                "grid": cell, "resolved": _resolved(scenario), "row": row_label(label, cell),
                "memory": estimate_memory(scenario),
            }  # fmt: skip
            runs.extend(_repeats(scenario, count, common, len(runs)))
    check_report(spec.report, fields)
    names = run_dir_names([run_name_parts(r["label"], r["grid"], r["seed"]) for r in runs])
    return [RunSpec(**run, dirname=name) for run, name in zip(runs, names, strict=True)]


def _repeats(
    scenario: Scenario, count: int, common: dict[str, Any], start: int
) -> Iterator[dict[str, Any]]:
    """The fields of ``count`` runs of ``scenario`` (seeds seed, seed + 1, …), indexed
    from ``start``; ``common`` holds the fields they share."""
    keys = run_keys(scenario)
    for k in range(count):
        seed = scenario.seed + k
        yield {**common, "index": start + k, "seed": seed, "key": keys(seed)}


def check_report(report: list[str], fields: set[str]) -> None:
    """Every report entry must be a summary field some run will have."""
    for index, name in enumerate(report):
        if name not in fields:
            known = ", ".join(sorted(fields - {"seed"}))
            raise ScenarioError(f"report[{index}]", name, f"a summary field: {known}")


def run_key(scenario: Scenario, seed: int) -> str:
    """A digest of (resolved scenario, seed): equal keys mean equal runs."""
    return run_keys(scenario)(seed)


def run_keys(scenario: Scenario) -> Callable[[int], str]:
    """:func:`run_key` of ``scenario`` as a function of the seed (the scenario is
    serialized once: a sweep has up to :data:`MAX_RUNS` runs)."""
    text = json.dumps({"scenario": scenario.model_dump(mode="json"), "seed": 0}, sort_keys=True)
    head = text.removesuffix("0}")  # "seed" sorts last: '{"scenario": {…}, "seed": '

    def key(seed: int) -> str:
        return hashlib.sha256(f"{head}{int(seed)}}}".encode()).hexdigest()[:20]

    return key


def _check_repeats(repeats: object) -> None:
    """``--repeats`` (the API's ``repeats=``): an integer in 1 … MAX_REPEATS."""
    if repeats is None:
        return
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ScenarioError("repeats", repeats, "an integer >= 1")
    if repeats > MAX_REPEATS:
        raise ScenarioError("repeats", repeats, f"an integer <= {MAX_REPEATS}")


def _check_size(cases: int, cells: int, repeats: list[int], key: str) -> None:
    """Refuse, naming ``key``, a sweep of more than :data:`MAX_RUNS` runs: ``cells``
    grid cells × one case per entry of ``repeats`` (or ``cases`` of its single entry)."""
    per_cell = sum(repeats) if len(repeats) > 1 else cases * repeats[0]
    total = cells * per_cell
    if total > MAX_RUNS:
        shown = repeats[0] if len(set(repeats)) == 1 else f"{min(repeats)}–{max(repeats)}"
        parts = f"{cases} cases × {cells} grid cells × {shown} repeats"
        raise ScenarioError(key, total, _size_expected(parts))


def _size_expected(parts: str = "cases × grid cells × repeats") -> str:
    return f"a sweep of at most {MAX_RUNS} runs ({parts})"


def _check_overrides(overrides: dict[str, Any], grid: Mapping[str, Any]) -> None:
    """``--set`` may not touch a key the grid sweeps (which value would win is unclear)."""
    for key, value in overrides.items():
        for swept in grid:
            if _overlap(key, swept):
                raise ScenarioError(
                    f"--set {key}", value, f"a key the sweep's grid does not set (grid: {swept})"
                )


def _resolved(scenario: Scenario) -> dict[str, Any]:
    churn = getattr(scenario.churn, "model", None)
    return {"clock": scenario.clock, "protocol.name": scenario.protocol.name, "churn.model": churn}


@dataclass(frozen=True)
class _CaseMapping:
    """A case applied to the base (with ``--set``): the mapping and its ``repeats``."""

    mapping: dict[str, Any]
    repeats: int


def _with_case(
    sweep: Sweep, case: dict[str, Any], index: int, overrides: dict[str, Any]
) -> _CaseMapping:
    """The base with case ``index`` and ``overrides`` applied, validated; errors name the
    case, ``--set`` or the base."""
    written = case_overrides(case)
    try:
        mapping = apply_overrides(copy.deepcopy(sweep.base), written)
        mapping = apply_overrides(mapping, overrides)
        scenario = scenario_from_mapping(mapping, None, base_dir=sweep.base_dir)
    except ScenarioError as exc:
        if touches(exc.key, overrides):
            where = (
                "" if _fails_without_case(sweep, overrides, exc.key) else f"cases[{index}] with "
            )
            raise _prefixed(exc, f"{where}--set ") from None
        raise _prefixed(
            exc, f"cases[{index}]." if touches(exc.key, flatten(written)) else ""
        ) from None
    return _CaseMapping(mapping, scenario.repeats)


def _fails_without_case(sweep: Sweep, overrides: dict[str, Any], key: str) -> bool:
    """True when ``overrides`` on the base alone fail at ``key`` (not a case's doing)."""
    try:
        scenario_from_mapping(sweep.base, overrides, base_dir=sweep.base_dir)
    except ScenarioError as exc:
        return exc.key == key
    return False


def _with_cell(sweep: Sweep, mapping: dict[str, Any], cell: dict[str, Any]) -> Scenario:
    """The scenario of one grid cell of one case; errors name the grid key at fault."""
    try:
        return scenario_from_mapping(mapping, cell, base_dir=sweep.base_dir)
    except ScenarioError as exc:
        prefix = "grid." if touches(exc.key, cell) else f"grid cell {_cell_text(cell)}: "
        raise _prefixed(exc, prefix) from None


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(f"{b}.") or b.startswith(f"{a}.")


def where_in_run(key: str, run: RunSpec, overrides: Mapping[str, Any] | None = None) -> str:
    """Where in the sweep ``run`` gets dotted ``key`` from, as a prefix for an error's key:
    ``grid.``, ``--set ``, ``cases[k].``, or ``""`` (the base scenario)."""
    if touches(key, run.grid):
        return "grid."
    if touches(key, overrides or {}):
        return "--set "
    if touches(key, run.columns):
        return f"cases[{run.case}]."
    return ""


def run_failed(
    exc: ScenarioError, run: RunSpec, overrides: Mapping[str, Any] | None
) -> ScenarioError:
    """A run's error at run time (``peers.upload``'s draws overflow, say), its key prefixed
    by where the sweep sets it and its message ended by the run's index and seed."""
    error = _prefixed(exc, where_in_run(exc.key, run, overrides))
    error.args = (f"{error.args[0]} (run {run.index}, seed {run.seed})",)
    return error


def touches(key: str, overrides: Mapping[str, Any]) -> bool:
    """True when dotted ``key`` is one of ``overrides``' keys, inside one or holds one."""
    return any(_overlap(key, k) for k in overrides)


def _cell_text(cell: dict[str, Any]) -> str:
    return ", ".join(f"{k}={show(v)}" for k, v in cell.items())


def _prefixed(exc: ScenarioError, prefix: str) -> ScenarioError:
    """A copy of the error, its key and message prefixed by where in the sweep it comes from."""
    error = Exception.__new__(type(exc))  # not copy.copy: ScenarioError's __init__ wants 3 args
    error.__dict__.update(vars(exc))
    error.key = f"{prefix}{exc.key}"
    error.args = (f"{prefix}{exc}",)
    return error
