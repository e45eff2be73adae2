"""Overrides: dotted keys (``--set``, the API's ``overrides``, a sweep's cases and grid)
applied to a scenario mapping.

A key is a dotted path; a part that is a whole number indexes a list
(``peers.classes.1.upload``, ``network.links.0.capacity``). A mapping value **merges**
into the mapping already there, key by key, so ``{"churn": {"p": 0.1}}`` changes only
``churn.p``; wrapped in :class:`Replace` (``--set 'churn:={…}'`` on the command line,
``!replace {…}`` in YAML) it **replaces** the whole value. A ``protocol`` mapping with
another ``name`` replaces the protocol (its parameters belong to the old one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sim.core.errors import ScenarioError


@dataclass(frozen=True)
class Replace:
    """An override value that replaces what is at its key instead of merging into it.

    ``sim.load_scenario(path, overrides={"churn": Replace({"model": "none"})})``.
    """

    value: Any

    def __str__(self) -> str:
        return json.dumps(plain(self.value), separators=(",", ":"), default=str)


def plain(value: Any) -> Any:
    """A copy of ``value`` with every :class:`Replace` unwrapped (mappings and lists
    copied; shared sub-mappings become independent copies)."""
    if isinstance(value, Replace):
        return plain(value.value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """A copy of ``data`` with the dotted-key (or nested-mapping) ``overrides`` applied.

    Raises
    ------
    ScenarioError
        Naming the key when a part of it indexes something that is not a mapping or a
        list, or a list out of range.
    """
    if not isinstance(overrides, dict | None):
        raise ScenarioError("overrides", overrides, "a mapping of dotted keys to values")
    out: dict[str, Any] = plain(data)
    for key, value in (overrides or {}).items():
        parts = split_key(key)
        target: dict[Any, Any] | list[Any] = out
        for i in range(len(parts) - 1):
            target = _child(target, parts, i)
        if isinstance(target, list):
            _merge_at(target, _index(target, parts, len(parts) - 1), value)
        else:
            _merge_at(target, parts[-1], value)
    return out


def split_key(key: object) -> list[str]:
    """``"peers.classes.1.upload"`` → its parts; ScenarioError on an empty part."""
    parts = key.split(".") if isinstance(key, str) else []
    if not parts or not all(part.strip() for part in parts):
        raise ScenarioError(str(key), key, "a dotted key like peers.count (no empty parts)")
    return [part.strip() for part in parts]


def _child(
    target: dict[Any, Any] | list[Any], parts: list[str], i: int
) -> dict[Any, Any] | list[Any]:
    """The mapping or list at ``parts[i]`` in ``target``, made (as a mapping) if absent."""
    here = ".".join(parts[: i + 1])
    if isinstance(target, list):
        index = _index(target, parts, i)
        child = target[index]
    else:
        child = target.get(parts[i])
    if child is None:
        following = parts[i + 1]
        if following.isdecimal():
            raise ScenarioError(here, None, f"a list to index with {following} (it is not set)")
        child = {}
        if isinstance(target, list):
            target[index] = child
        else:
            target[parts[i]] = child
    if not isinstance(child, dict | list):
        raise ScenarioError(here, child, "a mapping or a list to set keys in")
    return child


def _index(target: list[Any], parts: list[str], i: int) -> int:
    """``parts[i]`` as an index of the list ``target``, checked."""
    part, here = parts[i], ".".join(parts[: i + 1])
    parent = ".".join(parts[:i]) or "<top>"
    if not target:
        raise ScenarioError(here, part, f"no index ({parent} is an empty list)")
    number = int(part) if part.isdecimal() and part.isascii() else None
    if number is None or number >= len(target):
        raise ScenarioError(
            here,
            part if number is None else number,
            f"an index in 0..{len(target) - 1} ({parent} is a list of {len(target)})",
        )
    return number


def _merge_at(target: dict[Any, Any] | list[Any], slot: Any, value: Any) -> None:
    """Merge ``value`` into ``target[slot]`` (see the module doc); ``slot`` is a key of a
    mapping or a checked index of a list."""
    current = target[slot] if isinstance(target, list) else target.get(slot)
    replaces_protocol = slot == "protocol" and isinstance(value, dict) and "name" in value
    if isinstance(value, Replace):
        target[slot] = plain(value.value)
    elif isinstance(current, dict) and isinstance(value, dict) and not replaces_protocol:
        for sub_key, sub_value in value.items():
            _merge_at(current, sub_key, sub_value)
    elif replaces_protocol and isinstance(current, dict) and current.get("name") == value["name"]:
        target[slot] = {**current, **plain(value)}
    else:
        target[slot] = plain(value)


__all__ = ["Replace", "apply_overrides", "plain", "split_key"]
