"""Read scenarios: YAML → mapping → overrides → validated, frozen :class:`Scenario`.

Every user mistake becomes a :class:`sim.core.errors.ScenarioError` naming the dotted key (or
the file), the value received and what was expected. Reading is in
:mod:`sim.model.scenario.reading`, overrides in :mod:`sim.model.scenario.overrides`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sim.core.errors import ScenarioError
from sim.core.fields import PeerDist, dist_to_plain
from sim.model.scenario.messages import from_validation_error
from sim.model.scenario.models import Scenario
from sim.model.scenario.overrides import Replace, apply_overrides, split_key
from sim.model.scenario.reading import ReadError, load_text, read_text, read_yaml

#: Top-level keys that make a mapping a sweep file (``avsim sweep``) when it has no
#: scenario section (``name`` and ``repeats`` are shared with scenarios).
SWEEP_ONLY_KEYS = ("base", "scenario", "cases", "grid")


class SweepFileError(ScenarioError):
    """A sweep file given where a scenario was expected (``avsim run``, ``avsim info``)."""

    def __init__(self, path: str, keys: list[str]) -> None:
        super().__init__(path, keys, "a scenario")
        self.args = (
            f"{path}: this is a sweep file (it has {', '.join(keys)}), not a scenario: "
            f"use `avsim sweep {path}`",
        )


def parse_set_options(options: list[str] | None) -> dict[str, Any]:
    """``["churn.p=0.01", "churn:={model: none}"]`` → ``{"churn.p": 0.01, "churn":
    Replace({"model": "none"})}``; values are YAML (``key:=value`` replaces a mapping
    instead of merging into it)."""
    overrides: dict[str, Any] = {}
    for option in options or []:
        key, sep, raw = option.partition("=")
        key = key.strip()
        replace = key.endswith(":")
        key = key.removesuffix(":").rstrip()
        if not sep or not key:
            raise ScenarioError("--set", option, "dotted.key=value (or dotted.key:=value)")
        split_key(key)
        value = load_text(raw, f"--set {key}") if raw.strip() else None
        overrides[key] = Replace(value) if replace else value
    return overrides


def is_sweep_mapping(data: dict[str, Any]) -> list[str]:
    """The sweep-only keys of a top-level mapping that has no scenario section (empty
    when it is not a sweep file)."""
    if any(key in data for key in Scenario.model_fields if key not in ("name", "repeats")):
        return []
    return [key for key in SWEEP_ONLY_KEYS if key in data]


def scenario_from_mapping(
    data: dict[str, Any],
    overrides: dict[str, Any] | None = None,
    base_dir: Path | None = None,
) -> Scenario:
    """Validate a scenario mapping (plus overrides) into a frozen :class:`Scenario`.

    Relative file paths inside the scenario (``vector.file``) resolve against ``base_dir``.
    """
    if not isinstance(data, dict):
        raise ScenarioError("<top>", data, "a mapping of scenario keys")
    merged = apply_overrides(data, overrides)
    if base_dir is not None:
        merged = _resolve_paths(merged, base_dir)
    try:
        return Scenario.model_validate(merged)
    except ValidationError as exc:
        raise from_validation_error(exc, merged) from None


def _resolve_paths(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """File keys (``vector.file``, ``churn.file``, ``protocol.file``, ``workload.file``)
    relative to the scenario file's folder become absolute."""
    for section in ("vector", "churn", "protocol", "workload"):
        mapping = data.get(section)
        if isinstance(mapping, dict) and isinstance(mapping.get("file"), str):
            path = Path(mapping["file"])
            if not path.is_absolute():
                mapping["file"] = str((base_dir / path).resolve())
    return data


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None) -> Scenario:
    """Read, override and validate a scenario file (see ``architecture.md``).

    Raises
    ------
    SweepFileError
        When the file is a sweep file (it has ``cases``, ``grid``, ``base``, … and no
        scenario section).
    """
    path = Path(path)
    data = read_yaml(path)
    sweep_keys = is_sweep_mapping(data)
    if sweep_keys:
        raise SweepFileError(str(path), sweep_keys)
    return scenario_from_mapping(data, overrides, base_dir=path.parent)


def json_schema() -> dict[str, Any]:
    """JSON Schema of the scenario format, for editors."""
    return _plain_defaults(Scenario.model_json_schema(mode="validation"))


def _plain_defaults(node: Any) -> Any:
    """Per-peer defaults as a scenario writes them (``12500000.0``), not as the internal
    ``PeerDist`` pydantic dumps (``{"kind": "const", "params": [...]}``)."""
    if isinstance(node, list):
        return [_plain_defaults(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _plain_defaults(value) for key, value in node.items()}
    default = out.get("default")
    if isinstance(default, dict) and set(default) == {"kind", "params"}:
        params = tuple((key, value) for key, value in default["params"])
        out["default"] = dist_to_plain(PeerDist(default["kind"], params))
    return out


__all__ = [
    "ReadError",
    "Replace",
    "SweepFileError",
    "apply_overrides",
    "is_sweep_mapping",
    "json_schema",
    "load_scenario",
    "load_text",
    "parse_set_options",
    "read_text",
    "read_yaml",
    "scenario_from_mapping",
]
