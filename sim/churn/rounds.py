"""Churn on the ``rounds`` clock: a presence mask per round.

``none``: everyone present. ``bernoulli``: each round each peer is absent independently
with probability ``p`` and back the next round (the Moshpit paper's model).
"""

from __future__ import annotations

import numpy as np

from sim.errors import ScenarioError
from sim.scenario.models import BernoulliChurn, ChurnBase, NoChurn


class RoundChurn:
    """Everyone always present (``model: none``); subclasses override :meth:`present`."""

    def __init__(self, n_peers: int, rng: np.random.Generator) -> None:
        self.n_peers = n_peers
        self.rng = rng
        self._all = np.ones(n_peers, dtype=bool)

    def present(self, t: int) -> np.ndarray:
        """Boolean mask (n_peers,) of the peers present in round ``t``."""
        return self._all


class BernoulliRoundChurn(RoundChurn):
    """Each peer absent with probability ``p`` in each round, independently."""

    def __init__(self, n_peers: int, rng: np.random.Generator, p: float) -> None:
        super().__init__(n_peers, rng)
        self.p = p

    def present(self, t: int) -> np.ndarray:
        if self.p == 0.0:
            return self._all
        return self.rng.random(self.n_peers) >= self.p


def build_round_churn(churn: ChurnBase, n_peers: int, rng: np.random.Generator) -> RoundChurn:
    """The churn process of a scenario's ``churn`` section on the rounds clock."""
    if isinstance(churn, NoChurn):
        return RoundChurn(n_peers, rng)
    if isinstance(churn, BernoulliChurn):
        return BernoulliRoundChurn(n_peers, rng, churn.p)
    raise ScenarioError("churn.model", getattr(churn, "model", None), "none or bernoulli")
