"""One SeedSequence per run, one child generator per named component.

Children are addressed by a fixed index per component name rather than by spawn order,
so adding a component never changes the streams of the others.
"""

from __future__ import annotations

import numpy as np

COMPONENTS = (
    "peers", "churn", "protocol", "init", "network", "rejoin", "membership", "matchmaking",
    "workload", "compute",
)  # fmt: skip


def component_rng(seed: int, component: str, *key: int) -> np.random.Generator:
    """The generator of ``component`` for a run with ``seed``; ``key`` addresses one of
    the component's own streams (``schedule: async``: the DHT ids, each leader's draws),
    none gives the component's main stream."""
    index = COMPONENTS.index(component)
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index, *key)))
