"""The protocol registry: every concrete protocol class, under its YAML name.

A protocol class registers itself when it is defined
(:meth:`protocols.base.Protocol.__init_subclass__` calls :func:`register`), so the
registry, the module and the parameter model cannot disagree: a class is concrete when
it sets ``Params`` itself, and its name is the one value of ``Params.name``
(``Literal["<name>"]``). Registration refuses, with the rule broken in the message:

- a ``Params`` that is not a :class:`~protocols.base.ProtocolParams` or whose ``name``
  is not a one-value ``Literal`` defaulting to that value;
- a class outside the module ``protocols/<name>.py`` (the YAML name is the module name);
- a missing ``description`` (``avsim list`` shows it);
- a module docstring without its messages and its invariants table (:data:`DOC_PARTS`);
- a class that leaves an abstract hook unimplemented;
- a second class under a name already taken (re-running the same module, as
  ``importlib.reload`` does, replaces its own class).

:mod:`protocols` imports every public module of the package, so adding a protocol is
adding its module.
"""

from __future__ import annotations

import sys
import typing
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from protocols.base import Protocol

#: Every registered protocol class by name (sorted by name once :mod:`protocols` has
#: imported the package).
REGISTRY: dict[str, type[Protocol]] = {}

#: What a protocol module's docstring must contain: its messages, and its invariants
#: table (the tests and ``docs/guarantees.md`` cite it).
DOC_PARTS = ("Messages", "Invariants", "| quantity | guarantee | failure modes |")

#: The package a protocol module lives in.
PACKAGE = "protocols"


def register(cls: type[Protocol]) -> str:
    """Check ``cls`` against the rules above and register it; returns its name.

    Raises
    ------
    TypeError
        Naming the class and every rule it breaks.
    """
    name = params_name(cls)
    where = f"protocol class {cls.__module__}.{cls.__qualname__}"
    if name is None:
        raise TypeError(
            f"{where}: Params must have a field name: Literal['<name>'] = '<name>' "
            "(one value: the protocol's YAML name)"
        )
    problems = _problems(cls, name)
    if problems:
        raise TypeError(f"{where} (name {name!r}): " + "; ".join(problems))
    known = REGISTRY.get(name)
    if known is not None and _key(known) != _key(cls):
        raise TypeError(
            f"{where}: the name {name!r} is already registered by "
            f"{known.__module__}.{known.__qualname__}"
        )
    REGISTRY[name] = cls
    return name


def params_name(cls: type) -> str | None:
    """The one value of ``cls.Params.name`` (``Literal["<name>"]``, defaulting to it), or
    None when the field does not have that form."""
    fields = getattr(getattr(cls, "Params", None), "model_fields", {})
    field = fields.get("name")
    if field is None or typing.get_origin(field.annotation) is not typing.Literal:
        return None
    values = typing.get_args(field.annotation)
    if len(values) != 1 or not isinstance(values[0], str) or field.default != values[0]:
        return None
    return values[0]


def abstract_methods(cls: type) -> list[str]:
    """The abstract hooks ``cls`` leaves unimplemented (computed from the class itself:
    ``abc`` sets ``__abstractmethods__`` only after ``__init_subclass__`` has run)."""
    declared = {
        name
        for klass in cls.__mro__
        for name, value in vars(klass).items()
        if getattr(value, "__isabstractmethod__", False)
    }
    return sorted(
        name for name in declared if getattr(getattr(cls, name), "__isabstractmethod__", False)
    )


def _problems(cls: type[Protocol], name: str) -> list[str]:
    from protocols.base import ProtocolParams

    problems = []
    if not issubclass(cls.Params, ProtocolParams):
        problems.append("Params must subclass protocols.base.ProtocolParams")
    module = f"{PACKAGE}.{name}"
    if cls.__module__ != module:
        problems.append(f"it must be defined in the module {module} (protocols/{name}.py)")
    if not cls.description:
        problems.append("it needs a one-line description (avsim list shows it)")
    doc = getattr(sys.modules.get(cls.__module__), "__doc__", None) or ""
    missing = [part for part in DOC_PARTS if part not in doc]
    if missing:
        problems.append(f"its module docstring lacks {missing} (messages, invariants table)")
    abstract = abstract_methods(cls)
    if abstract:
        problems.append(f"it leaves abstract: {', '.join(abstract)}")
    return problems


def _key(cls: type) -> tuple[str, str]:
    return cls.__module__, cls.__qualname__
