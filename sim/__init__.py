"""avsim: a discrete-event simulator for averaging protocols on unreliable networks.

The Python API the CLI and the notebooks call::

    import sim
    sc = sim.load_scenario("scenarios/quickstart.yaml", overrides={"peers.count": 128})
    res = sim.run(sc, seed=0)
    sim.write_result(res, "results/x")
"""

from sim.engine import run
from sim.errors import AvsimError, ScenarioError
from sim.result import RunResult
from sim.scenario import load_scenario, scenario_from_mapping

__all__ = [
    "AvsimError",
    "RunResult",
    "ScenarioError",
    "load_scenario",
    "run",
    "scenario_from_mapping",
]
