"""avsim: a discrete-event simulator for averaging protocols on unreliable networks.

The Python API the CLI and the notebooks call::

    import sim
    sc = sim.load_scenario("scenarios/quickstart.yaml", overrides={"peers.count": 128})
    res = sim.run(sc, seed=0)                      # one RunResult
    runs = sim.run(sc, repeats=3, out="results/x")  # three, written to a result folder
    traced = sim.run(sc, trace=sim.TraceOptions())  # with traced.trace (network clock)
    study = sim.sweep("study.yaml", repeats=2)      # in memory; out=... writes the folder

A script that runs a sweep with worker processes needs ``if __name__ == "__main__":``
around it (the workers import the script).

Names are imported lazily so that ``import sim.core.units`` (used by the protocol modules)
does not pull in the engine, which itself imports the protocols.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sim.core.errors import AvsimError, ScenarioError

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers
    from sim.api import run
    from sim.engine.result import RunResult
    from sim.engine.trace import TraceOptions
    from sim.model.scenario import load_scenario, scenario_from_mapping
    from sim.output.run_folder import write_result
    from sim.output.sweeps import SweepResult, load_sweep, sweep

_LAZY = {
    "run": "sim.api",
    "RunResult": "sim.engine.result",
    "TraceOptions": "sim.engine.trace",
    "load_scenario": "sim.model.scenario",
    "scenario_from_mapping": "sim.model.scenario",
    "write_result": "sim.output.run_folder",
    "sweep": "sim.output.sweeps",
    "SweepResult": "sim.output.sweeps",
    "load_sweep": "sim.output.sweeps",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")


__all__ = [
    "AvsimError",
    "RunResult",
    "ScenarioError",
    "SweepResult",
    "TraceOptions",
    "load_scenario",
    "load_sweep",
    "run",
    "scenario_from_mapping",
    "sweep",
    "write_result",
]
