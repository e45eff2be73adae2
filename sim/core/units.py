"""Quantities with units, parsed from strings into SI floats (bytes/s, seconds, bytes, 1/s).

Accepted spellings (case matters: ``b`` is a bit, ``B`` a byte):

- bandwidth: ``100 Mbit/s``, ``100 Mbps``, ``100 Mb/s``, ``12.5 MB/s``, ``12.5 MBps``,
  ``1 Gbit/s``, ``1 Gbps``, ``800 kbps``, ``1 GiB/s``, ``inf``; ``/sec`` may replace ``/s``.
- duration: ``20 ms``, ``0.5 s``, ``2 min``, ``1 h``, and the words ``second(s)``,
  ``sec(s)``, ``minute(s)``, ``min(s)``, ``hour(s)``, ``hr(s)``, ``day(s)``,
  ``millisecond(s)``; ``us`` or ``µs``, ``ns``.
- size: ``512 KiB``, ``4 MB``, ``1 Gbit``.
- rate (events per second, or per round on the rounds clock): ``3/min``, ``0.5/s``,
  ``2/h``, ``10 / hour``, ``0.5 Hz``.
- fraction or probability: ``30%`` (0.3), or a plain number.

Bare numbers are already in SI units. Decimal prefixes are powers of 1000, binary ones
(``Ki``, ``Mi``, ``Gi``) powers of 1024; ``bit`` is 1/8 byte.
"""

from __future__ import annotations

import math
import re

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER}|[-+]?inf)\s*([A-Za-zµμ/% ]*?)\s*$")

_PREFIX = {
    "": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4,
}  # fmt: skip
_BYTE_UNITS = {"B": 1.0, "byte": 1.0, "bytes": 1.0, "bit": 0.125, "bits": 0.125, "b": 0.125}
#: What follows a size to make it a bandwidth: ``/s`` or ``/sec``; ``ps`` after ``b``/``B``.
_PER_SECOND = ("/s", "/sec", "ps")
_SECONDS = ("s", "sec", "secs", "second", "seconds")
_TIME_UNITS = {
    "": 1.0, **dict.fromkeys(_SECONDS, 1.0),
    **dict.fromkeys(("ms", "msec", "millisecond", "milliseconds"), 1e-3),
    **dict.fromkeys(("us", "µs", "μs", "microsecond", "microseconds"), 1e-6),
    **dict.fromkeys(("ns", "nanosecond", "nanoseconds"), 1e-9),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
}  # fmt: skip

#: Largest rate a rate field accepts (events per second, or per round): one per
#: microsecond. Larger ones are typos (``3/ms`` for ``3/min``), and their events would
#: collide in float time.
MAX_RATE = 1e6
#: Shortest churn period (``bernoulli`` ``period``, ``exponential`` ``mtbf``/``mttr``):
#: 1 µs, the same resolution.
MIN_PERIOD_S = 1 / MAX_RATE

BANDWIDTH_EXPECTED = "a bandwidth like '100 Mbit/s', '100 Mbps' or '12.5 MB/s', or bytes/s"
DURATION_EXPECTED = "a duration like '20 ms', '2 min' or '1 hour', or a number of seconds"
SIZE_EXPECTED = "a size like '512 KiB' or a number of bytes"
RATE_EXPECTED = "a rate like '3/min', '0.5/s' or '2/h', or a number per second"
FRACTION_EXPECTED = "a fraction like 0.3 or '30%'"


def _split(text: str) -> tuple[float, str] | None:
    """``"3 / min"`` → ``(3.0, "/min")``; None when the text is not number-then-unit."""
    match = _QUANTITY.match(text)
    if not match:
        return None
    unit = re.sub(r"\s*/\s*", "/", match.group(2))
    if " " in unit:
        return None
    return float(match.group(1)), unit


def _bytes_factor(unit: str) -> float | None:
    for prefix, scale in _PREFIX.items():
        if unit.startswith(prefix) and unit[len(prefix) :] in _BYTE_UNITS:
            return scale * _BYTE_UNITS[unit[len(prefix) :]]
    return None


def _bandwidth_factor(unit: str) -> float | None:
    """Bytes/s per unit of ``unit`` (``Mbit/s``, ``Mbps``, ``MB/s``, ``Bps``), or None."""
    if unit == "":
        return 1.0
    for suffix in _PER_SECOND:
        stem = unit.removesuffix(suffix)
        if stem != unit and (suffix != "ps" or stem.endswith(("b", "B"))):
            return _bytes_factor(stem)
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an int beyond float range: as large as a float goes
            return math.inf
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
        factor = None if split is None else _bandwidth_factor(split[1])
        if split is not None and factor is not None:
            parsed = split[0] * factor
    result = _check(parsed, allow_inf=True)
    if result is None:
        raise ValueError(BANDWIDTH_EXPECTED)
    return result


def parse_duration(value: object, allow_inf: bool = False) -> float:
    """Seconds from a number or a string like ``20 ms``, ``2 min`` or ``1 hour``."""
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


def parse_rate(value: object) -> float:
    """Events per second (per round on the rounds clock) from a number or ``3/min``.

    Only the unit is checked here: the sign and finiteness are the field's to check.
    """
    parsed = _number(value)
    if parsed is None and isinstance(value, str):
        split = _split(value)
        if split is not None:
            number, unit = split
            if unit in ("", "Hz"):
                parsed = number
            elif unit.startswith("/") and unit[1:] and unit[1:] in _TIME_UNITS:
                parsed = number / _TIME_UNITS[unit[1:]]
    if parsed is None:
        raise ValueError(RATE_EXPECTED)
    return parsed


def parse_fraction(value: object) -> float:
    """A number from a number or a percentage string (``"30%"`` → 0.3).

    Only the spelling is checked here: the bounds are the field's to check.
    """
    parsed = _number(value)
    if parsed is None and isinstance(value, str):
        split = _split(value)
        if split is not None and split[1] in ("", "%"):
            parsed = split[0] / 100 if split[1] == "%" else split[0]
    if parsed is None:
        raise ValueError(FRACTION_EXPECTED)
    return parsed


def rate_value(value: object) -> object:
    """Before-validator of rate fields: strings become 1/s; other values pass through
    (to the field's own number check)."""
    return parse_rate(value) if isinstance(value, str) else value


def fraction_value(value: object) -> object:
    """Before-validator of fraction fields: ``"30%"`` becomes 0.3; other values pass
    through (to the field's own number check)."""
    return parse_fraction(value) if isinstance(value, str) else value


#: Decimal prefixes used to show a quantity (value in [1, 1000) after scaling).
_SHOW_PREFIXES = ("", "k", "M", "G", "T", "P")


def format_bandwidth(bytes_per_s: float) -> str:
    """A bandwidth as people write it: ``12.5e6`` bytes/s → ``100 Mbit/s``; ``inf``."""
    if math.isinf(bytes_per_s):
        return "inf"
    value, prefix = _scaled(bytes_per_s * 8)
    return f"{value:.4g} {prefix}bit/s"


def format_duration(seconds: float) -> str:
    """A duration in the unit that reads best: ``0.02`` → ``20 ms``, ``150`` → ``2.5 min``."""
    if math.isinf(seconds):
        return "inf"
    size = abs(seconds)
    for limit, scale, unit in ((1e-3, 1e-6, "us"), (1.0, 1e-3, "ms"), (120.0, 1.0, "s"),
                               (7200.0, 60.0, "min")):  # fmt: skip
        if size < limit:
            return f"{seconds / scale:.4g} {unit}" if size else "0 s"
    return f"{seconds / 3600.0:.4g} h"


def _scaled(value: float) -> tuple[float, str]:
    """``value`` divided by the largest decimal prefix that leaves it at least 1."""
    index = 0
    while index + 1 < len(_SHOW_PREFIXES) and abs(value) >= 1000.0 ** (index + 1):
        index += 1
    return value / 1000.0**index, _SHOW_PREFIXES[index]
