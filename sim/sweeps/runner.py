"""Run a sweep: expand, skip what a partial sweep already did, execute, tabulate, write.

The sweep folder (default ``results/<sweep name>/``) receives ``runs.parquet`` (one row
per run, in the sweep's fixed order whatever the completion order), ``table.md`` and a
copy of the sweep file as ``sweep.yaml``; with ``keep_runs`` also one result folder per
run under ``runs/NNNN/`` (NNNN is the ``run`` column).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from sim.errors import ResultExistsError
from sim.results import atomic_write_text, write_parquet
from sim.sweeps.executors import Task, default_workers, execute
from sim.sweeps.journal import Journal
from sim.sweeps.plan import RunSpec, case_labels, expand, show
from sim.sweeps.spec import Sweep, SweepSpec, as_sweep, spec_yaml
from sim.sweeps.table import Table, markdown, sweep_table

#: ``progress(done, total)`` after each finished run (and once at the start).
SweepProgress = Callable[[int, int], None]

TABLE_NOTE = (
    "Each cell is the mean over the repeats; `(k/n)`: only k of the n repeats have a "
    "value (e.g. reached the target), and the mean is over those k."
)


@dataclass(frozen=True)
class SweepResult:
    """What :func:`sweep` returns: the runs table, the report table and the folder."""

    runs: pd.DataFrame
    table: Table
    out_dir: Path

    @property
    def markdown(self) -> str:
        """``table.md``'s text."""
        return (self.out_dir / "table.md").read_text(encoding="utf-8")


def sweep(
    sweep: Sweep | SweepSpec | dict[str, Any] | str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    resume: bool = False,
    keep_runs: bool = False,
    force: bool = False,
    progress: SweepProgress | None = None,
) -> SweepResult:
    """Run every run of a sweep and write the sweep folder.

    Parameters
    ----------
    sweep
        A sweep file path, a mapping with the sweep keys, or a parsed sweep.
    out
        Sweep folder (default ``results/<name>/``).
    workers
        Local worker processes (default: one per CPU); with ``scheduler="local"`` the
        number of Dask workers.
    scheduler
        Address of a Dask scheduler, or ``"local"`` for a Dask ``LocalCluster``.
    resume
        Skip runs recorded in the folder's partial file by an interrupted sweep.
    keep_runs
        Also write a full result folder per run under ``runs/``.
    force
        Overwrite a non-empty folder.
    progress
        Called with ``(done, total)`` as runs finish.

    Raises
    ------
    ScenarioError
        When the sweep or one of its runs' scenarios is invalid (before anything runs).
    ResultExistsError
        When the folder is not empty and neither ``force`` nor a resumable ``resume``.
    """
    loaded = as_sweep(sweep)
    plan = expand(loaded)
    folder = open_folder(Path(out) if out else Path("results") / loaded.spec.name, resume, force)
    journal = Journal(folder)
    if not resume:
        journal.clear()
    done = journal.read()
    _run_missing(
        loaded, plan, done, journal, folder if keep_runs else None, workers, scheduler, progress
    )
    return _finish(loaded, plan, done, folder, journal)


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


def runs_frame(
    plan: list[RunSpec], summaries: dict[str, dict[str, Any]], as_written: bool = False
) -> pd.DataFrame:
    """One row per run: ``run, case``, the overrides by dotted key, ``seed``, the summary.

    With ``as_written`` the columns keep Python values as written in the sweep file
    (``0`` stays ``0`` beside ``0.1``), for display; otherwise pandas infers dtypes.
    """
    case_keys = (key for run in plan for key in run.columns if key not in run.grid)
    overrides = list(dict.fromkeys([*case_keys, *(key for run in plan for key in run.grid)]))
    fields = list(dict.fromkeys(k for run in plan for k in summaries[run.key] if k != "seed"))
    rows = []
    for run in plan:
        summary = summaries[run.key]
        values = [run.index, run.label, *(run.columns.get(k) for k in overrides), run.seed]
        rows.append(values + [summary.get(k) for k in fields])
    columns = ["run", "case", *overrides, "seed", *fields]
    return pd.DataFrame(rows, columns=columns, dtype=object if as_written else None)


def _run_missing(
    sweep: Sweep,
    plan: list[RunSpec],
    done: dict[str, dict[str, Any]],
    journal: Journal,
    keep: Path | None,
    workers: int | None,
    scheduler: str | None,
    progress: SweepProgress | None,
) -> None:
    todo = [run for run in plan if run.key not in done]
    tasks = [_task(sweep, run, keep) for run in todo]
    finished = len(plan) - len(todo)
    _report(progress, finished, len(plan))
    for index, summary in execute(tasks, workers or default_workers(), scheduler):
        journal.append(plan[index].key, index, summary)
        done[plan[index].key] = summary
        finished += 1
        _report(progress, finished, len(plan))


def _task(sweep: Sweep, run: RunSpec, keep: Path | None) -> Task:
    keep_dir = None if keep is None else keep / "runs" / f"{run.index:04d}"
    return Task(run.index, run.mapping, run.grid, sweep.base_dir, run.seed, keep_dir)


def _finish(
    sweep: Sweep,
    plan: list[RunSpec],
    done: dict[str, dict[str, Any]],
    folder: Path,
    journal: Journal,
) -> SweepResult:
    runs = runs_frame(plan, done)
    shown = runs_frame(plan, done, as_written=True)
    spec = sweep.spec
    baseline = None if spec.baseline is None else case_labels(spec.cases)[spec.baseline]
    table = sweep_table(shown, [*spec.grid, "case"], spec.report, baseline)
    write_parquet(folder / "runs.parquet", arrow_safe(runs))
    atomic_write_text(folder / "table.md", markdown(table, sweep.spec.name, TABLE_NOTE))
    atomic_write_text(folder / "sweep.yaml", spec_yaml(sweep))
    journal.clear()
    return SweepResult(runs, table, folder)


def arrow_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns Arrow cannot type (mixed values, mappings) are stored as their text."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object and not _arrow_typed(out[column]):
            out[column] = out[column].map(lambda v: None if v is None else show(v))
    return out


def _arrow_typed(values: pd.Series) -> bool:
    if any(isinstance(v, dict) for v in values):
        return False
    try:
        pa.array(values, from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):
        return False
    return True


def _report(progress: SweepProgress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)
