"""The scenario format: models, loading, overrides and the JSON Schema."""

from sim.model.scenario.loader import (
    Replace,
    SweepFileError,
    apply_overrides,
    json_schema,
    load_scenario,
    parse_set_options,
    read_yaml,
    scenario_from_mapping,
)
from sim.model.scenario.models import Scenario

__all__ = [
    "Replace",
    "Scenario",
    "SweepFileError",
    "apply_overrides",
    "json_schema",
    "load_scenario",
    "parse_set_options",
    "read_yaml",
    "scenario_from_mapping",
]
