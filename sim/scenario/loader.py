"""Read scenarios: YAML → mapping → overrides → validated, frozen :class:`Scenario`.

Every user mistake becomes a :class:`sim.errors.ScenarioError` naming the dotted key,
the value received and what was expected.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sim.errors import ScenarioError
from sim.scenario.errors import from_validation_error
from sim.scenario.models import Scenario


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a YAML file, or a ScenarioError saying what is wrong."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(str(path), exc.strerror, "a readable YAML file") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise ScenarioError(f"{path}{where}", problem, "valid YAML") from None
    if not isinstance(data, dict):
        raise ScenarioError(str(path), data, "a mapping of keys at the top of the file")
    return data


def parse_set_options(options: list[str] | None) -> dict[str, Any]:
    """``["churn.p=0.01", ...]`` → ``{"churn.p": 0.01}``; values are YAML scalars."""
    overrides: dict[str, Any] = {}
    for option in options or []:
        key, sep, raw = option.partition("=")
        if not sep or not key.strip():
            raise ScenarioError("--set", option, "dotted.key=value")
        try:
            overrides[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            raise ScenarioError(key.strip(), raw, "a YAML scalar") from None
    return overrides


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """A copy of ``data`` with dotted-key (or nested-mapping) overrides applied.

    A nested mapping merges into the existing one, except ``protocol`` with a new
    ``name``, which replaces the protocol mapping (its parameters belong to the old one).
    """
    out = copy.deepcopy(data)
    for key, value in (overrides or {}).items():
        parts = key.split(".")
        target = out
        for i, part in enumerate(parts[:-1]):
            child = target.get(part)
            if child is None:
                child = target[part] = {}
            if not isinstance(child, dict):
                raise ScenarioError(".".join(parts[: i + 1]), child, "a mapping to set keys in")
            target = child
        _merge(target, parts[-1], copy.deepcopy(value))
    return out


def _merge(target: dict[str, Any], key: str, value: Any) -> None:
    current = target.get(key)
    replaces_protocol = key == "protocol" and isinstance(value, dict) and "name" in value
    if isinstance(current, dict) and isinstance(value, dict) and not replaces_protocol:
        for sub_key, sub_value in value.items():
            _merge(current, sub_key, sub_value)
    elif replaces_protocol and isinstance(current, dict) and current.get("name") == value["name"]:
        target[key] = {**current, **value}
    else:
        target[key] = value


def scenario_from_mapping(
    data: dict[str, Any],
    overrides: dict[str, Any] | None = None,
    base_dir: Path | None = None,
) -> Scenario:
    """Validate a scenario mapping (plus overrides) into a frozen :class:`Scenario`.

    Relative file paths inside the scenario (``vector.file``) resolve against ``base_dir``.
    """
    merged = apply_overrides(data, overrides)
    if base_dir is not None:
        merged = _resolve_paths(merged, base_dir)
    try:
        return Scenario.model_validate(merged)
    except ValidationError as exc:
        raise from_validation_error(exc, merged) from None


def _resolve_paths(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """File keys (``vector.file``, ``churn.file``, ``protocol.file``) relative to the
    scenario file's folder become absolute."""
    for section in ("vector", "churn", "protocol"):
        mapping = data.get(section)
        if isinstance(mapping, dict) and isinstance(mapping.get("file"), str):
            path = Path(mapping["file"])
            if not path.is_absolute():
                mapping["file"] = str((base_dir / path).resolve())
    return data


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None) -> Scenario:
    """Read, override and validate a scenario file (see ``architecture.md``)."""
    path = Path(path)
    return scenario_from_mapping(read_yaml(path), overrides, base_dir=path.parent)


def json_schema() -> dict[str, Any]:
    """JSON Schema of the scenario format, for editors."""
    return Scenario.model_json_schema(mode="validation")
