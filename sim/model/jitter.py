"""Step-to-step variation of a peer's local work (``peers.compute_jitter``).

``peers.compute`` fixes each peer's typical local work per step; real machines vary from
one step to the next (other processes, data loading, thermal throttling). With
``compute_jitter`` = cv > 0, every step's compute time is ``compute × f``, f drawn from a
lognormal of mean 1 and coefficient of variation cv (σ² = ln(1 + cv²), μ = −σ²/2).
Each peer draws from its own stream (component ``compute``, key = the peer), so the k-th
step of peer i takes the same time whatever the protocol (common random numbers across a
sweep's cases) and the draws do not depend on the order of events.

:class:`NoJitter` (cv = 0, the default) draws nothing: every step takes exactly
``compute``, as before the key existed.
"""

from __future__ import annotations

import math

import numpy as np

from sim.core.seeding import component_rng

#: Factors drawn at once per peer (a block; the stream is the same whatever the block).
BLOCK = 64


class Jitter:
    """Each step's compute time of a peer: :meth:`compute_s`."""

    def compute_s(self, peer: int, compute_s: float) -> float:
        """Seconds ``peer``'s next step of typical ``compute_s`` seconds takes."""
        raise NotImplementedError

    @property
    def varies(self) -> bool:
        """Whether a step may take other than ``compute`` seconds."""
        return True


class NoJitter(Jitter):
    """Every step takes exactly ``compute`` seconds (``compute_jitter: 0``)."""

    def compute_s(self, peer: int, compute_s: float) -> float:
        return compute_s

    @property
    def varies(self) -> bool:
        return False


class LognormalJitter(Jitter):
    """``compute × f``, f lognormal with mean 1 and coefficient of variation ``cv``."""

    def __init__(self, cv: float, seed: int, n_peers: int) -> None:
        self.sigma = math.sqrt(math.log1p(cv * cv))
        self.mu = -0.5 * self.sigma * self.sigma
        self.seed = seed
        self._rngs: list[np.random.Generator | None] = [None] * n_peers
        self._factors: list[list[float]] = [[] for _ in range(n_peers)]

    def compute_s(self, peer: int, compute_s: float) -> float:
        factors = self._factors[peer]
        if not factors:
            rng = self._rngs[peer]
            if rng is None:
                rng = self._rngs[peer] = component_rng(self.seed, "compute", peer)
            factors.extend(reversed(rng.lognormal(self.mu, self.sigma, BLOCK).tolist()))
        return compute_s * factors.pop()


def jitter_for(cv: float, seed: int, n_peers: int) -> Jitter:
    """The run's :class:`Jitter` for ``peers.compute_jitter`` = ``cv``."""
    return LognormalJitter(cv, seed, n_peers) if cv > 0 else NoJitter()


__all__ = ["BLOCK", "Jitter", "LognormalJitter", "NoJitter", "jitter_for"]
