"""Initial vectors of all peers, drawn from the run's ``init`` generator."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.core.errors import ScenarioError
from sim.model.scenario.models import Vector


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


class VectorFileError(ScenarioError):
    """A ``vector.file`` that cannot be the initial vectors: names the key and the file."""

    def __init__(self, path: Path, expected: str, got: str) -> None:
        super().__init__("vector.file", got, expected)
        self.args = (f"vector.file: {path}: expected {expected}, got {got}",)


def _load(vector: Vector, shape: tuple[int, int]) -> np.ndarray:
    """The ``.npy`` at ``vector.file``: checked (header first, memory-mapped) before it is
    read, cast to float64."""
    path = Path(str(vector.file))
    expected = f"a .npy file of real numbers of shape {shape}"
    try:
        x = np.load(path, mmap_mode="r", allow_pickle=False)
    except OSError as exc:
        raise VectorFileError(path, "a readable .npy file", exc.strerror or str(exc)) from None
    except (ValueError, EOFError):  # not .npy, truncated, pickled objects, empty
        raise VectorFileError(path, expected, "a file that is not a .npy array") from None
    if not isinstance(x, np.ndarray):  # a .npz archive
        x.close()
        raise VectorFileError(path, expected, "a .npz archive")
    real = np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)
    if x.shape != shape or not real:
        raise VectorFileError(path, expected, f"shape {x.shape} of {x.dtype}")
    values = np.array(x, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise VectorFileError(path, "finite numbers only", _first_bad(values, values))
    with np.errstate(over="ignore"):
        cast = values.astype(vector.dtype)
    if not np.all(np.isfinite(cast)):
        limit = f"{float(np.finfo(vector.dtype).max):g}"
        raise VectorFileError(
            path, f"values within ±{limit} (vector.dtype {vector.dtype})", _first_bad(cast, values)
        )
    return values


def _first_bad(checked: np.ndarray, values: np.ndarray) -> str:
    """The first value of ``values`` where ``checked`` (same shape) is not finite, and where."""
    row, col = (int(k) for k in np.argwhere(~np.isfinite(checked))[0])
    return f"{float(values[row, col])!r} at row {row}, column {col}"
