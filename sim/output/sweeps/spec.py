"""The sweep file: a base scenario, cases, a grid of dotted keys, repeats and a report.

```yaml
name: paper-moshpit-averaging
base: ../quickstart.yaml        # or `scenario:` with an inline mapping
repeats: 10                     # default: the base scenario's `repeats`
cases:                          # override mappings; default: one case, the base itself
  - {label: ring, protocol: {name: all_reduce}}    # `label`: the case's short name
grid:                           # dotted key -> values; cartesian product x cases
  peers.count: [512, 1024]
report: [rounds_to_target]      # summary fields tabulated in table.md
baseline: 0                     # the case the speed-up columns compare with
speedup: [rounds_to_target]     # default: the report's rounds_to_* and time_to_* fields
```
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from sim.core.errors import ScenarioError
from sim.model.scenario import read_yaml
from sim.model.scenario.models import MAX_REPEATS
from sim.model.scenario.reading import load_text, mapping_of, read_text

SWEEP_KEYS = (
    "name", "base", "scenario", "repeats", "cases", "grid", "report", "baseline", "speedup",
)  # fmt: skip
#: Report fields that get a speed-up column by default: times and round counts to a target.
SPEEDUP_PREFIXES = ("rounds_to_", "time_to_")


#: A case: scenario overrides (nested or dotted keys), and its optional ``label``.
Case = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {
            "type": "object",
            "properties": {
                "label": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The case's short name (tables, run folders, legends).",
                }
            },
            "additionalProperties": True,
        }
    ),
]


def _one_empty_case() -> list[dict[str, Any]]:
    return [{}]


class SweepSpec(BaseModel):
    """A validated sweep file (strict: no coercion, unknown keys are errors).

    ``SweepSpec.model_json_schema()`` (or :func:`json_schema`) is its JSON Schema.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="avsim sweep")

    name: str = Field(min_length=1, description="Sweep name (default folder results/<name>/).")
    base: str | None = Field(
        default=None, description="Base scenario file, relative to the sweep file."
    )
    scenario: dict[str, Any] | None = Field(
        default=None, description="Base scenario written inline (instead of `base`)."
    )
    repeats: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REPEATS,
        description="Runs per case and grid cell [default: the base's].",
    )
    cases: list[Case] = Field(
        default_factory=_one_empty_case,
        min_length=1,
        description="Override mappings (nested or dotted keys) applied to the base; an "
        "optional `label` names the case in tables, folders and legends.",
    )
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(
        default_factory=dict,
        description="Dotted key -> values; every combination is run with every case.",
    )
    report: list[str] = Field(
        default_factory=lambda: ["rounds_to_target"],
        min_length=1,
        description="Summary fields tabulated in table.md (mean [min-max] over repeats).",
    )
    baseline: int | None = Field(
        default=None, ge=0, description="Index of the case the speed-up columns compare with."
    )
    speedup: list[str] | None = Field(
        default=None,
        description="Report fields with a speed-up column [default: rounds_to_*, time_to_*].",
    )

    @model_validator(mode="after")
    def _baseline_is_a_case(self) -> SweepSpec:
        if self.baseline is not None and self.baseline >= len(self.cases):
            raise ValueError(
                f"expected baseline to index a case (0 … {len(self.cases) - 1}), "
                f"got {self.baseline}"
            )
        return self

    @model_validator(mode="after")
    def _one_base(self) -> SweepSpec:
        if (self.base is None) == (self.scenario is None):
            raise ValueError("exactly one of `base` (a scenario file) or `scenario` (a mapping)")
        return self

    def speedup_fields(self) -> list[str]:
        """The report fields that get a speed-up column (none without a baseline)."""
        if self.baseline is None:
            return []
        if self.speedup is not None:
            return list(self.speedup)
        return [field for field in self.report if field.startswith(SPEEDUP_PREFIXES)]


def json_schema() -> dict[str, Any]:
    """JSON Schema of the sweep file format, for editors and ``avsim schema``."""
    return SweepSpec.model_json_schema(mode="validation")


@dataclass(frozen=True)
class Sweep:
    """A sweep ready to expand: its spec, the base scenario mapping and where paths start.

    Attributes
    ----------
    spec
        The validated sweep file.
    base
        The base scenario mapping as written (overrides are applied to it).
    base_dir
        Folder that relative paths inside the base scenario resolve against.
    text
        The sweep file's text when it came from a file (copied to ``sweep.yaml``).
    """

    spec: SweepSpec
    base: dict[str, Any]
    base_dir: Path
    text: str | None = None


def load_sweep(path: str | os.PathLike[str]) -> Sweep:
    """Read and validate a sweep file; ``base`` resolves relative to the file's folder."""
    path = Path(path)
    text = read_text(path)  # read once: bounded, UTF-8, one-line errors naming the file
    data = mapping_of(load_text(text, str(path)), str(path))
    return sweep_from_mapping(data, path.parent, text=text)


def sweep_from_mapping(
    data: dict[str, Any], base_dir: Path | None = None, text: str | None = None
) -> Sweep:
    """Validate a sweep mapping; ``base_dir`` (default: the working folder) anchors ``base``."""
    folder = Path.cwd() if base_dir is None else Path(base_dir)
    spec = _validate(data)
    if spec.scenario is not None:
        return Sweep(spec, dict(spec.scenario), folder, text)
    base_path = folder / str(spec.base)
    if not base_path.is_file():
        raise ScenarioError("base", spec.base, f"a scenario file (relative to {folder})")
    return Sweep(spec, read_yaml(base_path), base_path.parent, text)


def as_sweep(sweep: Sweep | SweepSpec | dict[str, Any] | str | os.PathLike[str]) -> Sweep:
    """Accept a :class:`Sweep`, a :class:`SweepSpec`, a mapping or a sweep file path."""
    if isinstance(sweep, Sweep):
        return sweep
    if isinstance(sweep, SweepSpec):
        return sweep_from_mapping(sweep.model_dump(exclude_none=True))
    if isinstance(sweep, dict):
        return sweep_from_mapping(sweep)
    return load_sweep(sweep)


def spec_yaml(sweep: Sweep) -> str:
    """Text for the sweep folder's ``sweep.yaml``: the file as written, else the spec."""
    if sweep.text is not None:
        return sweep.text
    return yaml.safe_dump(sweep.spec.model_dump(exclude_none=True), sort_keys=False)


def _validate(data: dict[str, Any]) -> SweepSpec:
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise _sweep_error(exc) from None
    _check_labels(spec.cases)
    _check_seeds(spec)
    _check_speedup(spec)
    return spec


#: Why a case or the grid may not set ``seed``.
SEEDS = (
    "no seed: a sweep's runs take the seeds seed, seed + 1, … from the base scenario's "
    "seed and the repeats (every case and grid cell the same ones)"
)


def _check_seeds(spec: SweepSpec) -> None:
    """Neither a case nor the grid sets ``seed``: the runs table's ``seed`` column is the
    run's seed, and paired comparisons need every case on the same seeds."""
    if "seed" in spec.grid:
        raise ScenarioError("grid.seed", spec.grid["seed"], SEEDS)
    for index, case in enumerate(spec.cases):
        if "seed" in case:
            raise ScenarioError(f"cases[{index}].seed", case["seed"], SEEDS)


def _check_labels(cases: list[dict[str, Any]]) -> None:
    """A case's ``label`` is a non-empty string, unique among the cases."""
    seen: dict[str, int] = {}
    for index, case in enumerate(cases):
        if "label" not in case:
            continue
        label = case["label"]
        if not isinstance(label, str) or not label.strip():
            raise ScenarioError(f"cases[{index}].label", label, "a non-empty string")
        if label in seen:
            raise ScenarioError(
                f"cases[{index}].label", label, f"a label no other case has (cases[{seen[label]}])"
            )
        seen[label] = index


def _check_speedup(spec: SweepSpec) -> None:
    """``speedup`` lists report fields, and needs a ``baseline`` to compare with."""
    if spec.speedup is None:
        return
    if spec.baseline is None and spec.speedup:
        raise ScenarioError("speedup", spec.speedup, "a `baseline` case to compare with")
    for index, field in enumerate(spec.speedup):
        if field not in spec.report:
            raise ScenarioError(f"speedup[{index}]", field, "one of the report fields")


def _sweep_error(exc: ValidationError) -> ScenarioError:
    """The first validation error as a ScenarioError named by its dotted key."""
    error = exc.errors(include_url=False)[0]
    key = _dotted(error["loc"])
    if error["type"] == "extra_forbidden":
        return ScenarioError(key, error["input"], f"one of the sweep keys {', '.join(SWEEP_KEYS)}")
    if error["type"] == "missing":
        return ScenarioError(key, None, "a value (this key is required)")
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Input should be ")
    if not key:  # the model-level check: neither or both of base / scenario
        return ScenarioError("base", None, message)
    return ScenarioError(key, error["input"], message)


def _dotted(loc: tuple[int | str, ...]) -> str:
    """``("cases", 1, "protocol")`` → ``cases[1].protocol``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
