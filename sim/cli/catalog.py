"""``avsim list`` and ``avsim schema``: the protocols and the scenario format."""

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
def schema() -> None:
    """Print the JSON Schema of the scenario format (for editors)."""
    from sim.scenario import json_schema

    typer.echo(json.dumps(json_schema(), indent=2))


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
