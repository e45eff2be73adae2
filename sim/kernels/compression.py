"""Wire compression as objects: what a message costs in bytes and what its receiver decodes.

A :class:`Wire` is how vectors travel between peers (``protocol.compression`` names
one). It answers two questions, vectorised over messages (rows of an
``(n_messages, n_coords)`` array on any array-API backend, each quantized with its own
statistics): :meth:`Wire.nbytes`, the bytes of messages of given sizes, and
:meth:`Wire.receive`, the values a receiver decodes. There is no byte stream: we
simulate the receiver's values, so there is no separate compress/extract pair.

| name | class | receiver gets | bytes per message of n coordinates |
| --- | --- | --- | --- |
| ``none`` | :class:`IdentityWire` | x itself | n·itemsize |
| ``fp16`` | :class:`Fp16Wire` | x rounded to float16 (clamped to ±65504) | 2n |
| ``uniform8`` | :class:`Uniform8Wire` | centre of x's bin among 256 on mean ± 6σ | n + 2·4 |
| ``quantile8`` | :class:`Quantile8Wire` | mean of x's bin among 256 equal-count bins | n + 256·4 |

A message of zero coordinates is not sent (0 bytes). :func:`wire_for` is the one place
that maps a name to its wire; protocols call it once, when they are built, and hand the
object to the kernels. The name-level functions below (:func:`roundtrip`,
:func:`wire_bytes`, ...) are shorthands for the same objects.

References
----------
hivemind, ``hivemind/compression/base.py``: ``CompressionBase`` with ``NoCompression``
(and ``Float16Compression``, ``Uniform8BitQuantization``, ``Quantile8BitQuantization``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from sim.kernels._xp import namespace
from sim.kernels.quantize import FP16_MAX, N_BINS, UNIFORM8_SIGMAS, fp16_round, quantile8, uniform8

__all__ = [
    "FP16_MAX",
    "IDENTITY",
    "METHODS",
    "N_BINS",
    "UNIFORM8_SIGMAS",
    "WIRES",
    "Fp16Wire",
    "IdentityWire",
    "Quantile8Wire",
    "Uniform8Wire",
    "Wire",
    "WireLike",
    "WireName",
    "as_wire",
    "fp16_round",
    "roundtrip",
    "roundtrip_parts",
    "wire_bytes",
    "wire_bytes_of",
    "wire_for",
]

_FLOAT32_BYTES = 4


class Wire:
    """How a message travels: its bytes, and the values its receiver decodes.

    A subclass sets ``name`` (its ``protocol.compression`` value), ``header_bytes`` and
    :meth:`coord_bytes`, and implements :meth:`_decode`. Wires hold no state; the
    registry :data:`WIRES` holds one instance of each.

    ``exact`` is True for the identity wire only: :meth:`receive` returns its input
    itself (no copy), so the receiver has the sender's values bit for bit. Code may
    read it, never the name, and only to skip work an exact wire makes useless:

    - kernels use one difference for both ends of an exchange and decode nothing
      (:mod:`sim.kernels.pairwise`, :func:`~sim.kernels.mixing.a2cid2_exchange`,
      :func:`~sim.kernels.butterfly.butterfly_pieces`);
    - protocols take the exact-mean kernels (``group_mean``, ``neighbour_mean``) instead
      of the message-by-message arithmetic (butterfly pieces, ring hops, decoded
      neighbour rows), equal up to round-off only, and keep the fluid split of a vector
      into S/n bytes (``ring_allreduce``) where quantized messages carry whole
      coordinates;
    - the memory model counts no decoded copies, and the invariants on sums and hulls
      that a lossy wire breaks stay in force.
    """

    name: ClassVar[str] = ""
    exact: ClassVar[bool] = False
    #: Bytes of every non-empty message on top of its coordinates (a quantizer's table).
    header_bytes: ClassVar[int] = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def coord_bytes(self, itemsize: int) -> int:
        """Bytes per coordinate on the wire, for a vector of ``itemsize``-byte values."""
        raise NotImplementedError

    def nbytes(self, n_coords: Any, itemsize: int) -> np.ndarray:
        """Bytes of messages of ``n_coords`` coordinates (an int or an array of them):
        float64, the shape of ``n_coords``; 0 for an empty message (nothing is sent)."""
        n = np.asarray(n_coords, dtype=np.int64)
        per_message = n * self.coord_bytes(itemsize) + self.header_bytes
        return np.where(n > 0, per_message, 0).astype(np.float64)

    def message_bytes(self, n_coords: int, itemsize: int) -> int:
        """Bytes of one message of ``n_coords`` coordinates (0 when it is empty)."""
        n = int(n_coords)
        return n * self.coord_bytes(itemsize) + self.header_bytes if n > 0 else 0

    def receive(self, x: Any) -> Any:
        """The values a receiver decodes from messages ``x``.

        Parameters
        ----------
        x
            (n_messages, n_coords) or (n_coords,) real floating array, one message per
            row; finite values.

        Returns
        -------
        Same shape and dtype as ``x`` (``x`` itself on an exact wire, or when there is
        nothing to send: do not modify it in place).
        """
        xp = namespace(x)
        _check_real(xp, x)
        return self._receive(xp, x)

    def _receive(self, xp: Any, x: Any) -> Any:
        """:meth:`receive` of a checked ``x``."""
        rows = x if x.ndim == 2 else xp.reshape(x, (1, -1))
        if rows.shape[0] == 0 or rows.shape[1] == 0:
            return x
        received = self._decode(xp, rows)
        return received if x.ndim == 2 else xp.reshape(received, x.shape)

    def _decode(self, xp: Any, rows: Any) -> Any:
        """The decoded values of non-empty messages ``rows`` (n_messages, n_coords)."""
        raise NotImplementedError

    def roundtrip(self, x: Any) -> tuple[Any, int]:
        """(:meth:`receive` of ``x``, total bytes of its messages).

        Notes
        -----
        A message of one coordinate, or of equal values, round-trips exactly on every
        wire except ``fp16`` (which rounds every value to float16).
        """
        xp = namespace(x)
        _check_real(xp, x)
        n_messages, n_coords = (x if x.ndim == 2 else xp.reshape(x, (1, -1))).shape
        nbytes = n_messages * self.message_bytes(n_coords, int(xp.finfo(x.dtype).bits) // 8)
        return self._receive(xp, x), nbytes

    def roundtrip_parts(
        self, x: Any, starts: np.ndarray, stops: np.ndarray
    ) -> tuple[Any, np.ndarray]:
        """:meth:`roundtrip` of every row cut into parts (the butterfly's messages).

        Parameters
        ----------
        x
            (n_rows, dim) real floating array.
        starts, stops
            (g,) host integers: part j is coordinates ``starts[j]:stops[j]`` of every
            row (consecutive and covering ``0:dim``, e.g. from ``part_bounds``).

        Returns
        -------
        x_received
            (n_rows, dim): every (row, part) message decoded on its own.
        wire_bytes
            (g,) int64: bytes of part j summed over the rows.
        """
        pieces, nbytes = [], np.zeros(len(starts), dtype=np.int64)
        for j, (start, stop) in enumerate(zip(starts, stops, strict=True)):
            piece, nbytes[j] = self.roundtrip(x[:, int(start) : int(stop)])
            pieces.append(piece)
        if self.exact:  # every piece is a view of x: nothing to assemble
            return x, nbytes
        return namespace(x).concat(pieces, axis=1), nbytes


class IdentityWire(Wire):
    """No compression: the receiver gets the sender's values (hivemind's ``NoCompression``)."""

    name = "none"
    exact = True

    def coord_bytes(self, itemsize: int) -> int:
        """The vector's own ``itemsize``."""
        return itemsize

    def receive(self, x: Any) -> Any:
        """``x`` itself: no copy, no check."""
        return x

    def _receive(self, xp: Any, x: Any) -> Any:
        return x


class Fp16Wire(Wire):
    """Every value rounded to the nearest float16, clamped to ±65504 (:func:`fp16_round`)."""

    name = "fp16"

    def coord_bytes(self, itemsize: int) -> int:
        """2 bytes."""
        return 2

    def _decode(self, xp: Any, rows: Any) -> Any:
        return fp16_round(rows)


class Uniform8Wire(Wire):
    """One byte per value: 256 equal bins on mean ± 6σ of each message, plus two float32
    range parameters (:func:`~sim.kernels.quantize.uniform8`)."""

    name = "uniform8"
    header_bytes = 2 * _FLOAT32_BYTES

    def coord_bytes(self, itemsize: int) -> int:
        """1 byte."""
        return 1

    def _decode(self, xp: Any, rows: Any) -> Any:
        return uniform8(xp, rows)


class Quantile8Wire(Wire):
    """One byte per value: 256 equal-count bins of each message, plus a 256-entry float32
    table of bin means (:func:`~sim.kernels.quantize.quantile8`)."""

    name = "quantile8"
    header_bytes = N_BINS * _FLOAT32_BYTES

    def coord_bytes(self, itemsize: int) -> int:
        """1 byte."""
        return 1

    def _decode(self, xp: Any, rows: Any) -> Any:
        return quantile8(xp, rows)


#: The exact wire (``compression: none``).
IDENTITY = IdentityWire()
#: Every wire by its ``protocol.compression`` name.
WIRES: dict[str, Wire] = {
    wire.name: wire for wire in (IDENTITY, Fp16Wire(), Uniform8Wire(), Quantile8Wire())
}
#: The names of :data:`WIRES`, in order.
METHODS = tuple(WIRES)
#: The names as a type, for the scenario schema (a unit test keeps it equal to METHODS).
WireName = Literal["none", "fp16", "uniform8", "quantile8"]
#: A wire, or its name (resolved by :func:`wire_for`).
WireLike = Wire | str


def wire_for(name: str) -> Wire:
    """The wire named ``name`` (a ``protocol.compression`` value): the one place that
    maps a name to a wire. Raises ValueError for an unknown name, listing the known ones."""
    try:
        return WIRES[name]
    except (KeyError, TypeError):
        expected = ", ".join(METHODS)
        raise ValueError(f"compression: expected one of {expected}, got {name!r}") from None


def as_wire(wire: WireLike) -> Wire:
    """``wire`` itself, or the wire it names (:func:`wire_for`)."""
    return wire if isinstance(wire, Wire) else wire_for(wire)


def wire_bytes(method: WireLike, n_coords: int, itemsize: int) -> int:
    """Bytes on the wire for one message of ``n_coords`` coordinates of ``itemsize``
    bytes each (:meth:`Wire.message_bytes`): ``none`` n·itemsize, ``fp16`` 2n,
    ``uniform8`` n + 8, ``quantile8`` n + 1024; 0 when n = 0 (nothing is sent)."""
    return as_wire(method).message_bytes(n_coords, itemsize)


def wire_bytes_of(method: WireLike, n_coords: np.ndarray, itemsize: int) -> np.ndarray:
    """:func:`wire_bytes` of many messages at once (:meth:`Wire.nbytes`): float64
    bytes, the shape of ``n_coords``."""
    return as_wire(method).nbytes(n_coords, itemsize)


def roundtrip(x: Any, method: WireLike) -> tuple[Any, int]:
    """The values a receiver decodes from a batch of messages (rows of ``x``), and the
    bytes sent (:meth:`Wire.roundtrip`)."""
    return as_wire(method).roundtrip(x)


def roundtrip_parts(
    x: Any, starts: np.ndarray, stops: np.ndarray, method: WireLike
) -> tuple[Any, np.ndarray]:
    """:func:`roundtrip` for every row cut into parts (:meth:`Wire.roundtrip_parts`)."""
    return as_wire(method).roundtrip_parts(x, starts, stops)


def _check_real(xp: Any, x: Any) -> None:
    if not xp.isdtype(x.dtype, "real floating"):
        raise ValueError(f"x: expected a real floating array, got dtype {x.dtype}")
