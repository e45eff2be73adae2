"""Short names for a sweep's cases, grid cells and kept run folders.

A case is named by its ``label:`` key when it has one; otherwise by what it changes in
the base scenario: the protocol's name when the case touches the protocol, followed by
the parameters that differ from the base (all those written, when the case switches to
another protocol), then the other keys that differ. A case equal to the base is
``base`` (or the protocol's name when it rewrites the protocol). Values read as written
in YAML: ``moshpit``, ``moshpit(load_balance=false)``, ``all_reduce, churn.p=0.01``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sim.model.scenario import Replace, apply_overrides

#: The key of a case that names it (never passed to the scenario).
LABEL_KEY = "label"
#: Characters kept in a run folder's name; any run of others becomes one ``-``.
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]+")
#: Longest part of a run folder's name (longer parts are cut and given a short hash).
MAX_PART_CHARS = 60


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"protocol": {"name": "x"}, "churn.p": 0}`` → ``{"protocol.name": "x", "churn.p": 0}``."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def case_overrides(case: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario overrides of a case (the case without its ``label``)."""
    return {key: value for key, value in case.items() if key != LABEL_KEY}


def case_labels(
    cases: Sequence[Mapping[str, Any]], base: Mapping[str, Any] | None = None
) -> list[str]:
    """One label per case: its ``label:``, or one derived from what it changes in ``base``.

    Derived labels that coincide get `` #<case index>``; explicit labels are unique (the
    sweep file's validation checks it).
    """
    labels = [
        str(case[LABEL_KEY]) if LABEL_KEY in case else case_label(case_overrides(case), base)
        for case in cases
    ]
    return [
        f"{label} #{index}" if labels.count(label) > 1 else label
        for index, label in enumerate(labels)
    ]


def case_label(case: Mapping[str, Any], base: Mapping[str, Any] | None = None) -> str:
    """The label of one case from what it changes in ``base`` (default: an empty base)."""
    base = dict(base or {})
    flat = flatten(case)
    resolved = apply_overrides(base, dict(case))
    name = _get(resolved, "protocol.name")
    switched = name != _get(base, "protocol.name")
    in_protocol = [k for k in flat if k == "protocol" or k.startswith("protocol.")]
    params = [
        f"{k.removeprefix('protocol.')}={show(v)}"
        for k, v in flat.items()
        if k in in_protocol and k != "protocol.name" and (switched or _differs(base, k, v))
    ]
    others = [
        f"{k}={show(v)}" for k, v in flat.items() if k not in in_protocol and _differs(base, k, v)
    ]
    head = []
    if in_protocol and name is not None:
        head = [f"{name}({','.join(params)})" if params else str(name)]
    return ", ".join(head + others) or "base"


def show(value: Any) -> str:
    """A value as it reads in a table cell: YAML spelling for scalars, mappings as
    ``k=v,k=v`` (nested ones in parentheses), lists as ``[a,b]``."""
    if isinstance(value, Replace):
        return show(value.value)
    if isinstance(value, Mapping):
        return ",".join(f"{k}={cell_value(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "[" + ",".join(cell_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return str(value)


def cell_text(cell: Mapping[str, Any]) -> str:
    """A grid cell as one line: ``peers.count=64, churn=(model=exponential,mtbf=10 min)``."""
    return ", ".join(f"{key}={cell_value(value)}" for key, value in cell.items())


def row_label(case: str, cell: Mapping[str, Any]) -> str:
    """The label of a table row (and a figure's legend entry): the case, then the cell."""
    return ", ".join(part for part in (case, cell_text(cell)) if part)


def json_text(value: Any) -> str:
    """Compact JSON of a value (how mappings and lists are stored in parquet columns)."""
    return json.dumps(value, separators=(",", ":"), default=_unwrapped)


def run_dir_names(parts: Sequence[Sequence[str]]) -> list[str]:
    """Unique, filesystem-safe folder names, one per run, from its name parts.

    Each part is reduced to ``[A-Za-z0-9._=,+-]`` and cut to :data:`MAX_PART_CHARS`; the
    parts are joined by ``__``. Names that still coincide get ``__run=<index>``.
    """
    names = ["__".join(_safe(part) for part in run) for run in parts]
    counts = Counter(names)  # not names.count per name: quadratic in a sweep's runs
    return [
        f"{name}__run={index}" if counts[name] > 1 else name for index, name in enumerate(names)
    ]


def run_name_parts(case: str, cell: Mapping[str, Any], seed: int) -> list[str]:
    """The parts of a kept run folder's name: case, ``key=value`` per grid key, seed."""
    return [case, *(f"{key}={show(value)}" for key, value in cell.items()), f"seed={seed}"]


def _safe(part: str) -> str:
    text = _UNSAFE.sub("-", part).strip("-.") or "x"
    if len(text) <= MAX_PART_CHARS:
        return text
    digest = hashlib.sha256(part.encode()).hexdigest()[:8]
    return f"{text[: MAX_PART_CHARS - 9]}-{digest}"


def from_stored(value: Any) -> Any:
    """A value read back from a sweep's parquet tables: a mapping or a list that
    :func:`json_text` stored as JSON text is that mapping or list again; any other
    value is returned as it is."""
    if not (isinstance(value, str) and value[:1] in ("{", "[")):
        return value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return value
    return parsed if isinstance(parsed, dict | list) else value


def _unwrapped(value: Any) -> Any:
    """JSON's fallback: the value inside a :class:`Replace`, else the text of the value."""
    return value.value if isinstance(value, Replace) else str(value)


def cell_value(value: Any) -> str:
    """A value as it reads after ``key=`` in a row label: :func:`show`, a mapping in
    parentheses (``(model=exponential,mtbf=10 min)``)."""
    inside = value.value if isinstance(value, Replace) else value
    return f"({show(inside)})" if isinstance(inside, Mapping) else show(inside)


def _get(mapping: Mapping[str, Any], dotted: str) -> Any:
    node: Any = mapping
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _differs(base: Mapping[str, Any], dotted: str, value: Any) -> bool:
    node: Any = base
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return True
        node = node[part]
    return bool(node != value)
