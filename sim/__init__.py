"""avsim: a discrete-event simulator for averaging protocols on unreliable networks.

The Python API the CLI and the notebooks call::

    import sim
    sc = sim.load_scenario("scenarios/quickstart.yaml", overrides={"peers.count": 128})
    res = sim.run(sc, seed=0)
    sim.write_result(res, "results/x")

Names are imported lazily so that ``import sim.units`` (used by the protocol modules)
does not pull in the engine, which itself imports the protocols.
"""

from __future__ import annotations

import importlib
from typing import Any

from sim.errors import AvsimError, ScenarioError

_LAZY = {
    "run": "sim.engine",
    "RunResult": "sim.result",
    "load_scenario": "sim.scenario",
    "scenario_from_mapping": "sim.scenario",
    "write_result": "sim.results",
    "sweep": "sim.sweeps",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")


__all__ = ["AvsimError", "ScenarioError", *_LAZY]
