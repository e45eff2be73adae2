"""Sweeps: a base scenario × cases × a grid of dotted keys × repeats, run in parallel.

``sim.sweep("study.yaml", workers=4)`` runs every run and returns a :class:`SweepResult`
(the runs, their metric rows and the table) without writing anything;
``out="results/study"`` writes the sweep folder (``runs.parquet``, ``metrics.parquet``,
``table.md``, ``sweep.yaml``, ``sweep.png``). ``overrides`` and ``repeats`` are the CLI's
``--set`` and ``--repeats``. :class:`SweepSpec` is the file format (its JSON Schema:
:func:`json_schema`).
"""

from sim.output.sweeps.runner import SweepResult, sweep
from sim.output.sweeps.spec import Sweep, SweepSpec, json_schema, load_sweep, sweep_from_mapping

__all__ = [
    "Sweep",
    "SweepResult",
    "SweepSpec",
    "json_schema",
    "load_sweep",
    "sweep",
    "sweep_from_mapping",
]
