"""What every protocol module provides: a parameter model and a protocol class.

A protocol decides who talks to whom, what is sent and what is done on arrival. On the
``rounds`` clock the engine calls :meth:`Protocol.round` once per round with the mask
of present peers; the protocol picks groups or neighbours on the host (numpy, with the
generator it was given) and hands the arithmetic to pure kernels in :mod:`sim.kernels`.
"""

from __future__ import annotations

from collections.abc import Callable
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
    peers
        The per-peer table (:func:`sim.peers.resolve_peers`: bandwidths, delays, client
        mode), or None outside a run; protocols that need it fall back to defaults.
    """

    n_peers: int
    dim: int
    itemsize: int
    rng: np.random.Generator
    peers: Any = None

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
    wait_s: float = 0.0  # network clock: pause before the next round (e.g. restart delay)


@dataclass
class NetRound:
    """One round on the network clock: the flows to send, then the arithmetic.

    Flows are parallel arrays with optional dependencies:

    - *gates*: a flow with ``waits[i] == g`` starts once gate g opens, i.e. once every
      flow with ``opens == g`` has ended (completed or failed). A butterfly is two gates
      per group, a ring all-reduce a chain of single-flow gates.
    - *after*: a flow with ``after[i] == j`` starts once flow j has ended; if flow j
      failed, flow i fails at once without sending (a broken stream: pieces of a part,
      a reply to a request).
    - a flow with ``streamed[i]`` set continues its ``after`` flow's stream on an open
      connection: it pays no route latency (pieces sent back to back).
    - a flow with neither gate nor ``after`` (a *root*) starts ``start_s[i]`` seconds
      after the round starts (default: its sender's straggler delay).
    - a flow still in flight ``timeout_s[i]`` seconds after it started (default: never)
      is cancelled and fails: its receiver gave up on a slow sender.

    The round ends when every flow has ended; the clock then fills ``delivered`` (which
    flows completed) and ``timed_out`` and calls ``finish(state, lost)``, where ``lost``
    marks the peers preempted at any time during the round (they take no part, as an
    absent peer on the rounds clock).
    """

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    finish: Callable[[State, np.ndarray], RoundStats]
    opens: np.ndarray | None = None
    waits: np.ndarray | None = None
    after: np.ndarray | None = None
    start_s: np.ndarray | None = None
    timeout_s: np.ndarray | None = None
    streamed: np.ndarray | None = None
    delivered: np.ndarray | None = None  # filled by the clock
    timed_out: np.ndarray | None = None  # filled by the clock


class Protocol:
    """Base class; subclasses set ``Params``, ``description`` and implement ``round``.

    On the network clock, barrier-round protocols also implement :meth:`round_messages`
    (one phase of messages, then :meth:`round` with the peers that were not lost) or
    override :meth:`network_round`. ``network_clock`` says whether a protocol runs there.
    """

    Params: ClassVar[type[ProtocolParams]]
    description: ClassVar[str] = ""
    network_clock: ClassVar[bool] = False
    #: Event counts the protocol keeps in ``counters``; each is a field of the run's
    #: summary (0 when the protocol never counted it, e.g. on the other clock).
    counter_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, params: Any, ctx: Context) -> None:
        self.params = params
        self.ctx = ctx
        self.counters: dict[str, int] = dict.fromkeys(self.counter_names, 0)

    def init_state(self, state: State) -> None:
        """Add protocol arrays to ``state.extra`` (default: none)."""

    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """Run round ``t`` (0-based) over the peers where ``present`` is true."""
        raise NotImplementedError

    def round_messages(self, present: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of the messages of round ``t``, sent by the present peers."""
        raise NotImplementedError

    def message_bytes(self) -> float:
        """Bytes of one message of :meth:`round_messages` (default: one vector)."""
        return float(self.ctx.vector_bytes)

    def network_round(self, present: np.ndarray, t: int) -> NetRound:
        """Round ``t`` on the network clock: messages, then :meth:`round` without the lost."""
        src, dst = self.round_messages(present, t)
        nbytes = np.full(src.size, self.message_bytes())

        def finish(state: State, lost: np.ndarray) -> RoundStats:
            return self.round(state, present & ~lost, t)

        return NetRound(src, dst, nbytes, finish)

    def describe(self) -> dict[str, Any]:
        """Quantities the protocol derives from the scenario (for ``avsim info``)."""
        return {}

    def estimate(self, state: State) -> Any:
        """Each peer's current estimate of the average (default: ``state.x``)."""
        return state.x
