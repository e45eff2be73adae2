"""What the group protocols (moshpit, random_groups) share under ``schedule: async``:
the descriptions of its parameters and the matchmaking rules they resolve to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import Field

from protocols.contract import Matchmaking
from sim.core.fields import PeerDist, PeerDuration

#: Descriptions of the ``schedule: async`` parameters (moshpit and random_groups).
LATENCY_TEXT = (
    "schedule async: seconds a DHT declare or lookup takes (null: one route latency to a "
    "typical peer)"
)
TIMEOUT_TEXT = (
    "schedule async: seconds a step may take to find a group before it fails (null: "
    "4 × matchmaking_time)"
)
OVERHEAD_TEXT = (
    "schedule async: seconds of processing between a group's assembly and its all-reduce's "
    "first flows: a duration, or a distribution as for peers.delay drawn once per group"
)


#: The type of ``allreduce_overhead``: a duration or a distribution of durations, parsed,
#: written and documented as ``peers.delay`` is.
Overhead = PeerDuration


def overhead_field() -> Any:
    """The ``allreduce_overhead`` field of moshpit and random_groups (default 0 s)."""
    return Field(default=0.0, validate_default=True, description=OVERHEAD_TEXT)


def overhead_draw(dist: PeerDist) -> Callable[[np.random.Generator], float] | None:
    """``allreduce_overhead`` as :attr:`~protocols.contract.Matchmaking.overhead`: None for
    0 (no processing, nothing drawn), else ``draw(rng)`` seconds (a constant draws
    nothing)."""
    if dist.kind == "const":
        value = float(dist.get("value"))
        return None if value == 0.0 else (lambda _rng: value)
    return lambda rng: float(dist.sample(rng, 1)[0])


def async_rules(params: Any) -> Matchmaking:
    """The matchmaking rules of a group protocol's parameters (``group_size``,
    ``min_group_size``, ``matchmaking_time``, ``averaging_timeout``,
    ``matchmaking_latency``, ``allreduce_overhead``)."""
    timeout = params.averaging_timeout
    return Matchmaking(
        params.group_size,
        min(params.min_group_size, params.group_size),
        params.matchmaking_time,
        4 * params.matchmaking_time if timeout is None else timeout,
        params.matchmaking_latency,
        overhead_draw(params.allreduce_overhead),
    )
