"""One SeedSequence per run, one child generator per named component.

Children are addressed by a fixed index per component name rather than by spawn order,
so adding a component never changes the streams of the others.
"""

from __future__ import annotations

import numpy as np

COMPONENTS = ("peers", "churn", "protocol", "init", "network", "rejoin", "membership")


def component_rng(seed: int, component: str) -> np.random.Generator:
    """The generator of ``component`` for a run with ``seed``."""
    index = COMPONENTS.index(component)
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))
