"""Figures: ``convergence.png`` of a result folder, ``sweep.png`` of a sweep folder.

:mod:`~sim.plots.context` says what a figure knows about a run (clock, continuous time,
churn) and which panels follow; :mod:`~sim.plots.curves` draws one family of curves;
:mod:`~sim.plots.convergence` the convergence figure; :mod:`~sim.plots.bars` bar charts
with spread and "not reached"; :mod:`~sim.plots.sweep` the sweep figure;
:mod:`~sim.plots.folders` reads folders for ``avsim plot``.
"""

from sim.plots.bars import report_bars
from sim.plots.context import FigureContext, panels
from sim.plots.convergence import convergence_figure, scenario_figure
from sim.plots.curves import BAND, MAX_SEED_LINES
from sim.plots.folders import plot_dirs, read_metrics, save_figure
from sim.plots.sweep import is_sweep_folder, plot_sweep, sweep_figure

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
