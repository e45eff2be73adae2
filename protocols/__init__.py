"""Protocols: one module per protocol family, registered by hand below.

The YAML ``protocol.name`` equals the module name. Each module opens with its algorithm,
its messages and its invariants table; :mod:`protocols.base` holds the contract.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Field

from protocols.a2cid2 import A2cid2
from protocols.all_reduce import AllReduce
from protocols.base import Protocol
from protocols.gossip import Gossip
from protocols.moshpit import Moshpit
from protocols.pairwise_gossip import PairwiseGossip
from protocols.push_sum import PushSum
from protocols.random_groups import RandomGroups
from protocols.ring_allreduce import RingAllreduce
from protocols.sgp import Sgp
from sim.errors import ScenarioError

REGISTRY: dict[str, type[Protocol]] = {
    "all_reduce": AllReduce,
    "random_groups": RandomGroups,
    "moshpit": Moshpit,
    "gossip": Gossip,
    "sgp": Sgp,
    "pairwise_gossip": PairwiseGossip,
    "push_sum": PushSum,
    "a2cid2": A2cid2,
    "ring_allreduce": RingAllreduce,
}


def get(name: str) -> type[Protocol]:
    """The protocol class registered as ``name``.

    Raises
    ------
    sim.errors.ScenarioError
        On ``protocol.name`` when ``name`` is not registered; the message lists the
        known names.
    """
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ScenarioError("protocol.name", name, "one of: " + ", ".join(REGISTRY)) from None


def params_union() -> Any:
    """The pydantic union of every protocol's ``Params``, discriminated by ``name``."""
    members = tuple(cls.Params for cls in REGISTRY.values())
    if len(members) == 1:
        return members[0]
    return Annotated[Union[members], Field(discriminator="name")]  # noqa: UP007


__all__ = ["REGISTRY", "Protocol", "get", "params_union"]
