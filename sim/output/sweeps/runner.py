"""Run a sweep: expand, skip what a partial sweep already did, execute, tabulate, write.

Without ``out`` nothing touches the disk: the runs, their metric rows and the table come
back in a :class:`SweepResult`. With ``out`` the sweep folder receives ``runs.parquet``
(one row per run, in the sweep's fixed order whatever the completion order),
``metrics.parquet`` (every run's metric rows, with its ``run``), ``table.md``, a copy of
the sweep file as ``sweep.yaml`` and the figure ``sweep.png``; with ``keep_runs`` also
one result folder per run under ``runs/``, named after its case, grid values and seed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sim.core.errors import AvsimError, ResultExistsError, ScenarioError
from sim.engine.resources import limit_override, memory_limit
from sim.model.scenario import Replace
from sim.output.run_folder import atomic_write_text, write_parquet
from sim.output.sweeps.executors import Task, default_workers, execute
from sim.output.sweeps.frames import arrow_safe, metrics_frame, runs_frame
from sim.output.sweeps.journal import Journal
from sim.output.sweeps.labels import json_text
from sim.output.sweeps.memory import check_sweep_memory
from sim.output.sweeps.plan import RunSpec, case_labels, expand, run_failed
from sim.output.sweeps.spec import Sweep, SweepSpec, as_sweep, spec_yaml
from sim.output.sweeps.table import Table, markdown, sweep_table, table_note

#: ``progress(done, total)`` after each finished run (and once at the start).
SweepProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class SweepResult:
    """What :func:`sweep` returns.

    Attributes
    ----------
    runs
        One row per run (``runs.parquet``).
    metrics
        Every run's metric rows (``metrics.parquet``), with its ``run``, ``case``, grid
        values and ``label``.
    table
        The report table: headers and text rows.
    markdown
        ``table.md``'s text.
    out_dir
        The sweep folder, or ``None`` when nothing was written.
    """

    runs: pd.DataFrame
    metrics: pd.DataFrame
    table: Table
    markdown: str
    out_dir: Path | None


class _Memory:
    """Finished runs kept in memory (a sweep without a folder), as the journal keeps them."""

    def __init__(self) -> None:
        self.summaries: dict[str, dict[str, Any]] = {}
        self.frames: dict[str, pd.DataFrame] = {}

    def read(self) -> dict[str, dict[str, Any]]:
        return dict(self.summaries)

    def append(self, key: str, index: int, summary: dict[str, Any], metrics: pd.DataFrame) -> None:
        self.summaries[key], self.frames[key] = summary, metrics

    def metrics(self, key: str) -> pd.DataFrame:
        return self.frames[key]


def sweep(
    sweep: Sweep | SweepSpec | dict[str, Any] | str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    resume: bool = False,
    keep_runs: bool = False,
    force: bool = False,
    progress: SweepProgress | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    repeats: int | None = None,
    figure: bool = True,
    max_memory: float | str | None = None,
) -> SweepResult:
    """Run every run of a sweep; write the sweep folder when ``out`` is given.

    Parameters
    ----------
    sweep
        A sweep file path, a mapping with the sweep keys, or a parsed sweep.
    out
        Sweep folder to write; ``None`` (default) writes nothing.
    workers
        Local worker processes (default: one per CPU); with ``scheduler="local"`` the
        number of Dask workers.
    scheduler
        Address of a Dask scheduler, or ``"local"`` for a Dask ``LocalCluster``.
    resume
        Skip runs recorded in the folder's partial files by an interrupted sweep.
    keep_runs
        Also write a full result folder per run under ``out/runs/``.
    force
        Overwrite a non-empty folder.
    progress
        Called with ``(done, total)`` as runs finish.
    overrides
        Dotted-key overrides (the CLI's ``--set``) applied to every run after its case;
        a key the grid sweeps is an error.
    repeats
        Runs per case and grid cell (the CLI's ``--repeats``).
    figure
        Draw ``sweep.png`` in the sweep folder (only with ``out``).
    max_memory
        Memory limit of every run (bytes, ``"32GiB"``, ``"none"``; the CLI's
        ``--max-memory``); default: a :func:`sim.engine.resources.memory_limit` around the call,
        else ``AVSIM_MAX_MEMORY``, else the memory available when each run starts.

    Raises
    ------
    ScenarioError
        When the sweep or one of its runs' scenarios is invalid (before anything runs).
    ResourceError
        When the sweep's largest run would not fit in the memory limit (before anything
        runs; :func:`sim.output.sweeps.memory.check_sweep_memory`).
    ResultExistsError
        When the folder is not empty and neither ``force`` nor a resumable ``resume``.
    """
    with memory_limit(max_memory) if max_memory is not None else contextlib.nullcontext():
        loaded = as_sweep(sweep)
        plan = expand(loaded, overrides, repeats)
        check_sweep_memory(loaded, plan, overrides)
        execution = _Execution(workers, scheduler, progress, limit_override())
        if out is None:
            _check_in_memory(resume, keep_runs)
            memory = _Memory()
            _run_missing(loaded, plan, memory, None, execution, overrides)
            return _finish(loaded, plan, memory, None)
        folder = open_folder(Path(out), resume, force)
        journal = Journal(folder)
        if not resume:
            journal.clear()
        _run_missing(loaded, plan, journal, folder if keep_runs else None, execution, overrides)
    result = _finish(loaded, plan, journal, folder, _run_note(overrides, repeats))
    if figure:
        _write_figure(folder)
    journal.clear()
    return result


def open_folder(folder: Path, resume: bool, force: bool) -> Path:
    """Make the sweep folder usable, or say why not (ResultExistsError)."""
    journal = Journal(folder)
    if folder.exists() and not folder.is_dir():
        raise ResultExistsError(f"{folder} exists and is not a folder")
    if not folder.exists() or not any(folder.iterdir()) or force or (resume and journal.exists()):
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    if resume and (folder / "runs.parquet").is_file():
        raise ResultExistsError(f"{folder}: this sweep is complete; use --force to run it again")
    hint = " (or --resume to continue the partial sweep)" if journal.exists() else ""
    raise ResultExistsError(f"{folder} exists and is not empty; use --force to overwrite it{hint}")


def _check_in_memory(resume: bool, keep_runs: bool) -> None:
    for name, given in (("resume", resume), ("keep_runs", keep_runs)):
        if given:
            raise AvsimError(f"{name}=True needs out=, the sweep folder to write")


@dataclass(frozen=True)
class _Execution:
    """How the runs execute: worker count, Dask scheduler, progress callback, and the
    memory limit each run gets (``None``: its process's default)."""

    workers: int | None
    scheduler: str | None
    progress: SweepProgress | None
    max_memory: float | None


def _run_missing(
    sweep: Sweep,
    plan: list[RunSpec],
    store: Journal | _Memory,
    keep: Path | None,
    execution: _Execution,
    overrides: Mapping[str, Any] | None,
) -> None:
    """Run the plan's runs that ``store`` lacks; a run's error at run time names where
    the sweep sets the key at fault (``overrides``: the ``--set`` keys)."""
    done = store.read()
    todo = [run for run in plan if run.key not in done]
    tasks = [_task(sweep, run, keep, execution.max_memory) for run in todo]
    finished = len(plan) - len(todo)
    progress = execution.progress
    _report(progress, finished, len(plan))
    workers = execution.workers or default_workers()
    try:
        for index, (summary, metrics) in execute(tasks, workers, execution.scheduler):
            store.append(plan[index].key, index, summary, metrics)
            finished += 1
            _report(progress, finished, len(plan))
    except ScenarioError as exc:
        failed = getattr(exc, "run_index", None)
        if failed is None:
            raise
        raise run_failed(exc, plan[failed], overrides) from None


def _task(sweep: Sweep, run: RunSpec, keep: Path | None, max_memory: float | None) -> Task:
    keep_dir = None if keep is None else keep / "runs" / run.dirname
    return Task(run.index, run.mapping, run.grid, sweep.base_dir, run.seed, keep_dir, max_memory)


def _finish(
    sweep: Sweep,
    plan: list[RunSpec],
    store: Journal | _Memory,
    folder: Path | None,
    note: str = "",
) -> SweepResult:
    summaries = store.read()
    runs = runs_frame(plan, summaries)
    metrics = metrics_frame(plan, store.metrics)
    shown = runs_frame(plan, summaries, as_written=True)
    spec = sweep.spec
    baseline = None if spec.baseline is None else case_labels(spec.cases, sweep.base)[spec.baseline]
    table = sweep_table(shown, [*spec.grid, "case"], spec.report, baseline, spec.speedup_fields())
    text = markdown(table, spec.name, table_note(table))
    if folder is not None:
        write_parquet(folder / "runs.parquet", arrow_safe(runs))
        write_parquet(folder / "metrics.parquet", arrow_safe(metrics))
        atomic_write_text(folder / "table.md", text)
        atomic_write_text(folder / "sweep.yaml", spec_yaml(sweep) + note)
    return SweepResult(runs, metrics, table, text, folder)


def _run_note(overrides: Mapping[str, Any] | None, repeats: int | None) -> str:
    """Comment lines for ``sweep.yaml`` recording the command line's changes."""
    options = [
        f"--set {key}{':=' if isinstance(value, Replace) else '='}{json_text(value)}"
        for key, value in (overrides or {}).items()
    ]
    options += [] if repeats is None else [f"--repeats {repeats}"]
    return f"# run with: {' '.join(options)}\n" if options else ""


def _write_figure(folder: Path) -> None:
    """Draw the sweep figure ``sweep.png`` from the folder's files."""
    from sim.output.plots import plot_sweep  # matplotlib is imported only when drawing

    plot_sweep(folder)


def _report(progress: SweepProgress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)
