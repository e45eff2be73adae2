"""Where a sweep's runs execute: in this process, a local process pool, or Dask.

Each worker rebuilds its run's scenario with :func:`sim.model.scenario.scenario_from_mapping`
and calls :func:`sim.engine.run`; its summary dict and metric rows travel back. Results arrive in
completion order, tagged with the run's index, so the caller can restore the sweep's
order whatever the scheduling.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import threading
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sim.core.cpus import usable_cpus
from sim.core.errors import AvsimError, Interrupted, ScenarioError

#: Modules the fork server imports once, so that every worker starts warm (a run
#: imports ``array_api_compat.numpy`` on first use: a quarter second per worker).
PRELOAD = [
    "sim",
    "protocols",
    "sim.output.run_folder",
    "sim.output.sweeps.executors",
    "array_api_compat.numpy",
]
#: How long to wait for a Dask scheduler to answer.
DASK_CONNECT_TIMEOUT = "20s"
BROKEN_POOL = (
    "a sweep worker process died (out of memory? or a script that calls sim.sweep at import "
    "time: guard it with `if __name__ == '__main__':`)"
)


@dataclass(frozen=True)
class Task:
    """What a worker needs for one run (small and picklable).

    Attributes
    ----------
    index
        The run's position in the sweep.
    mapping
        Base scenario mapping with the run's case applied.
    grid
        The grid cell's dotted-key overrides.
    base_dir
        Folder that relative paths in the scenario resolve against.
    seed
        The run's seed.
    keep_dir
        Result folder to write the full run to (``--keep-runs``), or ``None``.
    max_memory
        The run's memory limit, bytes (``--max-memory``; ``inf``: none), or ``None``
        for the worker's default (``AVSIM_MAX_MEMORY``, else the memory available).
    """

    index: int
    mapping: dict[str, Any]
    grid: dict[str, Any]
    base_dir: Path
    seed: int
    keep_dir: Path | None = None
    max_memory: float | None = None


#: What a worker sends back: the run's summary (plain Python values) and metric rows.
Outcome = tuple[dict[str, Any], pd.DataFrame]


@dataclass
class _WorkerState:
    """A pool worker's signal state: inside :func:`run_task`, and stopped by a signal."""

    running: bool = False
    stopped: int | None = None


_WORKER = _WorkerState()


def run_task(task: Task) -> Outcome:
    """Run one task and return its summary (plain Python values) and its metric rows.

    A :class:`ScenarioError` raised while running (not while validating: a distribution
    whose draws overflow, say) carries ``run_index``, the task's index; other avsim errors
    come back as :class:`AvsimError` prefixed by the run's index and seed."""
    from sim.engine import run
    from sim.engine.resources import memory_limit
    from sim.model.scenario import scenario_from_mapping
    from sim.output.run_folder import plain, write_result

    if _WORKER.stopped is not None:  # a signal stopped this worker: run nothing more
        raise Interrupted(_WORKER.stopped)
    _WORKER.running = True
    try:
        scenario = scenario_from_mapping(task.mapping, task.grid, base_dir=task.base_dir)
        with memory_limit(task.max_memory) if task.max_memory is not None else nullcontext():
            result = run(scenario, seed=task.seed)
        if task.keep_dir is not None:
            write_result(result, task.keep_dir, force=True)
        return plain(result.summary, finite_only=False), result.metrics
    except ScenarioError as exc:  # the sweep's runner names where the sweep sets its key
        exc.run_index = task.index  # type: ignore[attr-defined]
        raise
    except AvsimError as exc:  # re-raised as the base class: it pickles back from workers
        raise AvsimError(f"run {task.index} (seed {task.seed}): {exc}") from None
    finally:
        _WORKER.running = False


def execute(
    tasks: Sequence[Task], workers: int, scheduler: str | None = None
) -> Iterator[tuple[int, Outcome]]:
    """Yield ``(index, (summary, metrics))`` for every task, in completion order."""
    if scheduler:
        yield from _dask(tasks, workers, scheduler)
    elif workers <= 1 or len(tasks) <= 1:
        yield from ((task.index, run_task(task)) for task in tasks)
    else:
        yield from _pool(tasks, workers)


def default_workers() -> int:
    """One worker per CPU this process may use."""
    return usable_cpus()


def _pool(tasks: Sequence[Task], workers: int) -> Iterator[tuple[int, Outcome]]:
    context = _context()
    size = min(workers, len(tasks))
    with ProcessPoolExecutor(size, mp_context=context, initializer=init_worker) as pool:
        futures = {pool.submit(run_task, task): task.index for task in tasks}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        except BrokenProcessPool:
            raise AvsimError(BROKEN_POOL) from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def init_worker() -> None:
    """Pool worker initializer: :func:`exit_with_parent`, and stop on SIGTERM or SIGINT
    without ever dying in the middle of sending a result.

    An interrupted sweep sends its workers SIGTERM (``sim.cli.signals``), and Ctrl-C
    reaches them too. A worker killed while it writes a result to the pool's pipe leaves
    half a message there, and the pool's reader thread then waits for the rest forever.
    So the signal raises :class:`Interrupted` only inside :func:`run_task`, where
    it ends the run in flight at once; elsewhere it only marks the worker stopped, and
    every later :func:`run_task` raises at its start. The pool's shutdown then collects
    those errors and ends its workers as it always does."""
    exit_with_parent()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop_worker)


def _stop_worker(signum: int, frame: object) -> None:
    _WORKER.stopped = signum
    if _WORKER.running:
        _WORKER.running = False  # raised once: its traceback is sent back, not re-raised
        raise Interrupted(signum)


def exit_with_parent() -> None:
    """Worker initializer: exit as soon as the sweep's process is gone (``kill -9``
    included), rather than wait for work forever."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def wait_then_exit() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=wait_then_exit, name="avsim-exit-with-parent", daemon=True).start()


def _context() -> multiprocessing.context.BaseContext:
    """A fork server with avsim preloaded (fast, and safe with threads); spawn elsewhere."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def _dask(tasks: Sequence[Task], workers: int, scheduler: str) -> Iterator[tuple[int, Outcome]]:
    distributed = _import_distributed()
    address = local_cluster(workers) if scheduler == "local" else scheduler
    try:
        with distributed.Client(address, timeout=DASK_CONNECT_TIMEOUT) as client:
            tag = uuid.uuid4().hex[:8]
            futures = {
                client.submit(run_task, t, key=f"avsim-{tag}-{t.index}", pure=False): t.index
                for t in tasks
            }
            for future in distributed.as_completed(futures):
                yield futures[future], future.result()
    except OSError as exc:
        raise AvsimError(
            f"--scheduler {scheduler}: cannot use the Dask scheduler ({exc})"
        ) from None


#: LocalClusters started by ``scheduler="local"`` in this process, by worker count: kept
#: for the next sweep (starting one costs seconds), closed at exit.
_LOCAL_CLUSTERS: dict[int, Any] = {}


def local_cluster(workers: int) -> Any:
    """The process's Dask LocalCluster with ``workers`` single-threaded worker processes,
    started on first use and reused by later sweeps; its scheduler's address."""
    cluster = _LOCAL_CLUSTERS.get(workers)
    if cluster is None or cluster.status.name != "running":
        distributed = _import_distributed()
        cluster = distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
        if not _LOCAL_CLUSTERS:
            atexit.register(close_local_clusters)
        _LOCAL_CLUSTERS[workers] = cluster
    return cluster.scheduler_address


def close_local_clusters() -> None:
    """Close the LocalClusters this process started (also done at exit)."""
    while _LOCAL_CLUSTERS:
        _, cluster = _LOCAL_CLUSTERS.popitem()
        cluster.close()


def _import_distributed() -> Any:
    try:
        import dask.distributed as distributed
    except ImportError:
        raise AvsimError("--scheduler needs dask.distributed: pip install 'avsim[dask]'") from None
    return distributed
