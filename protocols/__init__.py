"""Protocols: one module per protocol family; each registers itself.

The YAML ``protocol.name`` equals the module name (``protocols/<name>.py``). Each module
opens with its algorithm, its messages and its invariants table, and defines one
protocol class; defining the class registers it (:mod:`protocols._registry`, which
refuses a class that breaks a rule). This package imports every public module, in
sorted order, so adding a protocol is adding its module. :mod:`protocols.base` holds the
protocol classes, :mod:`protocols.contract` the types they exchange with the engine.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Annotated, Any, Union

from pydantic import Field

from protocols._registry import REGISTRY
from protocols.base import (
    BarrierProtocol,
    ContinuousProtocol,
    GroupProtocol,
    MailboxProtocol,
    Protocol,
    clocks_of,
    schedules_of,
)
from sim.core.errors import ScenarioError


def _import_modules() -> None:
    """Import every public module of the package (each protocol module registers its
    class), then order the registry by name: ``avsim list``, the error listing the
    known names and the scenario schema follow it."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    for name in names:
        importlib.import_module(f"{__name__}.{name}")
    ordered = sorted(REGISTRY.items())
    REGISTRY.clear()
    REGISTRY.update(ordered)


_import_modules()


def get(name: str) -> type[Protocol]:
    """The protocol class registered as ``name``.

    Raises
    ------
    sim.core.errors.ScenarioError
        On ``protocol.name`` when ``name`` is not registered; the message lists the
        known names.
    """
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ScenarioError("protocol.name", name, "one of: " + ", ".join(REGISTRY)) from None


def params_union() -> Any:
    """The pydantic union of every protocol's ``Params``, discriminated by ``name``."""
    members = tuple(cls.Params for cls in REGISTRY.values())
    if len(members) == 1:
        return members[0]
    return Annotated[Union[members], Field(discriminator="name")]  # noqa: UP007


__all__ = [
    "REGISTRY",
    "BarrierProtocol",
    "ContinuousProtocol",
    "GroupProtocol",
    "MailboxProtocol",
    "Protocol",
    "clocks_of",
    "get",
    "params_union",
    "schedules_of",
]
