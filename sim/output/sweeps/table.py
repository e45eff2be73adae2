"""The sweep's table: one row per grid cell × case, each report field's mean and spread.

A cell reads ``mean [min–max]``: the mean over the repeats and their range (the range is
left out when all repeats agree, or there is one), all three in one notation
(:func:`format_numbers`). A field that is ``null`` in some runs
(a target never reached) is summarized over the runs that have it, followed by ``(k/n)``;
``never (0/n)`` when no run has it, for a target field (``rounds_to_*``, ``time_to_*``);
``—`` for any other field no run has (``final_var`` of runs stopped by a NaN:
``null`` in ``summary.json``'s ``mean``). With a ``baseline`` case, the speed-up fields get a
``<field> speed-up`` column: the baseline's mean in the same grid cell over this row's
mean (both over the runs that have a value).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from sim.output.run_folder import TARGET_PREFIXES
from sim.output.sweeps.labels import json_text, show

Table = tuple[list[str], list[list[str]]]
#: Explains the cells, below the table in ``table.md``.
NOTE = (
    "Each cell: the mean over the repeats, then [min–max] when they differ; `(k/n)`: only "
    "k of the n repeats have a value (e.g. reached the target), and the mean and range are "
    "over those k."
)
#: Added to :data:`NOTE` when the table has speed-up columns.
SPEEDUP_NOTE = "Speed-up: the baseline case's mean in the same grid cell / the row's mean."
#: The cell of a field that is not a target when no run has a value for it.
NO_VALUE = "—"


def is_target(field: str) -> bool:
    """True for a variance-target field (``rounds_to_*``, ``time_to_*``): ``null`` in a
    run that never reached it, so an empty cell reads ``never``."""
    return field.startswith(TARGET_PREFIXES)


def table_note(table: Table) -> str:
    """The note below ``table``: what a cell means, and what a speed-up is if it has any."""
    speedups = any(header.endswith(" speed-up") for header in table[0])
    return f"{NOTE} {SPEEDUP_NOTE}" if speedups else NOTE


def sweep_table(
    runs: pd.DataFrame,
    group_by: Sequence[str],
    report: Sequence[str],
    baseline: str | None = None,
    speedup: Sequence[str] | None = None,
) -> Table:
    """Headers and text rows: the ``group_by`` columns, then one column per report field.

    Parameters
    ----------
    runs
        One row per run (``runs.parquet``), in the sweep's order.
    group_by
        Columns that identify a row of the table (the grid keys, then ``case``).
    report
        Summary fields to summarize over the repeats.
    baseline
        Label of the case the others are compared with.
    speedup
        Report fields that get a ``<field> speed-up`` column (default: all of ``report``);
        only used with a ``baseline``.
    """
    compared = [] if baseline is None else list(report if speedup is None else speedup)
    headers = [*group_by, *report, *(f"{field} speed-up" for field in compared)]
    keys = [runs[column].map(_group_key) for column in group_by]
    grouped = runs.groupby(keys, sort=False) if keys else [((), runs)]
    rows = []
    for _, group in grouped:
        cells = [show_key(group[column].iloc[0]) for column in group_by]
        cells += [spread_cell(group.get(field), target=is_target(field)) for field in report]
        if compared:
            base = _baseline_runs(runs, group_by, group, str(baseline))
            cells += [_speedup(base.get(field), group.get(field)) for field in compared]
        rows.append(cells)
    return headers, rows


def _baseline_runs(
    runs: pd.DataFrame, group_by: Sequence[str], group: pd.DataFrame, baseline: str
) -> pd.DataFrame:
    """The baseline case's runs in the grid cell of ``group``."""
    same = runs["case"] == baseline
    for column in group_by:
        if column != "case":
            same &= runs[column].map(_group_key) == _group_key(group[column].iloc[0])
    return runs[same]


def _present(values: pd.Series | None) -> pd.Series:
    if values is None:
        return pd.Series([], dtype=float)
    return pd.to_numeric(values, errors="coerce").dropna()


def _mean(values: pd.Series | None) -> float:
    present = _present(values)
    return float(present.mean()) if len(present) else math.nan


def _speedup(base: pd.Series | None, values: pd.Series | None) -> str:
    mean = _mean(values)
    ratio = _mean(base) / mean if mean != 0 else math.nan  # a count of 0: no ratio
    return format_number(ratio) if math.isfinite(ratio) else "—"


def spread_cell(values: pd.Series | None, target: bool = True) -> str:
    """``mean [min–max]`` over the non-null values, with ``(k/n)`` when some are null.

    The mean and the range ends share one notation (:func:`format_numbers`). When no
    value is present: ``never (0/n)`` for a ``target`` field, else :data:`NO_VALUE`."""
    if values is None:
        return "—"
    n = len(values)
    present = _present(values)
    if present.empty:
        return _empty_cell(n, target)
    mean, low, high = float(present.mean()), float(present.min()), float(present.max())
    if low != high:
        mean_text, low_text, high_text = format_numbers([mean, low, high])
        text = f"{mean_text} [{low_text}–{high_text}]"
    else:
        text = format_number(mean)
    return text if len(present) == n else f"{text} ({len(present)}/{n})"


def mean_cell(values: pd.Series | None, target: bool = True) -> str:
    """Mean over the non-null values, with ``(k/n)`` when some are null (``avsim run``);
    when none is present, ``never (0/n)`` for a ``target`` field, else :data:`NO_VALUE`."""
    if values is None:
        return "—"
    n = len(values)
    present = _present(values)
    if present.empty:
        return _empty_cell(n, target)
    text = format_number(float(present.mean()))
    return text if len(present) == n else f"{text} ({len(present)}/{n})"


def _empty_cell(n: int, target: bool) -> str:
    """A field no run of ``n`` has: a target was never reached; anything else (a NaN
    stop's ``final_var``) simply has no value, as ``null`` in ``summary.json``."""
    return f"never (0/{n})" if target else NO_VALUE


#: Significant digits of a number that is not a whole count.
SIGNIFICANT = 4
#: Whole numbers below this are written in full (exact counts: rounds, bytes).
EXACT_BELOW = 1e15


def format_number(value: float) -> str:
    """One number: :func:`format_numbers` of it alone (like ``%.4g``, but whole numbers
    in full)."""
    return format_numbers([value])[0]


def format_numbers(values: Sequence[float]) -> list[str]:
    """Numbers that are read together (a mean and its range) in one notation.

    Whole numbers (all of them) are written in full. Otherwise every number gets the
    notation and the decimals that give the largest magnitude :data:`SIGNIFICANT`
    significant digits, as ``%.4g`` would choose for it (scientific from 10⁴ up or
    below 10⁻⁴), less the trailing zeros that all of them share:
    ``1.748e+09 [1.032e+09–2.800e+09]``, ``4.5 [4.0–5.0]``.
    """
    finite = [v for v in values if math.isfinite(v)]
    if all(v == round(v) and abs(v) < EXACT_BELOW for v in finite):
        return [str(round(v)) if math.isfinite(v) else f"{v:g}" for v in values]
    exponent = math.floor(math.log10(max(abs(v) for v in finite)))
    kind = "e" if exponent < -4 or exponent >= SIGNIFICANT else "f"
    decimals = SIGNIFICANT - 1 - (0 if kind == "e" else exponent)
    while decimals > 0 and all(_same(v, decimals - 1, kind) for v in finite):
        decimals -= 1
    return [f"{v:.{decimals}{kind}}" if math.isfinite(v) else f"{v:g}" for v in values]


def _same(value: float, decimals: int, kind: str) -> bool:
    """True when ``decimals`` write ``value`` as the same number as ``decimals + 1``."""
    return float(f"{value:.{decimals}{kind}}") == float(f"{value:.{decimals + 1}{kind}}")


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
    """A row key as it reads in the table: ``model=exponential,mtbf=10 min`` for a
    mapping, YAML spelling for scalars, ``—`` when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return show(value)


def _group_key(value: object) -> str:
    """The exact text rows are grouped by (JSON for mappings and lists)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, dict | list):
        return json_text(value)
    return str(value)
