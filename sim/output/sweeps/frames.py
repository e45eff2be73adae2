"""The sweep's two tables: one row per run (``runs.parquet``) and every run's metric
rows (``metrics.parquet``), both in the sweep's fixed order.

Columns whose values Arrow cannot type (mappings, or numbers mixed with text) are stored
as text, mappings and lists as compact JSON.
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
    """Columns Arrow cannot type (mixed values, mappings) are stored as their text."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object and not _arrow_typed(out[column]):
            out[column] = out[column].map(_text)
    return out


def _arrow_typed(values: pd.Series) -> bool:
    if any(isinstance(v, dict) for v in values):
        return False
    try:
        pa.array(values, from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):
        return False
    return True
