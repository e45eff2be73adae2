"""A sweep's memory limit: refuse, before any run starts, a sweep whose largest run would
not fit; and carry the limit to every run, in whichever process it runs.

Every run checks its own estimate when it starts (:func:`sim.engine.resources.guard`). A sweep
checks its largest run first (:func:`check_sweep_memory`), so that a grid value with a
zero too many is refused at once, not after the runs before it. The limit in force is
``--max-memory`` (``sim.sweep(max_memory=...)``, or a :func:`sim.engine.resources.memory_limit`
around the call), else ``AVSIM_MAX_MEMORY``, else the memory available; the explicit
one travels with each task (:attr:`sim.output.sweeps.executors.Task.max_memory`), as worker
processes — a fork server started earlier, a Dask cluster — do not share the caller's
context or environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.engine.resources import check_memory, culprit, limit_bytes
from sim.model.scenario import scenario_from_mapping
from sim.output.sweeps.plan import RunSpec, where_in_run
from sim.output.sweeps.spec import Sweep


def check_sweep_memory(
    sweep: Sweep, plan: list[RunSpec], overrides: Mapping[str, Any] | None = None
) -> None:
    """Refuse ``plan`` when its largest run (by estimate; the first of equals) exceeds
    the memory limit in force.

    Raises
    ------
    sim.engine.resources.ResourceError
        One line naming the key that drives the estimate where the sweep sets it
        (``grid.peers.count``, ``cases[1].protocol.part_bytes``, ``--set vector.dim``),
        the estimate and the limit.
    """
    if not plan:
        return
    largest = max(plan, key=lambda run: run.memory)
    scenario = scenario_from_mapping(largest.mapping, largest.grid, base_dir=sweep.base_dir)
    key = culprit(scenario, limit=limit_bytes()[0]).key
    check_memory(scenario, where_in_run(key, largest, overrides))
