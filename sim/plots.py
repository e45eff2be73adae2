"""Convergence figures: ``var`` against rounds and against simulated time, log scale.

Figures are built with :class:`matplotlib.figure.Figure` directly (no ``pyplot``, no
global state, no display): saving goes through the Agg canvas, so drawing works on
machines without a screen and inside worker processes.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from sim.errors import AvsimError

#: Up to this many seeds a line is drawn per seed; beyond, the median and a band.
MAX_SEED_LINES = 4
#: Quantiles of the band drawn around the median.
BAND = (0.1, 0.9)
AXES = (("round", "rounds"), ("time_s", "simulated time (s)"))


def convergence_figure(
    metrics_frames: Sequence[pd.DataFrame],
    labels: Sequence[str] | None = None,
    target_var: float | None = None,
) -> Figure:
    """Two panels, ``var`` against rounds and against simulated time (log y).

    Parameters
    ----------
    metrics_frames
        One metrics table per curve family (a result folder), each with columns
        ``seed, round, time_s, var``; several seeds per table are allowed.
    labels
        One legend label per table (default: none).
    target_var
        Drawn as a dashed horizontal line when positive.

    Notes
    -----
    With at most :data:`MAX_SEED_LINES` seeds a table gets one line per seed; with more,
    the median over seeds and the 10–90 % band. A run that stopped early keeps its last
    value, so the median covers every seed at every x.
    """
    labels = list(labels) if labels is not None else [""] * len(metrics_frames)
    figure = Figure(figsize=(10, 4), layout="constrained")
    axes = figure.subplots(1, 2, sharey=True)
    for (x_column, x_label), ax in zip(AXES, axes, strict=True):
        _draw_panel(ax, metrics_frames, labels, x_column)
        _decorate(ax, x_label, target_var, note_empty=x_column == "time_s")
    axes[0].set_ylabel("var (population variance per coordinate)")
    if any(labels):
        axes[0].legend(loc="best", fontsize="small")
    return figure


def plot_dirs(
    dirs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str] | None = None
) -> list[Path]:
    """Draw convergence figures from result folders.

    Without ``out`` each folder's ``convergence.png`` is redrawn; with ``out`` one
    figure compares all folders (labelled by folder name) and is written to ``out``.

    Returns
    -------
    list of Path
        The image files written.
    """
    from sim.results import atomic_write  # results imports this module to draw

    folders = [Path(d) for d in dirs]
    frames = [read_metrics(folder) for folder in folders]
    if out is None:
        jobs = [
            (folder / "convergence.png", [frame], [folder.name])
            for folder, frame in zip(folders, frames, strict=True)
        ]
    else:
        jobs = [(Path(out), frames, _labels(folders))]
    written = []
    target = _common_target(folders)
    for path, job_frames, job_labels in jobs:
        figure = convergence_figure(job_frames, job_labels, target_var=target)
        suffix = path.suffix.lstrip(".") or "png"
        written.append(atomic_write(path, functools.partial(_save, figure, suffix)))
    return written


def _save(figure: Figure, suffix: str, path: Path) -> None:
    figure.savefig(path, format=suffix, dpi=120)


def read_metrics(folder: Path) -> pd.DataFrame:
    """The ``metrics.parquet`` of a result folder.

    Raises
    ------
    AvsimError
        When ``folder`` holds no ``metrics.parquet``.
    """
    path = folder / "metrics.parquet"
    if not path.is_file():
        raise AvsimError(f"{folder}: not a result folder (no metrics.parquet)")
    return pd.read_parquet(path)


def _common_target(folders: Sequence[Path]) -> float | None:
    """``stop.target_var`` when every folder's ``scenario.yaml`` has the same one."""
    targets = set()
    for folder in folders:
        try:
            scenario = yaml.safe_load((folder / "scenario.yaml").read_text(encoding="utf-8"))
            targets.add((scenario.get("stop") or {}).get("target_var"))
        except (OSError, yaml.YAMLError, AttributeError):
            return None
    return targets.pop() if len(targets) == 1 else None


def _labels(folders: Sequence[Path]) -> list[str]:
    names = [folder.name for folder in folders]
    return names if len(set(names)) == len(names) else [str(folder) for folder in folders]


def _draw_panel(ax: Axes, frames: Sequence[pd.DataFrame], labels: Sequence[str], x: str) -> None:
    for index, (frame, label) in enumerate(zip(frames, labels, strict=True)):
        color = f"C{index % 10}"
        wide = _wide(frame, x)
        if wide.shape[1] <= MAX_SEED_LINES:
            _draw_seeds(ax, frame, x, color, label)
        else:
            _draw_band(ax, wide, color, label)


def _wide(frame: pd.DataFrame, x: str) -> pd.DataFrame:
    """``var`` with one column per seed, indexed by ``x``, last value carried forward."""
    seeds = frame["seed"] if "seed" in frame.columns else pd.Series(0, index=frame.index)
    table = frame.assign(seed=seeds).pivot_table(
        index=x, columns="seed", values="var", aggfunc="last"
    )
    return table.sort_index().ffill()


def _draw_seeds(ax: Axes, frame: pd.DataFrame, x: str, color: str, label: str) -> None:
    groups = frame.groupby("seed", sort=True) if "seed" in frame.columns else [(0, frame)]
    for index, (_, seed_frame) in enumerate(groups):
        ordered = seed_frame.sort_values(x, kind="stable")
        ax.plot(
            ordered[x],
            ordered["var"],
            color=color,
            lw=1.2,
            alpha=0.8,
            label=label if index == 0 else None,
        )


def _draw_band(ax: Axes, wide: pd.DataFrame, color: str, label: str) -> None:
    low, high = (wide.quantile(q, axis=1) for q in BAND)
    ax.fill_between(wide.index, low, high, color=color, alpha=0.25, lw=0)
    band = f"{BAND[0]:.0%}–{BAND[1]:.0%}"
    text = (
        f"{label}: median ({band} band, {wide.shape[1]} seeds)"
        if label
        else f"median ({band} band)"
    )
    ax.plot(wide.index, wide.median(axis=1), color=color, lw=1.5, label=text)


def _decorate(ax: Axes, x_label: str, target_var: float | None, note_empty: bool) -> None:
    if note_empty and _all_zero_x(ax):
        note = "no simulated time on this clock"
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", color="gray")
    ax.set_yscale("log", nonpositive="mask")
    ax.set_xlabel(x_label)
    ax.grid(True, which="major", alpha=0.3)
    if target_var:
        ax.axhline(target_var, color="gray", ls="--", lw=1, label="_target")


def _all_zero_x(ax: Axes) -> bool:
    """True when nothing was drawn or every x is 0 (the rounds clock has no seconds)."""
    return all(not np.any(np.asarray(line.get_xdata(), dtype=float)) for line in ax.get_lines())
