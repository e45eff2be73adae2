"""Worker threads that time groups' loops in the background
(:meth:`~sim.engine.netclock.alone_groups.AloneGroups._time`): the compiled loop runs
without the GIL, so a large group's loop runs beside the simulation. One pool per
process, made on first use (:func:`pool`)."""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sim.engine.netclock.alone import AlonePlan, AloneRun, LoopState, compiled


def advance_in_worker(
    alone: AlonePlan, state: LoopState, changes: list[tuple[float, int, bool]], until: float
) -> tuple[AloneRun, LoopState | None]:
    """A worker thread's part: the loop run until ``until``, and its state if its flows
    outlast it (else dropped: half the memory of a run)."""
    run = alone.advance(state, changes, until=until)
    return run, (state if run.done_at == math.inf else None)


#: The worker threads of this process (:func:`pool`): (executor, its size, pid).
_POOL: list[Any] = [None, 0, 0]


def pool(workers: int) -> ThreadPoolExecutor | None:
    """This process's worker threads for loops timed in the background: ``workers`` of
    them; None where there are none (0 asked, or the loop runs as Python, holding the
    GIL). A process forked from one with workers makes its own."""
    if workers < 1 or not compiled():
        return None
    executor, made, pid = _POOL
    if executor is None or made != workers or pid != os.getpid():
        if executor is not None and pid == os.getpid():
            executor.shutdown(wait=True)
        executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="avsim-loop")
        _POOL[:] = [executor, workers, os.getpid()]
    return executor


__all__ = ["advance_in_worker", "pool"]
