"""Expand a sweep into its runs: grid cells × cases × repeats, in a fixed order.

Order: grid cells in the cartesian order of the grid's keys as written, then the cases in
file order, then the repeats (seed, seed + 1, ...). A case is applied to the base first
and the grid values after it, so a grid key can set a parameter of a case's protocol.
Every run's scenario is validated here, before anything runs or touches the disk.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Any

from sim.errors import ScenarioError
from sim.scenario import Scenario, apply_overrides, scenario_from_mapping
from sim.summary import counter_fields, target_label
from sim.sweeps.spec import Sweep

#: Summary fields every run has (the result contract plus the engine's extras).
SUMMARY_FIELDS = (
    "seed", "rounds", "sim_time_s", "final_var", "rounds_to_target", "time_to_target_s",
    "bytes_sent", "messages", "final_mean_drift", "wall_time_s",
)  # fmt: skip


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
        The case's short label, e.g. ``moshpit(group_size=32,rekey=False)``.
    columns
        The run's overrides by dotted key (the case's, then the grid's).
    mapping
        The base scenario mapping with the case applied.
    grid
        The grid cell's overrides by dotted key.
    seed
        The run's seed (the scenario's seed + repeat index).
    key
        Digest of the resolved scenario and the seed: the identity ``--resume`` uses.
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


def expand(sweep: Sweep) -> list[RunSpec]:
    """All runs of ``sweep`` in order; raises ScenarioError naming the sweep key at fault."""
    spec = sweep.spec
    labels = case_labels(spec.cases)
    mappings = [_with_case(sweep, case, index) for index, case in enumerate(spec.cases)]
    cells = [
        dict(zip(spec.grid, values, strict=True))
        for values in itertools.product(*spec.grid.values())
    ]
    runs: list[RunSpec] = []
    fields: set[str] = set(SUMMARY_FIELDS)
    for cell_index, cell in enumerate(cells):
        for case_index, (case, mapping) in enumerate(zip(spec.cases, mappings, strict=True)):
            scenario = _with_cell(sweep, mapping, cell)
            fields.update(target_fields(scenario))
            fields.update(counter_fields(scenario))
            columns = {**flatten(case), **cell}
            for k in range(spec.repeats or scenario.repeats):
                seed = scenario.seed + k
                runs.append(
                    RunSpec(len(runs), cell_index, case_index, labels[case_index], columns,
                            mapping, cell, seed, run_key(scenario, seed))
                )  # fmt: skip
    check_report(spec.report, fields)
    return runs


def target_fields(scenario: Scenario) -> list[str]:
    """The summary fields the scenario's extra variance targets add."""
    labels = [target_label(t) for t in scenario.metrics.targets]
    return [f"rounds_to_{t}" for t in labels] + [f"time_to_{t}_s" for t in labels]


def check_report(report: list[str], fields: set[str]) -> None:
    """Every report entry must be a summary field some run will have."""
    for index, name in enumerate(report):
        if name not in fields:
            known = ", ".join(sorted(fields - {"seed"}))
            raise ScenarioError(f"report[{index}]", name, f"a summary field: {known}")


def run_key(scenario: Scenario, seed: int) -> str:
    """A digest of (resolved scenario, seed): equal keys mean equal runs."""
    text = json.dumps({"scenario": scenario.model_dump(mode="json"), "seed": seed}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def flatten(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"protocol": {"name": "x"}, "churn.p": 0}`` → ``{"protocol.name": "x", "churn.p": 0}``."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def case_labels(cases: list[dict[str, Any]]) -> list[str]:
    """Short unique labels: ``moshpit(group_size=32,grid_dims=2,rekey=False)``."""
    labels = [case_label(case) for case in cases]
    return [
        f"{label} #{index}" if labels.count(label) > 1 else label
        for index, label in enumerate(labels)
    ]


def case_label(case: dict[str, Any]) -> str:
    """The label of one case: the protocol with its parameters, then other overrides."""
    flat = flatten(case)
    name = flat.pop("protocol.name", None)
    in_protocol = {k: v for k, v in flat.items() if name is not None and k.startswith("protocol.")}
    others = [f"{k}={show(v)}" for k, v in flat.items() if k not in in_protocol]
    head = []
    if name is not None:
        inner = ",".join(f"{k.removeprefix('protocol.')}={show(v)}" for k, v in in_protocol.items())
        head = [f"{name}({inner})" if inner else str(name)]
    return ", ".join(head + others) or "base"


def show(value: Any) -> str:
    """A value as it reads in labels: Python spelling for scalars, compact JSON otherwise."""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


def _with_case(sweep: Sweep, case: dict[str, Any], index: int) -> dict[str, Any]:
    """The base with case ``index`` applied, validated; errors name the case or the base."""
    try:
        mapping = apply_overrides(copy.deepcopy(sweep.base), case)
        scenario_from_mapping(mapping, None, base_dir=sweep.base_dir)
    except ScenarioError as exc:
        raise _prefixed(
            exc, f"cases[{index}]." if _touches(exc.key, flatten(case)) else ""
        ) from None
    return mapping


def _with_cell(sweep: Sweep, mapping: dict[str, Any], cell: dict[str, Any]) -> Scenario:
    """The scenario of one grid cell of one case; errors name the grid key at fault."""
    try:
        return scenario_from_mapping(mapping, cell, base_dir=sweep.base_dir)
    except ScenarioError as exc:
        prefix = "grid." if _touches(exc.key, cell) else f"grid cell {_cell_text(cell)}: "
        raise _prefixed(exc, prefix) from None


def _touches(key: str, overrides: dict[str, Any]) -> bool:
    return any(key == k or key.startswith(f"{k}.") or k.startswith(f"{key}.") for k in overrides)


def _cell_text(cell: dict[str, Any]) -> str:
    return ", ".join(f"{k}={show(v)}" for k, v in cell.items())


def _prefixed(exc: ScenarioError, prefix: str) -> ScenarioError:
    """The same error, its key and message prefixed by where in the sweep it comes from."""
    if not prefix:
        return exc
    error = Exception.__new__(type(exc))  # not copy.copy: ScenarioError's __init__ wants 3 args
    error.__dict__.update(vars(exc))
    error.key = f"{prefix}{exc.key}"
    error.args = (f"{prefix}{exc}",)
    return error
