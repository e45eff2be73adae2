"""Array backends: numpy by default, CuPy when the scenario asks for it."""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.core.errors import ScenarioError


def array_module(name: str) -> Any:
    """The array module for ``backend: name`` (numpy or cupy)."""
    if name == "numpy":
        return np
    try:
        import cupy
    except ImportError:
        raise ScenarioError(
            "backend", name, "numpy, or cupy installed with a GPU (pip install 'avsim[cupy]')"
        ) from None
    return cupy


def to_numpy(array: Any) -> np.ndarray:
    """A host numpy copy of a backend array."""
    get = getattr(array, "get", None)
    return np.asarray(get() if callable(get) else array)
