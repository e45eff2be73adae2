"""The partial file of a sweep: one JSON line per finished run, for ``--resume``.

The journal is append-only: each line (the run's key, index, summary and metric rows)
is written, flushed and synced as its run ends, so a sweep killed half-way keeps every
run that finished. A line cut short by the kill is ignored when reading. The journal is
removed once the sweep folder's ``runs.parquet`` and ``metrics.parquet`` are written.

Metric rows are stored by column with their dtypes, and read back into the same frame
(JSON keeps every float64 exactly, NaN and infinities included).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

FILE_NAME = "runs.partial.jsonl"


class Journal:
    """Finished runs of one sweep folder, keyed by run key (scenario + seed digest)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE_NAME
        self._metrics: dict[str, dict[str, Any]] = {}  # run key -> column name -> array

    def exists(self) -> bool:
        """True when a partial sweep was left in the folder."""
        return self.path.is_file()

    def read(self) -> dict[str, dict[str, Any]]:
        """Summaries recorded so far, by run key (later lines win; torn lines skipped).

        The runs' metric rows are read too, for :meth:`metrics`.
        """
        if not self.exists():
            return {}
        done: dict[str, dict[str, Any]] = {}
        with self.path.open(encoding="utf-8") as handle:
            for line in handle:
                entry = _parse(line)
                if entry is not None:
                    done[entry["key"]] = entry["summary"]
                    self._metrics[entry["key"]] = _arrays(entry["metrics"])
        return done

    def append(self, key: str, index: int, summary: dict[str, Any], metrics: pd.DataFrame) -> None:
        """Record one finished run durably (its summary and metric rows)."""
        entry = {"key": key, "run": index, "summary": summary, "metrics": _columns(metrics)}
        line = json.dumps(entry) + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def metrics(self, key: str) -> pd.DataFrame:
        """The metric rows of run ``key`` (as :meth:`read` found them)."""
        return pd.DataFrame(self._metrics[key])

    def clear(self) -> None:
        """Forget every recorded run."""
        self.path.unlink(missing_ok=True)
        self._metrics.clear()


def _arrays(stored: dict[str, Any]) -> dict[str, Any]:
    """Stored columns back as arrays of their dtypes (compact while the sweep finishes)."""
    dtypes = stored["dtypes"]
    return {name: _array(values, dtypes[name]) for name, values in stored["columns"].items()}


def _array(values: list[Any], dtype: str) -> Any:
    """A column back as its dtype (numpy's when it is one, else pandas')."""
    try:
        return np.asarray(values, dtype=np.dtype(dtype))
    except TypeError:  # a pandas extension dtype
        return pd.array(values, dtype=cast(Any, dtype))


def _columns(frame: pd.DataFrame) -> dict[str, Any]:
    """A frame as JSON-ready columns and their dtypes."""
    return {
        "columns": {str(name): frame[name].tolist() for name in frame.columns},
        "dtypes": {str(name): str(dtype) for name, dtype in frame.dtypes.items()},
    }


def _parse(line: str) -> dict[str, Any] | None:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError:
        return None
    ok = (
        isinstance(entry, dict)
        and "key" in entry
        and isinstance(entry.get("summary"), dict)
        and isinstance(entry.get("metrics"), dict)
    )
    return entry if ok else None
