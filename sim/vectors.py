"""Initial vectors of all peers, drawn from the run's ``init`` generator."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.errors import ScenarioError
from sim.scenario.models import Vector


def initial_vectors(vector: Vector, n_peers: int, rng: np.random.Generator) -> np.ndarray:
    """An (n_peers, dim) array of ``vector.dtype``.

    ``normal``: N(0, 1); ``uniform``: U[0, 1); ``onehot``: peer 0 holds ones, every other
    peer zeros (the mean is 1/N: the classic hardest input for local averaging);
    ``file``: a ``.npy`` of exactly that shape.
    """
    shape = (n_peers, vector.dim)
    if vector.init == "normal":
        x = rng.standard_normal(shape)
    elif vector.init == "uniform":
        x = rng.random(shape)
    elif vector.init == "onehot":
        x = np.zeros(shape)
        x[0] = 1.0
    else:
        x = _load(vector, shape)
    return x.astype(vector.dtype, copy=False)


def fresh_rows(vector: Vector, count: int, rng: np.random.Generator) -> np.ndarray:
    """New draws for ``count`` peers that rejoin with ``rejoin: reset`` (normal/uniform)."""
    if vector.init == "uniform":
        return rng.random((count, vector.dim)).astype(vector.dtype)
    return rng.standard_normal((count, vector.dim)).astype(vector.dtype)


def _load(vector: Vector, shape: tuple[int, int]) -> np.ndarray:
    path = Path(str(vector.file))
    try:
        x = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ScenarioError("vector.file", str(path), f"a readable .npy file ({exc})") from None
    if x.shape != shape or not np.issubdtype(x.dtype, np.number):
        raise ScenarioError("vector.file", f"shape {x.shape}", f"a numeric array of shape {shape}")
    if not np.all(np.isfinite(x)):
        raise ScenarioError("vector.file", "non-finite values", "finite numbers only")
    return x.astype(np.float64)
