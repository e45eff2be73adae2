"""``avsim schema --sweep``: the sweep file's JSON Schema, whose inline ``scenario`` is
checked against the scenario format; the shipped sweep files validate against it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.model.scenario.overrides import plain
from sim.model.scenario.reading import read_yaml

ROOT = Path(__file__).resolve().parents[2]
SWEEP_FILES = sorted(
    path for path in (ROOT / "scenarios").rglob("*.yaml") if "cases" in read_yaml(path)
)


def as_json(path: Path) -> object:
    """The file as the JSON document the schema describes: read as avsim reads it (the
    ``!replace`` tag included), each ``!replace`` value as its plain mapping."""
    return plain(read_yaml(path))


@pytest.fixture(scope="module")
def schema() -> dict:
    result = CliRunner().invoke(app, ["schema", "--sweep"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_the_sweep_schema_has_the_sweep_keys(schema):
    assert {"name", "base", "scenario", "cases", "grid", "report"} <= set(schema["properties"])
    assert "Scenario" in schema["$defs"]


@pytest.mark.parametrize("path", SWEEP_FILES, ids=lambda p: p.name)
def test_shipped_sweep_files_validate(schema, path):
    jsonschema.validate(as_json(path), schema)


def test_a_bad_inline_scenario_is_caught_by_the_schema(schema):
    sweep = {"name": "s", "scenario": {"clock": "sometimes"}, "cases": [{}]}
    with pytest.raises(jsonschema.ValidationError, match="sometimes"):
        jsonschema.validate(sweep, schema)


def test_an_unknown_sweep_key_is_caught_by_the_schema(schema):
    with pytest.raises(jsonschema.ValidationError, match="grids"):
        jsonschema.validate({"name": "s", "base": "b.yaml", "grids": {}}, schema)


def test_without_sweep_the_schema_is_the_scenario_format():
    result = CliRunner().invoke(app, ["schema"])
    assert {"peers", "protocol", "clock"} <= set(json.loads(result.stdout)["properties"])


def test_a_sweep_with_the_replace_tag_validates(schema, tmp_path):
    path = tmp_path / "tagged.yaml"
    path.write_text(
        "name: tagged\nscenario: {name: s, peers: {count: 8}, protocol: {name: gossip}}\n"
        "cases:\n  - {label: a}\n  - {label: b, churn: !replace {model: none}}\n"
    )
    jsonschema.validate(as_json(path), schema)
