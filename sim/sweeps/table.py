"""The sweep's table: one row per grid cell × case, the mean of each report field.

A field that is ``null`` in some runs (a target never reached) shows the mean over the
runs that have it followed by ``(k/n)``; ``never (0/n)`` when no run has it. With a
``baseline`` case, each report field also gets a ``speed-up`` column: the baseline's
mean in the same grid cell over this row's mean (both over the runs that have a value).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pandas as pd

Table = tuple[list[str], list[list[str]]]


def sweep_table(
    runs: pd.DataFrame,
    group_by: Sequence[str],
    report: Sequence[str],
    baseline: str | None = None,
) -> Table:
    """Headers and text rows: the ``group_by`` columns, then one column per report field.

    Parameters
    ----------
    runs
        One row per run (``runs.parquet``), in the sweep's order.
    group_by
        Columns that identify a row of the table (the grid keys, then ``case``).
    report
        Summary fields to average over the repeats.
    baseline
        Label of the case the others are compared with (adds ``<field> speed-up``).
    """
    headers = [*group_by, *report]
    if baseline is not None:
        headers += [f"{field} speed-up" for field in report]
    keys = [runs[column].map(show_key) for column in group_by]
    grouped = runs.groupby(keys, sort=False) if keys else [((), runs)]
    rows = []
    for key, group in grouped:
        cells = [str(k) for k in key] if isinstance(key, tuple) else [str(key)]
        cells += [mean_cell(group.get(field)) for field in report]
        if baseline is not None:
            base = _baseline_runs(runs, group_by, group, baseline)
            cells += [_speedup(base.get(field), group.get(field)) for field in report]
        rows.append(cells)
    return headers, rows


def _baseline_runs(
    runs: pd.DataFrame, group_by: Sequence[str], group: pd.DataFrame, baseline: str
) -> pd.DataFrame:
    """The baseline case's runs in the grid cell of ``group``."""
    same = runs["case"] == baseline
    for column in group_by:
        if column != "case":
            same &= runs[column].map(show_key) == show_key(group[column].iloc[0])
    return runs[same]


def _mean(values: pd.Series | None) -> float:
    if values is None:
        return math.nan
    present = pd.to_numeric(values, errors="coerce").dropna()
    return float(present.mean()) if len(present) else math.nan


def _speedup(base: pd.Series | None, values: pd.Series | None) -> str:
    mean = _mean(values)
    ratio = _mean(base) / mean if mean != 0 else math.nan  # a count of 0: no ratio
    return format_number(ratio) if math.isfinite(ratio) else "—"


def mean_cell(values: pd.Series | None) -> str:
    """Mean over the non-null values, with ``(k/n)`` when some are null."""
    if values is None:
        return "—"
    n = len(values)
    present = pd.to_numeric(values, errors="coerce").dropna()
    if present.empty:
        return f"never (0/{n})"
    text = format_number(float(present.mean()))
    return text if len(present) == n else f"{text} ({len(present)}/{n})"


def format_number(value: float) -> str:
    """Integers as integers, others with 4 significant digits."""
    if math.isfinite(value) and value == round(value) and abs(value) < 1e15:
        return str(round(value))
    return f"{value:.4g}"


def markdown(table: Table, title: str | None = None, note: str | None = None) -> str:
    """The table as GitHub-flavoured Markdown (pipes in cells escaped)."""
    headers, rows = table
    lines = [f"# {title}", ""] if title else []
    lines.append(_md_row(headers))
    lines.append("|" + "|".join(" --- " for _ in headers) + "|")
    lines.extend(_md_row(row) for row in rows)
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def show_key(value: object) -> str:
    """A row key as text, as written in the sweep file (rows group by this text)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)
