"""Quantities with units, parsed from strings into SI floats (bytes/s, seconds, bytes).

Accepted spellings: ``100 Mbit/s``, ``12.5 MB/s``, ``1 Gbit/s``, ``inf`` (bandwidth);
``20 ms``, ``0.5 s``, ``2 min``, ``1 h`` (duration); ``512 KiB``, ``4 MB`` (size). Bare
numbers are already in SI units. Decimal prefixes are powers of 1000, binary ones
(``Ki``, ``Mi``, ``Gi``) powers of 1024; ``bit`` is 1/8 byte.
"""

from __future__ import annotations

import math
import re

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER}|[-+]?inf)\s*([A-Za-z/]*)\s*$")

_PREFIX = {
    "": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4,
}  # fmt: skip
_BYTE_UNITS = {"B": 1.0, "byte": 1.0, "bytes": 1.0, "bit": 0.125, "bits": 0.125, "b": 0.125}
_TIME_UNITS = {
    "": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9,
    "min": 60.0, "h": 3600.0, "d": 86400.0,
}  # fmt: skip

BANDWIDTH_EXPECTED = "a bandwidth like '100 Mbit/s' or a number of bytes/s"
DURATION_EXPECTED = "a duration like '20 ms' or a number of seconds"
SIZE_EXPECTED = "a size like '512 KiB' or a number of bytes"


def _split(text: str) -> tuple[float, str] | None:
    match = _QUANTITY.match(text)
    if not match:
        return None
    return float(match.group(1)), match.group(2)


def _bytes_factor(unit: str) -> float | None:
    for prefix, scale in _PREFIX.items():
        if unit.startswith(prefix) and unit[len(prefix) :] in _BYTE_UNITS:
            return scale * _BYTE_UNITS[unit[len(prefix) :]]
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return None


def _check(value: float | None, allow_inf: bool) -> float | None:
    if value is None or math.isnan(value) or value < 0:
        return None
    if math.isinf(value) and not allow_inf:
        return None
    return value


def parse_bandwidth(value: object) -> float:
    """Bytes per second from a number or a string like ``100 Mbit/s``; ``inf`` allowed."""
    parsed = _number(value)
    if parsed is None and isinstance(value, str):
        split = _split(value)
        if split is not None:
            number, unit = split
            if unit == "" or unit.endswith("/s") or unit == "Bps":
                factor = _bytes_factor(unit[:-2]) if unit.endswith("/s") else 1.0
                parsed = None if factor is None else number * factor
    result = _check(parsed, allow_inf=True)
    if result is None:
        raise ValueError(BANDWIDTH_EXPECTED)
    return result


def parse_duration(value: object, allow_inf: bool = False) -> float:
    """Seconds from a number or a string like ``20 ms`` or ``2 min``."""
    parsed = _number(value)
    if parsed is None and isinstance(value, str):
        split = _split(value)
        if split is not None and split[1] in _TIME_UNITS:
            parsed = split[0] * _TIME_UNITS[split[1]]
    result = _check(parsed, allow_inf=allow_inf)
    if result is None:
        raise ValueError(DURATION_EXPECTED)
    return result


def parse_size(value: object) -> float:
    """Bytes from a number or a string like ``512 KiB``."""
    parsed = _number(value)
    if parsed is None and isinstance(value, str):
        split = _split(value)
        if split is not None:
            factor = 1.0 if split[1] == "" else _bytes_factor(split[1])
            parsed = None if factor is None else split[0] * factor
    result = _check(parsed, allow_inf=False)
    if result is None:
        raise ValueError(SIZE_EXPECTED)
    return result
