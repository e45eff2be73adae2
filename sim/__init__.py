"""avsim: a discrete-event simulator for averaging protocols on unreliable networks.

The Python API the CLI and the notebooks call::

    import sim
    sc = sim.load_scenario("scenarios/quickstart.yaml", overrides={"peers.count": 128})
    res = sim.run(sc, seed=0)                      # one RunResult
    runs = sim.run(sc, repeats=3, out="results/x")  # three, written to a result folder
    study = sim.sweep("study.yaml", repeats=2)      # in memory; out=... writes the folder

A script that runs a sweep with worker processes needs ``if __name__ == "__main__":``
around it (the workers import the script).

Names are imported lazily so that ``import sim.units`` (used by the protocol modules)
does not pull in the engine, which itself imports the protocols.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sim.errors import AvsimError, ScenarioError

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers
    from sim.api import run
    from sim.result import RunResult
    from sim.results import write_result
    from sim.scenario import load_scenario, scenario_from_mapping
    from sim.sweeps import SweepResult, load_sweep, sweep

_LAZY = {
    "run": "sim.api",
    "RunResult": "sim.result",
    "load_scenario": "sim.scenario",
    "scenario_from_mapping": "sim.scenario",
    "write_result": "sim.results",
    "sweep": "sim.sweeps",
    "SweepResult": "sim.sweeps",
    "load_sweep": "sim.sweeps",
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
    "load_scenario",
    "load_sweep",
    "run",
    "scenario_from_mapping",
    "sweep",
    "write_result",
]
