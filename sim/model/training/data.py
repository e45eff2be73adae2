"""Data sets of the ``logistic`` workload: nothing is downloaded.

- ``digits``: scikit-learn's bundled ``load_digits`` (1,797 images of 8 × 8 pixels, 10
  classes);
- ``classification``: scikit-learn's ``make_classification`` with ``samples``,
  ``features`` (all informative) and ``classes``, seeded from the run's ``workload``
  generator;
- ``file``: a user's ``.npz`` holding ``X`` (samples × features, real numbers) and
  ``y`` (one integer label per sample; the distinct labels, sorted, become classes
  0 … C−1).

:func:`data_shape` gives (samples, features, classes) without reading the data (for a
file: ``X``'s header and the labels), so that a scenario can be checked and its
``vector.dim`` derived before a run.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO

import numpy as np

from sim.core.errors import ScenarioError
from sim.model.scenario.workload import DIGITS_SHAPE, LogisticWorkload


@dataclass(frozen=True)
class Dataset:
    """Samples ``x`` ((N, F) float64), labels ``y`` ((N,) int64 in 0 … C−1), C classes."""

    x: np.ndarray
    y: np.ndarray
    classes: int


class DataFileError(ScenarioError):
    """A ``workload.file`` that cannot be the data: names the key and the file."""

    def __init__(self, path: Path, expected: str, got: str) -> None:
        super().__init__("workload.file", got, expected)
        self.args = (f"workload.file: {path}: expected {expected}, got {got}",)


def data_shape(workload: LogisticWorkload) -> tuple[int, int, int]:
    """(samples, features, classes) of the workload's data set, read without the data."""
    if workload.data == "digits":
        return DIGITS_SHAPE
    if workload.data == "classification":
        return int(workload.samples or 0), int(workload.features or 0), int(workload.classes or 0)
    path = Path(str(workload.file))
    shape = _header_shape(path)
    labels = _labels(path, shape[0])
    return shape[0], shape[1], int(np.unique(labels).size)


def load_data(workload: LogisticWorkload, rng: np.random.Generator) -> Dataset:
    """The workload's data set; ``classification`` is drawn with a seed from ``rng``."""
    if workload.data == "digits":
        x, y = _digits()
        return Dataset(x.copy(), y.copy(), DIGITS_SHAPE[2])
    if workload.data == "classification":
        from sklearn.datasets import make_classification

        seed = int(rng.integers(2**32))
        samples, features, classes = data_shape(workload)
        x, y = make_classification(
            n_samples=samples, n_features=features, n_informative=features, n_redundant=0,
            n_repeated=0, n_classes=classes, random_state=seed,
        )  # fmt: skip
        return Dataset(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.int64), classes)
    return _load_file(Path(str(workload.file)))


@cache
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = np.asarray(digits.data, dtype=np.float64)
    y = np.asarray(digits.target, dtype=np.int64)
    x.flags.writeable = y.flags.writeable = False
    return x, y


_EXPECTED = "an .npz with X (samples × features, real numbers) and y (one integer label each)"


@contextmanager
def _member(path: Path, name: str) -> Iterator[IO[bytes]]:
    """The ``name.npy`` member of the archive at ``path``, open for reading."""
    try:
        archive = zipfile.ZipFile(path)
    except OSError as exc:
        raise DataFileError(path, "a readable .npz file", exc.strerror or str(exc)) from None
    except zipfile.BadZipFile:
        raise DataFileError(path, _EXPECTED, "a file that is not an .npz archive") from None
    with archive:
        if f"{name}.npy" not in archive.namelist():
            raise DataFileError(path, _EXPECTED, f"an archive without {name}")
        with archive.open(f"{name}.npy") as member:
            yield member


def _header_shape(path: Path) -> tuple[int, int]:
    """(samples, features) from ``X``'s header; a 2-D array of real numbers."""
    with _member(path, "X") as member:
        try:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(member)
            else:
                shape, _, dtype = np.lib.format.read_array_header_2_0(member)
        except (ValueError, OSError, zipfile.BadZipFile):
            raise DataFileError(path, _EXPECTED, "an X that is not a .npy array") from None
    if len(shape) != 2 or shape[0] < 2 or shape[1] < 1 or not _real(dtype):
        raise DataFileError(path, _EXPECTED, f"X of shape {shape} and dtype {dtype}")
    return int(shape[0]), int(shape[1])


def _real(dtype: np.dtype) -> bool:
    return bool(np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating))


def _array(path: Path, name: str) -> np.ndarray:
    with _member(path, name) as member:
        try:
            return np.asarray(np.lib.format.read_array(member, allow_pickle=False))
        except (ValueError, EOFError, OSError, zipfile.BadZipFile):
            got = f"a {name} that is not a .npy array"
            raise DataFileError(path, _EXPECTED, got) from None


def _labels(path: Path, samples: int) -> np.ndarray:
    """``y``: one integer label per sample, at least two distinct ones."""
    y = _array(path, "y")
    if y.shape != (samples,) or not np.issubdtype(y.dtype, np.integer):
        got = f"y of shape {y.shape} and dtype {y.dtype} for {samples} samples"
        raise DataFileError(path, _EXPECTED, got)
    if np.unique(y).size < 2:
        raise DataFileError(path, "labels of at least 2 classes in y", "a single class")
    return y


def _load_file(path: Path) -> Dataset:
    samples, _ = _header_shape(path)
    labels = _labels(path, samples)
    x = _array(path, "X").astype(np.float64)
    if not np.all(np.isfinite(x)):
        row, col = (int(k) for k in np.argwhere(~np.isfinite(x))[0])
        raise DataFileError(
            path, "finite numbers in X", f"{float(x[row, col])!r} at row {row}, column {col}"
        )
    classes, y = np.unique(labels, return_inverse=True)
    return Dataset(x, y.astype(np.int64), int(classes.size))


__all__ = ["DataFileError", "Dataset", "data_shape", "load_data"]
