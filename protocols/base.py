"""What every protocol module provides: a parameter model and a protocol class.

A protocol decides who talks to whom, what is sent and what is done on arrival. On the
``rounds`` clock the engine calls :meth:`Protocol.round` once per round with the mask
of present peers; the protocol picks groups or neighbours on the host (numpy, with the
generator it was given) and hands the arithmetic to pure kernels in :mod:`sim.kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict


class ProtocolParams(BaseModel):
    """Parameters of a protocol; subclasses add ``name: Literal[...]`` and their fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class Context:
    """What a protocol may know about the run it is part of.

    Parameters
    ----------
    n_peers
        Number of peers N (rows of the state).
    dim
        Coordinates per peer.
    itemsize
        Bytes per coordinate on the wire (from ``vector.dtype``).
    rng
        The protocol's own generator, spawned from the run's ``SeedSequence``.
    """

    n_peers: int
    dim: int
    itemsize: int
    rng: np.random.Generator

    @property
    def vector_bytes(self) -> int:
        """Bytes of one full vector on the wire."""
        return self.dim * self.itemsize


@dataclass
class State:
    """All peers' vectors: ``x`` of shape (n_peers, dim) plus protocol arrays in ``extra``."""

    x: Any
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundStats:
    """What one round cost and reported.

    ``bytes_sent`` and ``messages`` are totals over all peers for the round;
    ``mean_drift`` is the change of the global mean's norm / sqrt(dim) when the protocol
    does not promise to preserve it (``uniform`` gossip, ``partial`` faults), else 0.
    """

    bytes_sent: float = 0.0
    messages: int = 0
    mean_drift: float = 0.0


class Protocol:
    """Base class; subclasses set ``Params``, ``description`` and implement ``round``."""

    Params: ClassVar[type[ProtocolParams]]
    description: ClassVar[str] = ""

    def __init__(self, params: Any, ctx: Context) -> None:
        self.params = params
        self.ctx = ctx

    def init_state(self, state: State) -> None:
        """Add protocol arrays to ``state.extra`` (default: none)."""

    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """Run round ``t`` (0-based) over the peers where ``present`` is true."""
        raise NotImplementedError

    def estimate(self, state: State) -> Any:
        """Each peer's current estimate of the average (default: ``state.x``)."""
        return state.x
