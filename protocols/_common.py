"""Helpers shared by the protocol modules: nominal traffic, mean drift, unit fields, wires."""

from __future__ import annotations

import math
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator, PlainSerializer, PlainValidator, WithJsonSchema

from sim.core import units
from sim.kernels._xp import column, namespace
from sim.kernels.compression import IDENTITY, Wire, WireName, wire_for

_QUANTITY_SCHEMA: dict[str, Any] = {"anyOf": [{"type": "number"}, {"type": "string"}]}

#: Seconds: a number or a string such as ``5 s`` or ``500 ms``.
Seconds = Annotated[
    float,
    PlainValidator(units.parse_duration),
    PlainSerializer(float, return_type=float),
    WithJsonSchema(_QUANTITY_SCHEMA),
]


#: Largest byte count a ``Bytes`` field takes (8 PiB): beyond it sizes no longer fit the
#: 64-bit integers the network arithmetic uses.
MAX_BYTES = 2**53


def _positive_bytes(value: object) -> int:
    size = units.parse_size(value)
    if not 1 <= size <= MAX_BYTES:
        raise ValueError(units.SIZE_EXPECTED + " of at least 1 byte (and at most 8 PiB)")
    return int(size)


#: Whole bytes in 1 … 2**53: a number or a string such as ``512 KiB``.
Bytes = Annotated[
    int,
    PlainValidator(_positive_bytes),
    PlainSerializer(int, return_type=int),
    WithJsonSchema(_QUANTITY_SCHEMA),
]


#: Events per peer per unit time: a number or a string such as ``3/min`` (fields add
#: ``gt=0, le=units.MAX_RATE, allow_inf_nan=False``).
Rate = Annotated[float, BeforeValidator(units.rate_value), WithJsonSchema(_QUANTITY_SCHEMA)]
#: A probability: a number or a percentage such as ``10%`` (fields add their bounds).
Probability = Annotated[
    float, BeforeValidator(units.fraction_value), WithJsonSchema(_QUANTITY_SCHEMA)
]


#: Wire compression of the vectors a protocol sends: the name of a wire
#: (:data:`sim.kernels.compression.WIRES`); the protocol builds it with :func:`wire_of`.
Compression = WireName


def wire_of(params: Any) -> Wire:
    """The wire of a protocol's parameters: :func:`~sim.kernels.compression.wire_for` of
    their ``compression``, the identity for a protocol that sends no compressed vectors."""
    name = getattr(params, "compression", None)
    return IDENTITY if name is None else wire_for(name)


def as_mask(present: Any, n_peers: int) -> np.ndarray:
    """The presence mask as a host boolean array of shape (n_peers,)."""
    mask = np.asarray(present, dtype=bool).reshape(-1)
    if mask.size != n_peers:
        raise ValueError(f"present mask has {mask.size} entries for {n_peers} peers")
    return mask


def butterfly_traffic(counts: np.ndarray, vector_bytes: int) -> tuple[float, int]:
    """Bytes and messages of butterfly all-reduces in groups of the given sizes.

    A group of g moves 2·(g−1)·S bytes (each member sends g−1 parts of S/g and gets the
    reduced parts back) in 2·g·(g−1) messages; a group of one sends nothing.
    """
    g = np.asarray(counts, dtype=np.int64)
    return float(2 * np.sum(g - 1) * vector_bytes), int(2 * np.sum(g * (g - 1)))


def ring_traffic(n: int, vector_bytes: int) -> tuple[float, int]:
    """Bytes and messages of one ring all-reduce over n peers: 2(n−1)·S and 2n(n−1)."""
    return float(2 * (n - 1) * vector_bytes), int(2 * n * (n - 1))


def shift_drift(shift: np.ndarray, n_peers: int) -> float:
    """How far a change of the global sum by ``shift`` ((dim,)) moved the global mean:
    ‖shift‖ / N / sqrt(dim).

    The norm is numpy's own sum of squares, not ``np.linalg.norm``: that is BLAS's dot,
    whose threads then spin for ~0.1 s of another core's time after each call (a third
    of a Moshpit network round's CPU at 1024 peers, stolen from a sweep's other worker),
    and whose order of additions depends on the CPU's kernel."""
    return math.sqrt(float(np.sum(shift * shift))) / n_peers / math.sqrt(shift.size)


def mean_drift(x: Any, column_excess: np.ndarray) -> float:
    """How far a step y = W x moves the global mean, given W's column sums minus 1.

    Σ_i y_i − Σ_i x_i = Σ_j c_j x_j with c_j = Σ_i W_ij − 1, so the mean moves by
    Σ_j c_j x_j / N; returned as its Euclidean norm / sqrt(dim) (0 when c = 0).
    """
    if not np.any(column_excess):
        return 0.0
    xp = namespace(x)
    shift = xp.sum(x * column(xp, x, column_excess), axis=0) / x.shape[0]
    return float(xp.sqrt(xp.sum(shift * shift))) / math.sqrt(x.shape[1])
