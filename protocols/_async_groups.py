"""What the group protocols (moshpit, random_groups) share under ``schedule: async``:
the descriptions of its parameters and the matchmaking rules they resolve to."""

from __future__ import annotations

from typing import Any

from protocols.contract import Matchmaking

#: Descriptions of the ``schedule: async`` parameters (moshpit and random_groups).
LATENCY_TEXT = (
    "schedule async: seconds a DHT declare or lookup takes (null: one route latency to a "
    "typical peer)"
)
TIMEOUT_TEXT = (
    "schedule async: seconds a step may take to find a group before it fails (null: "
    "4 × matchmaking_time)"
)


def async_rules(params: Any) -> Matchmaking:
    """The matchmaking rules of a group protocol's parameters (``group_size``,
    ``min_group_size``, ``matchmaking_time``, ``averaging_timeout``,
    ``matchmaking_latency``)."""
    timeout = params.averaging_timeout
    return Matchmaking(
        params.group_size,
        min(params.min_group_size, params.group_size),
        params.matchmaking_time,
        4 * params.matchmaking_time if timeout is None else timeout,
        params.matchmaking_latency,
    )
