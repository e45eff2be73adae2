"""``avsim list`` and ``avsim schema``: the protocols, the scenario and sweep formats."""

from __future__ import annotations

import json
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import typer

from sim.cli.app import app


@app.command("list")
def list_protocols() -> None:
    """List the protocols, their descriptions and their parameters with defaults."""
    from protocols import REGISTRY

    for name, protocol in REGISTRY.items():
        typer.echo(f"{name}: {_first_line(protocol.description)}")
        for line in _param_lines(protocol.Params):
            typer.echo(f"    {line}")


@app.command()
def schema(
    sweep: Annotated[
        bool, typer.Option("--sweep", help="The sweep file format instead of the scenario's.")
    ] = False,
) -> None:
    """Print the JSON Schema of the scenario file format (for editors).

    With --sweep, the sweep file format's.
    """
    from sim.model.scenario import json_schema

    typer.echo(json.dumps(sweep_schema() if sweep else json_schema(), indent=2))


def sweep_schema() -> dict[str, Any]:
    """The sweep file's JSON Schema, its inline ``scenario`` checked as a scenario.

    The scenario format sits under ``$defs/Scenario`` without its required keys: a sweep's
    base may leave to the cases what every case sets (e.g. ``protocol``).
    """
    from sim.model.scenario import json_schema
    from sim.output.sweeps.spec import json_schema as sweep_json_schema

    result = sweep_json_schema()
    scenario = json_schema()
    defs = {**scenario.pop("$defs", {}), **result.get("$defs", {})}
    scenario.pop("required", None)
    defs["Scenario"] = scenario
    inline = result["properties"]["scenario"]
    inline["anyOf"] = [{"$ref": "#/$defs/Scenario"}, {"type": "null"}]
    result["$defs"] = defs
    return result


def _param_lines(params: Any) -> list[str]:
    lines = []
    for name, field in params.model_fields.items():
        if name == "name":
            continue
        default = (
            "required"
            if field.is_required()
            else repr(field.get_default(call_default_factory=True))
        )
        kind = _type_name(field.annotation)
        about = f"  {field.description}" if field.description else ""
        lines.append(f"{name}: {kind} = {default}{about}")
    return lines


def _type_name(annotation: Any) -> str:
    """``int``, ``idealized|partial|abort`` for a Literal, ``str | None``."""
    origin = get_origin(annotation)
    if origin is Literal:
        return "|".join(str(arg) for arg in get_args(annotation))
    if origin is Annotated:
        return _type_name(get_args(annotation)[0])
    if origin in (Union, UnionType):
        return " | ".join(_type_name(arg) for arg in get_args(annotation))
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""
