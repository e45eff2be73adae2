"""Sweeps: a base scenario × cases × a grid of dotted keys × repeats, run in parallel.

``sim.sweep("study.yaml", workers=4)`` writes ``runs.parquet``, ``table.md`` and
``sweep.yaml`` to the sweep folder and returns a :class:`SweepResult`.
"""

from sim.sweeps.runner import SweepResult, sweep
from sim.sweeps.spec import Sweep, SweepSpec, load_sweep, sweep_from_mapping

__all__ = ["Sweep", "SweepResult", "SweepSpec", "load_sweep", "sweep", "sweep_from_mapping"]
