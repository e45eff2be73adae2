"""Convergence figures: ``var`` (and ``var_alive`` under churn) against rounds or
simulated time, and against bytes sent, log y.

Figures are built with :class:`matplotlib.figure.Figure` directly (no ``pyplot``, no
global state, no display): saving goes through the Agg canvas, so drawing works on
machines without a screen and inside worker processes.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import EngFormatter, LogLocator, MaxNLocator

from sim.output.plots.context import FigureContext, Panel, panels, why_left_out
from sim.output.plots.curves import band_text, draw_family, has_values

PANEL_WIDTH_IN = 4.3
PANEL_HEIGHT_IN = 3.6
Y_LABEL = "variance per coordinate"
#: The y axis stops this factor below the target variance (round-off is not shown) ...
FLOOR_BELOW_TARGET = 1e-3
#: ... or, without a target, this many decades below the top.
FLOOR_DECADES = 14
#: Bytes panels get a log x axis when the curves end further apart than this ratio.
LOG_X_RATIO = 30.0
#: Legend entries are wrapped at this many characters a line: a sweep case's derived
#: label can run to hundreds (every key it changes), and one long line would take the
#: whole width of the figure from its axes.
LEGEND_LINE_CHARS = 40


def convergence_figure(
    metrics_frames: Sequence[pd.DataFrame],
    labels: Sequence[str] | None = None,
    target_var: float | None = None,
    contexts: Sequence[FigureContext] | None = None,
    title: str | None = None,
) -> Figure:
    """``var`` against rounds (or time units), simulated seconds and bytes sent.

    Parameters
    ----------
    metrics_frames
        One metrics table per curve family (a result folder), each with columns
        ``seed, round, time_s, var`` and, when present, ``var_alive, bytes_sent``;
        several seeds per table are allowed.
    labels
        One legend label per table (default: none).
    target_var
        Drawn as a dotted horizontal line when positive.
    contexts
        One :class:`FigureContext` per table (default: rounds clock, barrier rounds, no
        churn). They choose the panels (:func:`sim.output.plots.context.panels`) and whether
        ``var_alive`` is drawn (dashed, under churn).
    title
        The figure's title.

    Notes
    -----
    With at most :data:`~sim.output.plots.curves.MAX_SEED_LINES` seeds a table gets one line per
    seed; with more, the median over seeds and the 10–90 % band. A run that stopped
    early keeps its last value, so the median covers every seed at every x.
    """
    frames = list(metrics_frames)
    labels = list(labels) if labels is not None else [""] * len(frames)
    contexts = list(contexts) if contexts is not None else [FigureContext()] * len(frames)
    chosen = panels(contexts)
    figure = Figure(figsize=(PANEL_WIDTH_IN * len(chosen) + 2.2, PANEL_HEIGHT_IN),
                    layout="constrained")  # fmt: skip
    axes = figure.subplots(1, len(chosen), sharey=True, squeeze=False)[0]
    banded = False
    for panel, ax in zip(chosen, axes, strict=True):
        left_out: list[tuple[str, str]] = []
        for index, (frame, context) in enumerate(zip(frames, contexts, strict=True)):
            if panel.shows(context):
                banded |= draw_run(ax, frame, panel.x, f"C{index % 10}", context.churn)
            elif labels[index]:
                left_out.append((labels[index], why_left_out(panel, context)))
        decorate(ax, panel, target_var)
        note_left_out(ax, left_out)
    axes[0].set_ylabel(Y_LABEL)
    if title:
        figure.suptitle(title)
    handles = legend_handles(labels, any(c.churn for c in contexts), target_var, banded)
    if handles:
        figure.legend(handles=handles, loc="outside right upper", fontsize="small")
    return figure


def scenario_figure(metrics: pd.DataFrame, scenario: Mapping[str, Any]) -> Figure:
    """The ``convergence.png`` of one result folder from its metrics and its resolved
    scenario mapping (``scenario.yaml``): label, target, clock, churn and title."""
    context = FigureContext.from_scenario(scenario)
    name = str(scenario.get("name", ""))
    return convergence_figure(
        [metrics],
        [name],
        target_var=(scenario.get("stop") or {}).get("target_var"),
        contexts=[context],
        title=run_title(name, scenario, metrics),
    )


def run_title(name: str, scenario: Mapping[str, Any], metrics: pd.DataFrame) -> str:
    """``quickstart: moshpit, rounds clock, bernoulli churn, 3 seeds``."""
    protocol = (scenario.get("protocol") or {}).get("name", "?")
    churn = (scenario.get("churn") or {}).get("model", "none")
    seeds = metrics["seed"].nunique() if "seed" in metrics.columns else 1
    parts = [str(protocol), f"{scenario.get('clock', 'rounds')} clock"]
    parts.append("no churn" if churn in (None, "none") else f"{churn} churn")
    parts.append(f"{seeds} seed{'s' if seeds != 1 else ''}")
    return f"{name}: {', '.join(parts)}" if name else ", ".join(parts)


def draw_run(ax: Axes, frame: pd.DataFrame, x: str, color: str, churn: bool) -> bool:
    """``var`` (solid) and, under churn, ``var_alive`` (dashed); True when banded."""
    banded = draw_family(ax, frame, x, "var", color)
    if churn and has_values(frame, x, "var_alive"):
        draw_family(ax, frame, x, "var_alive", color, band=banded)
    return banded


def decorate(ax: Axes, panel: Panel, target_var: float | None) -> None:
    """Log y, labelled x (bytes in SI units), grid, target line; a note when empty."""
    if _nothing_drawn(ax):
        note = "nothing sent on this clock" if panel.x == "bytes_sent" else "no runs on this axis"
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", color="gray")
    ax.set_yscale("log", nonpositive="mask")
    ax.set_xlabel(panel.label)
    if panel.x == "bytes_sent" and _spans_decades(ax):
        ax.set_xscale("log", nonpositive="mask")
        ax.set_xlabel(f"{panel.label}, log scale")
    if panel.x == "bytes_sent":
        ax.xaxis.set_major_formatter(EngFormatter(unit="B"))
        ax.xaxis.set_major_locator(MaxNLocator(5) if ax.get_xscale() == "linear" else LogLocator())
    ax.grid(True, which="major", alpha=0.3)
    if target_var:
        ax.axhline(target_var, color="gray", ls=":", lw=1.2)
    _floor(ax, target_var)


def note_left_out(ax: Axes, left_out: Sequence[tuple[str, str]]) -> None:
    """Name the runs this panel does not show, one line per reason (each run's own
    clock: a rounds-clock run has no seconds, a continuous-time run has no rounds).

    Parameters
    ----------
    left_out
        ``(label, reason)`` pairs, as :func:`~sim.output.plots.context.why_left_out`
        words the reason.
    """
    by_reason: dict[str, list[str]] = {}
    for label, reason in left_out:
        by_reason.setdefault(reason, []).append(label)
    if by_reason:
        text = "\n".join(f"not on this axis ({reason}): {', '.join(names)}"
                         for reason, names in by_reason.items())  # fmt: skip
        ax.text(0.98, 0.98, text, transform=ax.transAxes, ha="right", va="top",
                fontsize="x-small", color="dimgray")  # fmt: skip


def legend_handles(
    labels: Sequence[str], churn: bool, target_var: float | None, banded: bool
) -> list[Artist]:
    """One entry per labelled family (its colour), then the line styles used; long
    labels are wrapped (:data:`LEGEND_LINE_CHARS`)."""
    handles: list[Artist] = [
        Line2D([], [], color=f"C{index % 10}", lw=2, label=_wrapped(label))
        for index, label in enumerate(labels)
        if label
    ]
    if churn:
        handles.append(Line2D([], [], color="gray", ls="-", label="var (all peers)"))
        handles.append(Line2D([], [], color="gray", ls="--", label="var_alive (present peers)"))
    if banded:
        handles.append(Patch(color="gray", alpha=0.2, label=f"median, {band_text()} band"))
    if target_var:
        handles.append(Line2D([], [], color="gray", ls=":", label=f"target var {target_var:g}"))
    return handles


def _wrapped(label: str) -> str:
    """``label`` on lines of at most :data:`LEGEND_LINE_CHARS` characters, broken
    after a comma or a space where it can (a long key or value is cut)."""
    if len(label) <= LEGEND_LINE_CHARS:
        return label
    return textwrap.fill(label, LEGEND_LINE_CHARS, break_on_hyphens=False)


def _floor(ax: Axes, target_var: float | None) -> None:
    """Cut the y axis at :data:`FLOOR_BELOW_TARGET` below the target (or
    :data:`FLOOR_DECADES` below the top): exact averaging ends in round-off (~1e-32)
    that would otherwise squeeze every curve into the top of the panel."""
    bottom, top = ax.get_ylim()
    floor = target_var * FLOOR_BELOW_TARGET if target_var else top * 10.0**-FLOOR_DECADES
    if bottom < floor < top:
        ax.set_ylim(bottom=floor)


def _spans_decades(ax: Axes) -> bool:
    """True when the drawn curves end more than :data:`LOG_X_RATIO` apart in x."""
    ends = [np.nanmax(x) for x in (np.asarray(line.get_xdata(), float) for line in ax.get_lines())
            if x.size and np.nanmax(x) > 0]  # fmt: skip
    return len(ends) > 1 and max(ends) / min(ends) > LOG_X_RATIO


def _nothing_drawn(ax: Axes) -> bool:
    """True when nothing was drawn, or every x is 0 (e.g. no bytes counted)."""
    lines = ax.get_lines()
    return all(not np.any(np.asarray(line.get_xdata(), dtype=float)) for line in lines)
