"""The sweep figure ``sweep.png``: convergence per case and a bar chart of the report.

Top: one row per grid cell (at most :data:`MAX_CELL_ROWS`), with the panels of
:func:`sim.output.plots.context.panels` (rounds or time units, simulated seconds on the network
clock, bytes sent); one colour per case, its median over the repeats and the 10–90 %
band, ``var_alive`` dashed under churn. Bottom: one bar chart per reported field (mean
over the repeats, min–max whiskers, runs that never reached a target marked as such).

Reads the sweep folder: ``runs.parquet`` (one row per run: ``run, case``, the override
keys, ``clock, protocol.name, churn.model``, ``seed``, summary fields),
``metrics.parquet`` (the recorder rows of every run, with its ``run``) and ``sweep.yaml``
(the ``grid`` keys, the ``report`` fields and the name).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure
from matplotlib.patches import Patch

from sim.core.errors import AvsimError
from sim.output.plots.bars import HATCH, group_keys, report_bars
from sim.output.plots.context import FigureContext, panels
from sim.output.plots.convergence import PANEL_WIDTH_IN, Y_LABEL, decorate, legend_handles
from sim.output.plots.curves import draw_family
from sim.output.sweeps.labels import cell_value, from_stored

#: At most this many grid cells get a row of convergence panels (the first ones).
MAX_CELL_ROWS = 6
#: Report fields side by side in the bar section when the bars are few.
MAX_BAR_COLUMNS = 3
ROW_HEIGHT_IN = 3.0
BAR_HEIGHT_IN = 3.4
RESOLVED = ("clock", "protocol.name", "churn.model")


def is_sweep_folder(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` holds a sweep's ``runs.parquet``."""
    return (Path(folder) / "runs.parquet").is_file()


def plot_sweep(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    report: Sequence[str] | None = None,
    title: str | None = None,
) -> Path:
    """Draw ``sweep.png`` (or ``out``) from a sweep folder and return its path.

    Parameters
    ----------
    folder
        A sweep folder (``runs.parquet``; ``metrics.parquet`` for the convergence part).
    out
        Image to write (default ``folder/sweep.png``); its suffix picks the format.
    report
        Fields of the bar charts (default: ``report`` of ``sweep.yaml``).
    title
        Figure title (default: the sweep's name).

    Raises
    ------
    AvsimError
        When ``folder`` has no ``runs.parquet``, or a ``report`` field is not a column.
    """
    from sim.output.plots.folders import save_figure

    folder = Path(folder)
    if not is_sweep_folder(folder):
        raise AvsimError(f"{folder}: not a sweep folder (no runs.parquet)")
    spec = _spec(folder)
    runs = pd.read_parquet(folder / "runs.parquet")
    fields = list(report or spec.get("report") or _default_report(runs))
    for field in fields:
        if field not in runs.columns:
            raise AvsimError(f"report: {field!r} is not a field of {folder / 'runs.parquet'}")
    metrics_path = folder / "metrics.parquet"
    metrics = pd.read_parquet(metrics_path) if metrics_path.is_file() else None
    grid = [key for key in (spec.get("grid") or {}) if key in runs.columns]
    figure = sweep_figure(runs, metrics, grid, fields, title or str(spec.get("name", folder.name)),
                          _target(runs, spec))  # fmt: skip
    return save_figure(figure, Path(out) if out is not None else folder / "sweep.png")


def sweep_figure(
    runs: pd.DataFrame,
    metrics: pd.DataFrame | None,
    grid: Sequence[str],
    report: Sequence[str],
    title: str,
    target_var: float | None = None,
) -> Figure:
    """The figure of :func:`plot_sweep` from the folder's tables (``metrics`` may be None).

    Grid values read as in the sweep's table (:func:`sim.output.sweeps.labels.cell_value`): a
    mapping stored as JSON text is titled ``churn=(model=exponential,mtbf=10 min)``.
    """
    runs = _readable_grid(runs, grid)
    cases = [str(c) for c in dict.fromkeys(runs["case"])]
    colors = {case: f"C{k % 10}" for k, case in enumerate(cases)}
    contexts = _contexts(runs)
    cells = list(dict.fromkeys(group_keys(runs, grid)))
    rows = min(len(cells), MAX_CELL_ROWS) if metrics is not None else 0
    bar_columns = _bar_columns(len(report), len(cells) * len(cases))
    bar_rows = math.ceil(len(report) / bar_columns)
    width = max(PANEL_WIDTH_IN * len(panels(list(contexts.values()))),
                _bar_width(len(cells), len(cases)) * bar_columns)  # fmt: skip
    height = rows * ROW_HEIGHT_IN + bar_rows * BAR_HEIGHT_IN + 0.6
    figure = Figure(figsize=(min(width, 26) + 3.2, height), layout="constrained")
    repeats = int(runs.groupby(["case", *grid], dropna=False).size().max()) if len(runs) else 0
    figure.suptitle(f"{title}: {_counts(len(cases), len(cells) if grid else 0, repeats)}")
    bars_area: Figure | SubFigure = figure
    if metrics is not None and rows:
        ratios = [rows * ROW_HEIGHT_IN, bar_rows * BAR_HEIGHT_IN]
        top, bars_area = np.asarray(figure.subfigures(2, 1, height_ratios=ratios)).ravel()
        _draw_convergence(top, runs, metrics, grid, cells[:rows], colors, contexts, target_var)
        if len(cells) > rows:
            top.supxlabel(f"convergence of the first {rows} of {len(cells)} grid cells "
                               "(all runs: metrics.parquet)", fontsize="small")  # fmt: skip
    axes = bars_area.subplots(bar_rows, bar_columns, squeeze=False).ravel()
    for ax, field in zip(axes, report, strict=False):
        report_bars(ax, runs, field, grid, "case", colors, legend=False)
    for ax in axes[len(report) :]:
        ax.set_visible(False)
    churn = rows > 0 and any(c.churn for c in contexts.values())
    handles = legend_handles(cases, churn, target_var if rows else None, banded=rows > 0)
    handles.append(Patch(fill=False, hatch=HATCH, edgecolor="gray", label="not reached (0/n)"))
    figure.legend(handles=handles, loc="outside right upper", fontsize="small")
    return figure


def _draw_convergence(
    top: SubFigure,
    runs: pd.DataFrame,
    metrics: pd.DataFrame,
    grid: Sequence[str],
    cells: Sequence[str],
    colors: dict[str, str],
    contexts: dict[str, FigureContext],
    target_var: float | None,
) -> None:
    chosen = panels(list(contexts.values()))
    axes = top.subplots(len(cells), len(chosen), sharey=True, squeeze=False)
    run_cell = dict(zip(runs["run"], group_keys(runs, grid), strict=True))
    run_case = dict(zip(runs["run"], runs["case"].astype(str), strict=True))
    cell_of = metrics["run"].map(run_cell)
    case_of = metrics["run"].map(run_case)
    for row, cell in zip(axes, cells, strict=True):
        for panel, ax in zip(chosen, row, strict=True):
            for case, color in colors.items():
                context = contexts[case]
                frame = metrics[(cell_of == cell) & (case_of == case)]
                if panel.shows(context) and len(frame):
                    _draw_case(ax, frame, panel.x, color, context.churn)
            decorate(ax, panel, target_var)
        row[0].set_ylabel(Y_LABEL)
        if cell:
            row[0].set_title(cell, loc="left", fontsize="small")


def _readable_grid(runs: pd.DataFrame, grid: Sequence[str]) -> pd.DataFrame:
    """``runs`` with its grid columns' mappings and lists (JSON text in ``runs.parquet``)
    as the sweep's table shows them; other values unchanged."""
    out = runs.copy()
    for key in grid:
        out[key] = runs[key].map(_readable)
    return out


def _readable(value: Any) -> Any:
    stored = from_stored(value)
    return cell_value(stored) if isinstance(stored, dict | list) else value


def _draw_case(ax: Axes, frame: pd.DataFrame, x: str, color: str, churn: bool) -> None:
    """The median over a case's runs and the band; ``var_alive`` dashed under churn."""
    draw_family(ax, frame, x, "var", color, by="run", band=True)
    if churn:
        draw_family(ax, frame, x, "var_alive", color, by="run", band=True)


def _contexts(runs: pd.DataFrame) -> dict[str, FigureContext]:
    """One context per case, from the ``clock``, ``protocol.name``, ``churn.model``
    columns (a case whose runs differ gets the first run's; churn if any run has it)."""
    result = {}
    for case, group in runs.groupby(runs["case"].astype(str), sort=False):
        first = [group[k].iloc[0] if k in group.columns else None for k in RESOLVED]
        context = FigureContext.from_values(*first)
        if "churn.model" in group.columns:
            churn = any(m not in (None, "none") for m in group["churn.model"])
            context = FigureContext(context.clock, context.continuous, churn)
        result[str(case)] = context
    return result


def _spec(folder: Path) -> dict[str, Any]:
    try:
        spec = yaml.safe_load((folder / "sweep.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return spec if isinstance(spec, dict) else {}


def _default_report(runs: pd.DataFrame) -> list[str]:
    targets = [c for c in runs.columns if c.startswith(("rounds_to_", "time_to_"))]
    return targets or [c for c in ("final_var",) if c in runs.columns]


def _target(runs: pd.DataFrame, spec: dict[str, Any]) -> float | None:
    """The one ``stop.target_var`` of every run, when the folder tells it."""
    if "stop.target_var" in runs.columns:
        values = set(pd.to_numeric(runs["stop.target_var"], errors="coerce").dropna())
        return values.pop() if len(values) == 1 else None
    scenario = spec.get("scenario")
    if not isinstance(scenario, dict):  # a `base:` file: not read again here
        return None
    stop = scenario.get("stop") or {}
    target = stop.get("target_var", 1e-9) if isinstance(stop, dict) else None
    return float(target) if isinstance(target, int | float) and target > 0 else None


def _bar_columns(fields: int, bars_per_field: int) -> int:
    return 1 if bars_per_field > 12 else max(1, min(fields, MAX_BAR_COLUMNS))


def _bar_width(cells: int, cases: int) -> float:
    return max(4.5, 0.22 * cells * cases + 1.5)


def _counts(cases: int, cells: int, repeats: int) -> str:
    """``3 cases × 2 grid cells × 5 repeats`` (no grid: no cells)."""
    parts = [(cases, "case"), (cells, "grid cell"), (repeats, "repeat")]
    return " × ".join(f"{n} {word}{'s' if n != 1 else ''}" for n, word in parts if n)
