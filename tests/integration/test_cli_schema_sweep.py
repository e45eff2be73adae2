"""``avsim schema --sweep``: the sweep file's JSON Schema, whose inline ``scenario`` is
checked against the scenario format; the shipped sweep files validate against it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from sim.cli import app

ROOT = Path(__file__).resolve().parents[2]
SWEEP_FILES = sorted(
    path
    for path in (ROOT / "scenarios").rglob("*.yaml")
    if "cases" in (yaml.safe_load(path.read_text()) or {})
)


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
    jsonschema.validate(yaml.safe_load(path.read_text()), schema)


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
