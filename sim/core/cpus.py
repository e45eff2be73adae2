"""How many CPUs this process may use (its affinity where the OS tells, else all), and
how many worker threads the network clock's loops may take (``AVSIM_LOOP_THREADS``)."""

from __future__ import annotations

import os

from sim.core.errors import SimulationError

#: Environment variable: worker threads that time async groups' loops beside the
#: simulation (an integer ≥ 0; 0: none; unset: :func:`loop_threads`' default).
LOOP_THREADS_ENV = "AVSIM_LOOP_THREADS"


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask on Linux, else the count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def loop_threads() -> int:
    """Worker threads for the network clock's loops: ``AVSIM_LOOP_THREADS`` when set,
    else 2 where this process may use two CPUs or more (a worker beside the
    simulation's thread needs a second CPU), else 0. The results never depend on it.

    Raises
    ------
    SimulationError
        When the variable is set to anything but an integer ≥ 0 (one line: the
        variable, its value, what was expected).
    """
    raw = os.environ.get(LOOP_THREADS_ENV, "").strip()
    if not raw:
        return 2 if usable_cpus() >= 2 else 0
    try:
        threads = int(raw)
    except ValueError:
        threads = -1
    if threads < 0:
        raise SimulationError(
            f"{LOOP_THREADS_ENV}: expected a number of threads (an integer >= 0), got {raw!r}"
        )
    return threads


__all__ = ["LOOP_THREADS_ENV", "loop_threads", "usable_cpus"]
