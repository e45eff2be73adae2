"""The sweep file: a base scenario, cases, a grid of dotted keys, repeats and a report.

```yaml
name: paper-moshpit-averaging
base: ../quickstart.yaml        # or `scenario:` with an inline mapping
repeats: 10                     # default: the base scenario's `repeats`
cases:                          # override mappings; default: one case, the base itself
  - {protocol: {name: all_reduce}}
grid:                           # dotted key -> values; cartesian product x cases
  peers.count: [512, 1024]
report: [rounds_to_target]      # summary fields tabulated in table.md
```
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sim.errors import ScenarioError
from sim.scenario import read_yaml

SWEEP_KEYS = ("name", "base", "scenario", "repeats", "cases", "grid", "report")


def _one_empty_case() -> list[dict[str, Any]]:
    return [{}]


class SweepSpec(BaseModel):
    """A validated sweep file (strict: no coercion, unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = Field(min_length=1)
    base: str | None = None
    scenario: dict[str, Any] | None = None
    repeats: int | None = Field(default=None, ge=1)
    cases: list[dict[str, Any]] = Field(default_factory=_one_empty_case, min_length=1)
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(default_factory=dict)
    report: list[str] = Field(default_factory=lambda: ["rounds_to_target"], min_length=1)
    baseline: int | None = Field(default=None, ge=0)

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
    data = read_yaml(path)
    text = path.read_text(encoding="utf-8")
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
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise _sweep_error(exc) from None


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
