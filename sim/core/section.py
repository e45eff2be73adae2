"""The base of every validated section (scenario, churn, workload, protocol parameters):
unknown keys are errors, values are frozen, and a boolean is never taken for a number.

pydantic's lax mode reads ``true`` as 1 for an ``int`` or ``float`` field, so ``peers:
{count: true}`` ran one peer; here it is an error naming the key.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, PlainValidator, model_validator

from sim.core.errors import InnerKeyError

__all__ = ["StrictSection"]


class StrictSection(BaseModel):
    """Strict (``extra="forbid"``), frozen, and no boolean where a number is expected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_for_a_number(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in numeric_fields(cls):
                value = data.get(name)
                if isinstance(value, bool):  # the error names the key inside the section
                    raise InnerKeyError(name, value, "a number, not a boolean")
        return data


@functools.cache
def numeric_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The keys (aliases where set) of ``model``'s fields whose type admits a number but
    not a boolean and that no parser of their own reads, in declaration order (the first
    one wrong is the one named)."""
    return tuple(
        info.alias or name
        for name, info in model.model_fields.items()
        if _numeric(info.annotation)
        # a field with a parser of its own (sizes, durations) says what it expects itself
        and not any(isinstance(meta, PlainValidator) for meta in info.metadata)
    )


def _numeric(annotation: Any) -> bool:
    kinds = _members(annotation)
    return bool(kinds & {int, float}) and bool not in kinds


def _members(annotation: Any) -> set[Any]:
    """The types a union (or ``Annotated``) annotation is made of, unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *metadata = typing.get_args(annotation)
        if any(isinstance(meta, PlainValidator) for meta in metadata):
            return {PlainValidator}  # a type with its own parser: not a plain number
        return _members(inner)
    if origin is typing.Union or origin is types.UnionType:
        return set().union(*(_members(arg) for arg in typing.get_args(annotation)))
    return {annotation}
