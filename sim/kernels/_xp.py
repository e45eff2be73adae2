"""Array-namespace helpers shared by the kernels (host index arrays → backend arrays)."""

from __future__ import annotations

from typing import Any

import numpy as np
from array_api_compat import array_namespace, device

#: Largest number of elements a kernel gathers into one temporary (64 MiB of float64).
#: Below it a kernel does one vectorised gather; above it, a loop of column slices.
GATHER_ELEMENTS = 8 * 1024 * 1024


def namespace(x: Any) -> Any:
    """The array-API namespace of ``x`` (numpy arrays get ``array_api_compat.numpy``)."""
    return array_namespace(x)


def is_numpy(x: Any) -> bool:
    """True when ``x`` is a plain numpy array (the in-place fast paths apply)."""
    return type(x) is np.ndarray


def to_backend(xp: Any, like: Any, host: np.ndarray, dtype: Any = None) -> Any:
    """Copy the host array ``host`` onto the device of ``like``, optionally casting it."""
    if dtype is not None:
        return xp.asarray(host, dtype=dtype, device=device(like))
    return xp.asarray(host, device=device(like))


def take_rows(xp: Any, x: Any, rows: np.ndarray) -> Any:
    """``x[rows]`` for a host index vector ``rows`` (any namespace)."""
    if is_numpy(x):
        # np.take would first copy a strided x (a column block) whole; indexing does not
        return np.take(x, rows, axis=0) if x.flags.c_contiguous else x[rows]
    return xp.take(x, to_backend(xp, x, np.ascontiguousarray(rows, dtype=np.int64)), axis=0)


def column(xp: Any, like: Any, host: np.ndarray) -> Any:
    """A host vector of shape (n,) as an (n, 1) backend array of ``like``'s dtype."""
    if is_numpy(like):
        return np.asarray(host, dtype=like.dtype).reshape(-1, 1)
    return xp.reshape(to_backend(xp, like, host, dtype=like.dtype), (-1, 1))
