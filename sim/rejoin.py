"""What a peer brings back when it returns from an absence (``churn.rejoin``).

``keep``: its stale vector. ``reset``: a fresh draw from ``vector.init`` (like a new
node). ``fetch``: a copy of a random present peer's vector (on the rounds clock the
download is instant; on the network clock it is a real flow).
"""

from __future__ import annotations

import numpy as np
from array_api_compat import array_namespace

from protocols.base import State
from sim.scenario.models import Scenario
from sim.vectors import fresh_rows


class Rejoin:
    """Applies the rejoin rule to peers present now that were absent the round before."""

    def __init__(self, scenario: Scenario, rng: np.random.Generator) -> None:
        self.mode = scenario.churn.rejoin
        self.vector = scenario.vector
        self.rng = rng
        self.previous = np.ones(scenario.peers.count, dtype=bool)

    def apply(self, state: State, present: np.ndarray) -> None:
        """Update ``state.x`` rows of returning peers in place of their stale values."""
        returning = np.flatnonzero(present & ~self.previous)
        self.previous = present
        if self.mode == "keep" or returning.size == 0:
            return
        if self.mode == "reset":
            rows = fresh_rows(self.vector, returning.size, self.rng)
            state.x[returning] = array_namespace(state.x).asarray(rows)
            return
        stayed = np.flatnonzero(present & ~np.isin(np.arange(present.size), returning))
        if stayed.size:
            picked = stayed[self.rng.integers(0, stayed.size, returning.size)]
            state.x[returning] = state.x[picked]
