"""The sweep's two tables: one row per run (``runs.parquet``) and every run's metric
rows (``metrics.parquet``), both in the sweep's fixed order.

Columns whose values Arrow cannot type (mappings, or numbers mixed with text) are stored
as text, mappings and lists as compact JSON; a column of numbers with a whole number
beyond int64 is stored as float64 (:func:`arrow_safe`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pyarrow as pa

from sim.output.sweeps.labels import json_text
from sim.output.sweeps.plan import RESOLVED_KEYS, RunSpec


def runs_frame(
    plan: list[RunSpec], summaries: dict[str, dict[str, Any]], as_written: bool = False
) -> pd.DataFrame:
    """One row per run: ``run, case``, the overrides by dotted key, the resolved ``clock,
    protocol.name, churn.model``, ``label``, ``seed``, then the summary fields.

    With ``as_written`` the columns keep Python values as written in the sweep file
    (``0`` stays ``0`` beside ``0.1``), for display; otherwise pandas infers dtypes.
    """
    case_keys = (key for run in plan for key in run.columns if key not in run.grid)
    overrides = list(dict.fromkeys([*case_keys, *(key for run in plan for key in run.grid)]))
    resolved = [key for key in RESOLVED_KEYS if key not in overrides]
    fields = list(dict.fromkeys(k for run in plan for k in summaries[run.key] if k != "seed"))
    rows = []
    for run in plan:
        summary = summaries[run.key]
        values = [run.index, run.label, *(_override(run, k) for k in overrides)]
        values += [*(run.resolved[k] for k in resolved), run.row, run.seed]
        rows.append(values + [summary.get(k) for k in fields])
    columns = ["run", "case", *overrides, *resolved, "label", "seed", *fields]
    return pd.DataFrame(rows, columns=columns, dtype=object if as_written else None)


def metrics_frame(plan: list[RunSpec], metrics_of: Callable[[str], pd.DataFrame]) -> pd.DataFrame:
    """Every run's metric rows in sweep order, led by ``run, case``, the grid keys (mappings
    and lists as JSON text) and ``label``."""
    frames = []
    for run in plan:
        frame = metrics_of(run.key).copy()
        lead: dict[str, Any] = {"run": run.index, "case": run.label}
        lead |= {key: _stored(value) for key, value in run.grid.items()}
        lead["label"] = run.row
        for position, (name, value) in enumerate(lead.items()):
            frame.insert(position, name, value)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _override(run: RunSpec, key: str) -> Any:
    return run.resolved[key] if key in run.resolved else run.columns.get(key)


def _stored(value: Any) -> Any:
    return json_text(value) if isinstance(value, dict | list) else value


def _text(value: Any) -> str | None:
    """A value of a column Arrow cannot type, as text (mappings and lists as JSON)."""
    return None if value is None else str(_stored(value))


def arrow_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` that Arrow can store, column by column.

    * A column of numbers with a whole number outside int64 (a valid ``delay: 1e30``
      written as an integer) becomes float64, every value of the column converted the
      same way: still numbers, exact up to 2⁵³ (the sweep file keeps the value as
      written).
    * A column Arrow cannot type otherwise (mappings, numbers mixed with text) is stored
      as text, mappings and lists as compact JSON.
    """
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if values.dtype != object:
            continue
        if _numbers_beyond_int64(values):
            out[column] = values.map(_as_float).astype("float64")
        elif not _arrow_typed(values):
            out[column] = values.map(_text)
    return out


#: The whole numbers Arrow stores as int64.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _numbers_beyond_int64(values: pd.Series) -> bool:
    """Every value is a number or missing, and some whole number is outside int64."""
    present = [v for v in values if v is not None and not _is_nan(v)]
    return all(_is_number(v) for v in present) and any(
        isinstance(v, int) and not INT64_MIN <= v <= INT64_MAX for v in present
    )


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def _as_float(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _arrow_typed(values: pd.Series) -> bool:
    if any(isinstance(v, dict) for v in values):
        return False
    try:
        pa.array(values, from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return False
    return True
