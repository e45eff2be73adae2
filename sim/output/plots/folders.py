"""Figures from folders on disk: result folders (``convergence.png``) and sweep folders
(``sweep.png``), as ``avsim plot`` draws them."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import yaml
from matplotlib.figure import Figure

from sim.core.errors import AvsimError
from sim.output.plots.context import FigureContext
from sim.output.plots.convergence import convergence_figure, scenario_figure


def plot_dirs(
    dirs: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str] | None = None,
    labels: Sequence[str] | None = None,
) -> list[Path]:
    """Draw the figures of result folders and sweep folders.

    Without ``out`` each result folder's ``convergence.png`` and each sweep folder's
    ``sweep.png`` is redrawn. With ``out``, one figure compares all result folders
    (or draws the one sweep folder) and is written to ``out``.

    Parameters
    ----------
    dirs
        Result folders (``metrics.parquet``) or sweep folders (``runs.parquet``).
    out
        One image comparing ``dirs``; its suffix picks the format (default PNG).
    labels
        One legend label per folder (default: the folder names, or the paths when two
        names are equal).

    Returns
    -------
    list of Path
        The image files written.

    Raises
    ------
    AvsimError
        A folder that is neither kind, a label count that does not match, or ``out``
        with a sweep folder among several folders.
    """
    from sim.output.plots.sweep import is_sweep_folder, plot_sweep

    folders = [Path(d) for d in dirs]
    names = _labels(folders, labels)
    sweeps = [is_sweep_folder(folder) for folder in folders]
    if out is not None and any(sweeps) and len(folders) > 1:
        raise AvsimError("--out: a sweep folder is drawn alone (give one DIR, or no --out)")
    if out is not None and any(sweeps):
        return [plot_sweep(folders[0], out, title=labels[0] if labels else None)]
    if out is not None:
        return [save_figure(compare_figure(folders, names), Path(out))]
    written = []
    for folder, name, sweep in zip(folders, names, sweeps, strict=True):
        if sweep:
            written.append(plot_sweep(folder, title=name if labels else None))
        else:
            figure = folder_figure(folder, name)
            written.append(save_figure(figure, folder / "convergence.png"))
    return written


def read_metrics(folder: Path) -> pd.DataFrame:
    """The ``metrics.parquet`` of a result folder.

    Raises
    ------
    AvsimError
        When ``folder`` holds no ``metrics.parquet``.
    """
    path = folder / "metrics.parquet"
    if not path.is_file():
        raise AvsimError(
            f"{folder}: not a result folder (no metrics.parquet) nor a sweep folder "
            "(no runs.parquet)"
        )
    return pd.read_parquet(path)


def save_figure(figure: Figure, path: Path) -> Path:
    """Write ``figure`` atomically; the suffix of ``path`` picks the format (default PNG)."""
    from sim.output.run_folder import atomic_write  # results imports this package to draw

    suffix = path.suffix.lstrip(".") or "png"
    return atomic_write(path, functools.partial(_save, figure, suffix))


def _save(figure: Figure, suffix: str, path: Path) -> None:
    figure.savefig(path, format=suffix, dpi=120)


def compare_figure(folders: Sequence[Path], labels: Sequence[str]) -> Figure:
    """One convergence figure over result folders, one colour and legend entry each."""
    frames = [read_metrics(folder) for folder in folders]
    contexts = [FigureContext.from_folder(folder) for folder in folders]
    target = _common_target(folders)
    return convergence_figure(frames, labels, target, contexts, title="convergence")


def folder_figure(folder: Path, label: str) -> Figure:
    """The ``convergence.png`` of one result folder, its legend entry ``label``."""
    return scenario_figure(read_metrics(folder), {**_scenario(folder), "name": label})


def _scenario(folder: Path) -> dict:
    try:
        scenario = yaml.safe_load((folder / "scenario.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return scenario if isinstance(scenario, dict) else {}


def _common_target(folders: Sequence[Path]) -> float | None:
    """``stop.target_var`` when every folder's ``scenario.yaml`` has the same one."""
    targets = {(_scenario(folder).get("stop") or {}).get("target_var") for folder in folders}
    return targets.pop() if len(targets) == 1 else None


def _labels(folders: Sequence[Path], labels: Sequence[str] | None) -> list[str]:
    if labels:
        if len(labels) != len(folders):
            raise AvsimError(
                f"--label: expected one label per DIR ({len(folders)}), got {len(labels)}"
            )
        return list(labels)
    names = [folder.name for folder in folders]
    return names if len(set(names)) == len(names) else [str(folder) for folder in folders]
