"""Field types of the scenario: quantities with units and per-peer value distributions.

Each type parses with one plain validator so that a bad value gives exactly one error
naming what was expected, and exports a JSON Schema that accepts the unit strings.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator, PlainSerializer, PlainValidator, WithJsonSchema

from sim.core import units
from sim.core.errors import InnerKeyError

_QUANTITY_SCHEMA: dict[str, Any] = {"anyOf": [{"type": "number"}, {"type": "string"}]}


def _quantity(parser: Callable[[object], float]) -> Any:
    return (
        PlainValidator(parser),
        PlainSerializer(_format_number, return_type=Any),
        WithJsonSchema(_QUANTITY_SCHEMA),
    )


def _format_number(value: float) -> float | str:
    return "inf" if value == float("inf") else value


Bandwidth = Annotated[float, *_quantity(units.parse_bandwidth)]
Duration = Annotated[float, *_quantity(units.parse_duration)]
Size = Annotated[float, *_quantity(units.parse_size)]

#: Largest :data:`WholeBytes` (8 PiB): sizes stay exact in float64 and int64 arithmetic.
MAX_WHOLE_BYTES = 2**53


def _whole_bytes(value: object) -> int:
    """A positive whole number of bytes from a number or a size string (``1 GB``)."""
    size = units.parse_size(value)  # ValueError: not a size (a negative, NaN, inf, a word)
    if not (1 <= size <= MAX_WHOLE_BYTES and size == math.floor(size)):
        raise ValueError(
            f"expected a whole number of bytes from 1 to 2**53 (e.g. '1 GB'), got {value!r}"
        )
    return int(size)


#: A whole number of bytes in 1 … 2**53: a number or a size string such as ``1 GB``.
WholeBytes = Annotated[
    int,
    PlainValidator(_whole_bytes),
    PlainSerializer(int, return_type=int),
    WithJsonSchema(_QUANTITY_SCHEMA),
]
#: Events per second (per round on the rounds clock): a number or ``3/min``; the field
#: adds its bounds (``Field(gt=0, allow_inf_nan=False)``).
Rate = Annotated[float, BeforeValidator(units.rate_value), WithJsonSchema(_QUANTITY_SCHEMA)]
#: A fraction or probability: a number or ``30%``; the field adds its bounds.
Fraction = Annotated[float, BeforeValidator(units.fraction_value), WithJsonSchema(_QUANTITY_SCHEMA)]


@dataclass(frozen=True)
class PeerDist:
    """A per-peer value: a constant, or a distribution sampled once per peer.

    ``kind`` is ``const``, ``lognormal`` (``median``, ``sigma``), ``uniform`` (``low``,
    ``high``) or ``choice`` (``values``, ``weights``); numbers are already in SI units.
    """

    kind: str
    params: tuple[tuple[str, Any], ...]

    def get(self, key: str) -> Any:
        return dict(self.params)[key]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` values (float64) from the generator."""
        p = dict(self.params)
        if self.kind == "const":
            return np.full(n, p["value"], dtype=np.float64)
        if self.kind == "lognormal":
            return p["median"] * np.exp(p["sigma"] * rng.standard_normal(n))
        if self.kind == "uniform":
            return rng.uniform(p["low"], p["high"], n)
        values = np.asarray(p["values"], dtype=np.float64)
        weights = p["weights"]
        probs = None if weights is None else np.asarray(weights) / np.sum(weights)
        return rng.choice(values, size=n, p=probs)


_DIST_KEYS = {
    "lognormal": ({"median", "sigma"}, {"median"}),
    "uniform": ({"low", "high"}, {"low", "high"}),
    "choice": ({"values", "weights"}, set()),
}
#: Largest lognormal ``sigma``: one standard deviation is then e^10 ≈ 22 000 × the median,
#: and draws stay far from float overflow.
MAX_SIGMA = 10.0


def _peer_dist(parser: Callable[[object], float], expected: str) -> Callable[[object], PeerDist]:
    def validate(value: object) -> PeerDist:
        if isinstance(value, PeerDist):
            return value
        if not isinstance(value, dict):
            return PeerDist("const", (("value", _parse(parser, value, expected)),))
        return _parse_dist(dict(value), parser, expected)

    return validate


def _parse(
    parser: Callable[[object], float], value: object, expected: str, key: str | None = None
) -> float:
    """``parser(value)``; a refusal names ``key`` inside the distribution (when given)."""
    try:
        return parser(value)
    except ValueError:
        if key is not None:
            raise InnerKeyError(key, value, expected) from None
        raise ValueError(f"expected {expected}, got {value!r}") from None


def _parse_dist(data: dict[str, Any], parser: Callable[[object], float], expected: str) -> PeerDist:
    kind = data.pop("dist", None)
    if not isinstance(kind, str) or kind not in _DIST_KEYS:
        raise InnerKeyError("dist", kind, "one of: " + ", ".join(_DIST_KEYS))
    allowed, parsed_keys = _DIST_KEYS[kind]
    for key in data:
        if key not in allowed:
            raise InnerKeyError(str(key), data[key], "", known=["dist", *sorted(allowed)])
    optional = {"weights"} if kind == "choice" else set()
    for key in sorted(allowed - set(data) - optional):
        raise InnerKeyError(key, None, "a value (this key is required)")
    params: dict[str, Any] = {
        k: _finite(_parse(parser, data[k], expected, k), data[k], k, expected) for k in parsed_keys
    }
    if kind == "lognormal":
        params["sigma"] = _nonneg(data["sigma"], "sigma", upper=MAX_SIGMA)
    if kind == "uniform" and params["low"] > params["high"]:
        raise ValueError(f"expected low <= high, got low={data['low']!r}, high={data['high']!r}")
    if kind == "choice":
        params.update(_parse_choice(data, parser, expected))
    return PeerDist(kind, tuple(sorted(params.items())))


def _finite(value: float, raw: object, key: str, expected: str) -> float:
    if not math.isfinite(value):
        raise InnerKeyError(key, raw, f"a finite value ({expected})")
    return value


def _nonneg(value: object, key: str, upper: float = math.inf) -> float:
    number = _finite_number(value)
    if number is None or not 0 <= number <= upper:
        bound = "" if upper == math.inf else f" and <= {upper:g}"
        raise InnerKeyError(key, value, f"a finite number >= 0{bound}")
    return number


def _finite_number(value: object) -> float | None:
    """``value`` as a finite float, or None (bools, non-numbers, NaN, inf, huge ints)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _parse_choice(
    data: dict[str, Any], parser: Callable[[object], float], expected: str
) -> dict[str, Any]:
    values = data["values"]
    if not isinstance(values, list) or not values:
        raise InnerKeyError("values", values, "a non-empty list")
    weights = data.get("weights")
    if weights is not None:
        if not isinstance(weights, list) or len(weights) != len(values):
            raise InnerKeyError("weights", weights, f"a list as long as values ({len(values)})")
        weights = tuple(_nonneg(w, f"weights.{k}") for k, w in enumerate(weights))
        if not 0 < sum(weights) < math.inf:
            raise InnerKeyError("weights", list(weights), "weights with a positive, finite sum")
    parsed = tuple(_parse(parser, v, expected, f"values.{k}") for k, v in enumerate(values))
    return {"values": parsed, "weights": weights}


def dist_to_plain(value: PeerDist) -> Any:
    """A per-peer value as a scenario writes it: a number, or ``{dist: ..., ...}``."""
    params = dict(value.params)
    if value.kind == "const":
        return _format_number(params["value"])
    out: dict[str, Any] = {"dist": value.kind}
    for key, item in params.items():
        if isinstance(item, tuple):
            item = [_format_number(v) for v in item]
        elif isinstance(item, float):
            item = _format_number(item)
        if item is not None:
            out[key] = item
    return out


def _dist_schema(kind: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["dist", *required],
        "properties": {"dist": {"const": kind}, **properties},
        "additionalProperties": False,
    }


_DIST_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number"},
        {"type": "string"},
        _dist_schema(
            "lognormal",
            {
                "median": _QUANTITY_SCHEMA,
                "sigma": {"type": "number", "minimum": 0, "maximum": MAX_SIGMA},
            },
            ["median", "sigma"],
        ),
        _dist_schema(
            "uniform", {"low": _QUANTITY_SCHEMA, "high": _QUANTITY_SCHEMA}, ["low", "high"]
        ),
        _dist_schema(
            "choice",
            {
                "values": {"type": "array", "items": _QUANTITY_SCHEMA, "minItems": 1},
                "weights": {"type": "array", "items": {"type": "number", "minimum": 0}},
            },
            ["values"],
        ),
    ]
}


def _per_peer(parser: Callable[[object], float], expected: str) -> Any:
    """The pydantic metadata of a per-peer value field parsed by ``parser``."""
    return (
        PlainValidator(_peer_dist(parser, expected)),
        PlainSerializer(dist_to_plain, return_type=Any),
        WithJsonSchema(_DIST_SCHEMA),
    )


def _plain_number(value: object) -> float:
    number = _finite_number(value)
    if number is None or number < 0:
        raise ValueError
    return number


PeerBandwidth = Annotated[PeerDist, *_per_peer(units.parse_bandwidth, units.BANDWIDTH_EXPECTED)]
PeerDuration = Annotated[PeerDist, *_per_peer(units.parse_duration, units.DURATION_EXPECTED)]
PeerNumber = Annotated[PeerDist, *_per_peer(_plain_number, "a finite number >= 0")]


def const(value: float) -> PeerDist:
    """A constant per-peer value (for defaults)."""
    return PeerDist("const", (("value", float(value)),))
