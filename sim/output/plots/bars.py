"""Bar charts of a summary field over repeats: the mean with min–max whiskers, and runs
that never reached a target shown as such rather than left out of a mean.

Each bar is one *series* (a case) inside one *group* (a grid cell). A bar's height is
the mean over the runs that have a value; ``k/n`` above it says when only k of the n
runs have one (e.g. reached the target); a hatched, empty bar reaching the top of the
axes marks a series with no value in any run of the group ("not reached"). A series
with no value in any group is left out of the bars and the legend and named in a note.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import EngFormatter

#: Bars spanning more than this ratio (max / min) get a log y axis.
LOG_RATIO = 100.0
HATCH = "///"
#: Width (characters) at which the "not reached in any run" note wraps.
NOTE_CHARS = 48


@dataclass(frozen=True)
class BarStat:
    """One bar: mean, min and max over the ``present`` of ``total`` runs with a value."""

    mean: float
    low: float
    high: float
    present: int
    total: int


def bar_stat(values: pd.Series) -> BarStat:
    """Mean, min and max of the numeric, non-null values; NaN when there are none."""
    numbers = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
    if numbers.size == 0:
        return BarStat(np.nan, np.nan, np.nan, 0, len(values))
    return BarStat(float(numbers.mean()), float(numbers.min()), float(numbers.max()),
                   int(numbers.size), len(values))  # fmt: skip


def show_value(value: object) -> str:
    """A grid value as a label reads it: ``512``, ``0.01``, ``{"model":"none"}``, ``—``."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "—"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


def group_keys(runs: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """Each run's group label, ``peers.count=512, churn.p=0.01`` (``""`` without columns)."""
    if not columns:
        return pd.Series("", index=runs.index)
    parts = [runs[c].map(lambda v, c=c: f"{c}={show_value(v)}") for c in columns]
    return pd.Series([", ".join(row) for row in zip(*parts, strict=True)], index=runs.index)


def report_bars(
    ax: Axes,
    runs: pd.DataFrame,
    field: str,
    groups: Sequence[str] = (),
    series: str = "case",
    colors: dict[str, str] | None = None,
    legend: bool = True,
) -> list[str]:
    """Draw ``field`` of ``runs``: a group of bars per value of the ``groups`` columns,
    one bar per value of ``series``. Returns the series never reached anywhere.

    Parameters
    ----------
    ax
        The axes to draw on (its title, x ticks and legend are set here).
    runs
        One row per run (``runs.parquet``).
    field
        The summary field to draw (``rounds_to_target``, ``time_to_1e-04_s`` …).
    groups
        Columns whose values form the x groups (the grid keys); none: one group.
    series
        Column whose values are the bars of a group, in order of first appearance.
    colors
        Colour per series value (default ``C0``, ``C1`` … in order).
    legend
        Add a legend beside the axes (series and "not reached").
    """
    keys = group_keys(runs, groups)
    group_order = list(dict.fromkeys(keys))
    names = [str(s) for s in dict.fromkeys(runs[series])]
    colors = colors or {name: f"C{k % 10}" for k, name in enumerate(names)}
    stats = {
        (g, s): bar_stat(runs.loc[(keys == g) & (runs[series].astype(str) == s), field])
        for g in group_order
        for s in names
    }
    never = [s for s in names if all(stats[g, s].present == 0 for g in group_order)]
    shown = [s for s in names if s not in never]
    width = 0.8 / max(1, len(shown))
    missing = []
    for k, name in enumerate(shown):
        offsets = np.arange(len(group_order)) + (k - (len(shown) - 1) / 2) * width
        for x, g in zip(offsets, group_order, strict=True):
            stat = stats[g, name]
            if stat.present == 0:
                missing.append((x, colors[name]))
            else:
                _bar(ax, x, width, stat, colors[name])
    _scale(ax, [stats[key] for key in stats if stats[key].present], 1.35 if never else 1.15)
    for x, color in missing:
        _not_reached(ax, x, width, color)
    _axes_text(ax, field, group_order, groups, never)
    if legend:
        _legend(ax, shown, colors, bool(missing))
    return never


def _bar(ax: Axes, x: float, width: float, stat: BarStat, color: str) -> None:
    errors = [[stat.mean - stat.low], [stat.high - stat.mean]]
    ax.bar(x, stat.mean, width * 0.9, color=color, alpha=0.85,
           yerr=errors, capsize=3, error_kw={"lw": 1, "ecolor": "black"})  # fmt: skip
    if stat.present < stat.total:
        ax.annotate(f"{stat.present}/{stat.total}", (x, stat.high), xytext=(0, 2),
                    textcoords="offset points", ha="center", va="bottom", fontsize=7)  # fmt: skip


def _not_reached(ax: Axes, x: float, width: float, color: str) -> None:
    """An empty hatched bar over the axes' height: no run of this bar has a value."""
    box = Rectangle((x - width * 0.45, 0), width * 0.9, 1, transform=ax.get_xaxis_transform(),
                    fill=False, hatch=HATCH, edgecolor=color, lw=0.8)  # fmt: skip
    ax.add_patch(box)


def _scale(ax: Axes, stats: Sequence[BarStat], headroom: float) -> None:
    lows = [s.low for s in stats if s.low > 0]
    highs = [s.high for s in stats]
    if lows and highs and max(highs) / min(lows) > LOG_RATIO:
        ax.set_yscale("log")
    elif highs:
        ax.set_ylim(0, max(highs) * headroom or 1.0)


def _axes_text(
    ax: Axes, field: str, group_order: Sequence[str], groups: Sequence[str], never: Sequence[str]
) -> None:
    ax.set_title(field, fontsize="medium")
    if never:
        note = textwrap.fill("not reached in any run: " + "; ".join(never), NOTE_CHARS)
        ax.text(0.99, 0.98, note, transform=ax.transAxes, ha="right", va="top",
                fontsize="x-small", color="dimgray")  # fmt: skip
    ax.set_ylabel(f"{field_unit(field)}: mean over runs (min–max)")
    if field_unit(field) == "bytes":
        ax.yaxis.set_major_formatter(EngFormatter(unit="B"))
    ax.set_xticks(np.arange(len(group_order)))
    if groups:
        labels = [g.replace(", ", "\n") for g in group_order]
        ax.set_xticklabels(labels, fontsize="small")
    else:
        ax.set_xticklabels([""] * len(group_order))
    ax.set_xlim(-0.5, len(group_order) - 0.5)
    ax.grid(True, axis="y", alpha=0.3)


def field_unit(field: str) -> str:
    """The unit a summary field is counted in, from its name (``time_to_target_s`` → s)."""
    if field.endswith("_s"):
        return "seconds"
    if field.startswith("rounds"):
        return "rounds"
    if "bytes" in field:
        return "bytes"
    return "value"


def _legend(ax: Axes, shown: Sequence[str], colors: dict[str, str], missing: bool) -> None:
    handles = [Patch(color=colors[name], alpha=0.85, label=name) for name in shown]
    if missing:
        handles.append(Patch(fill=False, hatch=HATCH, edgecolor="gray", label="not reached (0/n)"))
    if handles:
        ax.legend(handles=handles, fontsize="x-small", loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # fmt: skip
