"""Turn a pydantic ValidationError into one :class:`ScenarioError` with a dotted key."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import ValidationError

from sim.core.errors import InnerKeyError, ScenarioError

_STRIP = ("Value error, ", "Input should be ", "Assertion failed, ")


def from_validation_error(exc: ValidationError, data: dict[str, Any]) -> ScenarioError:
    """The first error of ``exc`` as a ScenarioError (key, got, expected)."""
    error = exc.errors(include_url=False)[0]
    loc = [str(part) for part in error["loc"]]
    kind = error["type"]
    inner = error.get("ctx", {}).get("error")
    if isinstance(inner, InnerKeyError):
        key = f"{_dotted(loc, data)}.{inner.key}" if loc else inner.key
        if inner.known is not None:
            return UnknownKey(key, inner.got, inner.known)
        return ScenarioError(key, inner.got, inner.expected)
    if kind == "union_tag_invalid":
        tag = error["ctx"]["discriminator"].strip("'")
        known = error["ctx"]["expected_tags"].replace("'", "")
        return ScenarioError(".".join([*loc, tag]), error["ctx"]["tag"], f"one of: {known}")
    if kind == "union_tag_not_found":
        tag = error["ctx"]["discriminator"].strip("'")
        return ScenarioError(".".join([*loc, tag]), None, f"a {tag} key")
    key = _dotted(loc, data)
    if kind == "extra_forbidden":
        return UnknownKey(key, error["input"], _known_keys(loc, data))
    if kind == "missing":
        return ScenarioError(key, None, "a value (this key is required)")
    return ScenarioError(key, error["input"], _expected(error))


class UnknownKey(ScenarioError):
    """A key the format does not have (a typo, most often)."""

    def __init__(self, key: str, got: Any, known: list[str]) -> None:
        super().__init__(key, got, "")
        listing = f"; known keys here: {', '.join(known)}" if known else ""
        self.args = (f"{key}: unknown key{listing}",)


def _dotted(loc: list[str], data: Any) -> str:
    """Drop union-tag elements pydantic adds to locations (``protocol.moshpit.x``)."""
    kept: list[str] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part not in node and kept:
            tag = node.get("name", node.get("model"))
            if part == tag:
                continue
        kept.append(part)
        node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, list):
            node = None
    return ".".join(kept)


def _known_keys(loc: list[str], data: dict[str, Any]) -> list[str]:
    from sim.model.scenario.models import Scenario  # local: models import this module's users

    model: Any = Scenario
    node: Any = data
    for part in _dotted(loc, data).split(".")[:-1]:
        field = getattr(model, "model_fields", {}).get(part)
        node = node.get(part) if isinstance(node, dict) else None
        model = None if field is None else _model_of(field.annotation, node)
        if model is None:
            return []
    fields = getattr(model, "model_fields", {})
    return sorted(field.alias or name for name, field in fields.items())


def _model_of(annotation: Any, node: Any) -> Any:
    """The pydantic model an annotation stands for; in a tagged union the one ``node`` picks."""
    models = [t for t in _flatten(annotation) if hasattr(t, "model_fields")]
    for model in models:
        for tag in ("name", "model"):
            field = model.model_fields.get(tag)
            if (
                isinstance(node, dict)
                and field is not None
                and node.get(tag) in get_args(field.annotation)
            ):
                return model
    return models[0] if models else None


def _flatten(annotation: Any) -> list[Any]:
    args = get_args(annotation)
    return [annotation] if not args else [a for arg in args for a in _flatten(arg)]


def _plural(count: object, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


#: What pydantic's terse messages expect, in words, by error type.
_BY_TYPE: dict[str, Any] = {
    "string_pattern_mismatch": lambda ctx: f"a string matching {ctx['pattern']}",
    "string_too_short": lambda ctx: (
        f"a string of at least {_plural(ctx['min_length'], 'character')}"
    ),
    "string_too_long": lambda ctx: f"a string of at most {_plural(ctx['max_length'], 'character')}",
    "too_short": lambda ctx: f"at least {_plural(ctx['min_length'], 'item')}",
    "too_long": lambda ctx: f"at most {_plural(ctx['max_length'], 'item')}",
    "int_parsing_size": lambda ctx: (
        "an integer of a size that can be stored (this one is too large)"
    ),
    "int_from_float": lambda ctx: "a whole number",
    "model_type": lambda ctx: "a mapping",
    "model_attributes_type": lambda ctx: "a mapping",
    "dict_type": lambda ctx: "a mapping",
}


def _expected(error: Any) -> str:
    if error["type"] in _BY_TYPE:
        return str(_BY_TYPE[error["type"]](error.get("ctx", {})))
    message = str(error["msg"])
    for prefix in _STRIP:
        if message.startswith(prefix):
            message = message[len(prefix) :]
    if message.startswith("expected "):
        message = message[len("expected ") :]
        # a validator's own message already says "got ...": keep only what it expected
        message = message.split(", got ")[0]
    return message
