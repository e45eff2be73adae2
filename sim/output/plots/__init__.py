"""Figures: ``convergence.png`` of a result folder, ``sweep.png`` of a sweep folder.

:mod:`~sim.output.plots.context` says what a figure knows about a run (clock, continuous time,
churn) and which panels follow; :mod:`~sim.output.plots.curves` draws one family of curves;
:mod:`~sim.output.plots.convergence` the convergence figure;
:mod:`~sim.output.plots.bars` bar charts with spread and "not reached";
:mod:`~sim.output.plots.sweep` the sweep figure;
:mod:`~sim.output.plots.folders` reads folders for ``avsim plot``.
"""

from sim.output.plots.bars import report_bars
from sim.output.plots.context import FigureContext, panels
from sim.output.plots.convergence import convergence_figure, scenario_figure
from sim.output.plots.curves import BAND, MAX_SEED_LINES
from sim.output.plots.folders import plot_dirs, read_metrics, save_figure
from sim.output.plots.sweep import is_sweep_folder, plot_sweep, sweep_figure

__all__ = [
    "BAND",
    "MAX_SEED_LINES",
    "FigureContext",
    "convergence_figure",
    "is_sweep_folder",
    "panels",
    "plot_dirs",
    "plot_sweep",
    "read_metrics",
    "report_bars",
    "save_figure",
    "scenario_figure",
    "sweep_figure",
]
