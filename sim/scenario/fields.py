"""Field types of the scenario: quantities with units and per-peer value distributions.

Each type parses with one plain validator so that a bad value gives exactly one error
naming what was expected, and exports a JSON Schema that accepts the unit strings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from sim import units

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


def _peer_dist(parser: Callable[[object], float], expected: str) -> Callable[[object], PeerDist]:
    def validate(value: object) -> PeerDist:
        if isinstance(value, PeerDist):
            return value
        if not isinstance(value, dict):
            return PeerDist("const", (("value", _parse(parser, value, expected)),))
        return _parse_dist(dict(value), parser, expected)

    return validate


def _parse(parser: Callable[[object], float], value: object, expected: str) -> float:
    try:
        return parser(value)
    except ValueError:
        raise ValueError(f"expected {expected}, got {value!r}") from None


def _parse_dist(data: dict[str, Any], parser: Callable[[object], float], expected: str) -> PeerDist:
    kind = data.pop("dist", None)
    if kind not in _DIST_KEYS:
        raise ValueError(
            f"expected a value or {{dist: lognormal | uniform | choice, ...}}, got dist={kind!r}"
        )
    allowed, parsed_keys = _DIST_KEYS[kind]
    unknown = set(data) - allowed
    missing = allowed - set(data) - ({"weights"} if kind == "choice" else set())
    if unknown or missing:
        raise ValueError(
            f"expected {kind} keys {sorted(allowed)}, "
            f"got unknown {sorted(unknown)} / missing {sorted(missing)}"
        )
    params: dict[str, Any] = {k: _parse(parser, data[k], expected) for k in parsed_keys}
    if kind == "lognormal":
        params["sigma"] = _nonneg(data["sigma"], "sigma")
    if kind == "uniform" and params["low"] > params["high"]:
        raise ValueError(f"expected low <= high, got low={data['low']!r}, high={data['high']!r}")
    if kind == "choice":
        params.update(_parse_choice(data, parser, expected))
    return PeerDist(kind, tuple(sorted(params.items())))


def _nonneg(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"expected {key} to be a number >= 0, got {value!r}")
    return float(value)


def _parse_choice(
    data: dict[str, Any], parser: Callable[[object], float], expected: str
) -> dict[str, Any]:
    values = data["values"]
    if not isinstance(values, list) or not values:
        raise ValueError(f"expected values to be a non-empty list, got {values!r}")
    weights = data.get("weights")
    if weights is not None:
        if not isinstance(weights, list) or len(weights) != len(values):
            raise ValueError(f"expected weights: a list as long as values, got {weights!r}")
        weights = tuple(_nonneg(w, "each weight") for w in weights)
        if sum(weights) <= 0:
            raise ValueError(f"expected weights with a positive sum, got {list(weights)!r}")
    return {"values": tuple(_parse(parser, v, expected) for v in values), "weights": weights}


def _dist_to_plain(value: PeerDist) -> Any:
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


_DIST_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number"},
        {"type": "string"},
        {
            "type": "object",
            "required": ["dist"],
            "properties": {"dist": {"enum": list(_DIST_KEYS)}},
        },
    ]
}


def _per_peer(parser: Callable[[object], float], expected: str) -> Any:
    return Annotated[
        PeerDist,
        PlainValidator(_peer_dist(parser, expected)),
        PlainSerializer(_dist_to_plain, return_type=Any),
        WithJsonSchema(_DIST_SCHEMA),
    ]


def _plain_number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError
    return float(value)


PeerBandwidth = _per_peer(units.parse_bandwidth, units.BANDWIDTH_EXPECTED)
PeerDuration = _per_peer(units.parse_duration, units.DURATION_EXPECTED)
PeerNumber = _per_peer(_plain_number, "a number >= 0")


def const(value: float) -> PeerDist:
    """A constant per-peer value (for defaults)."""
    return PeerDist("const", (("value", float(value)),))
