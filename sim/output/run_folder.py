"""Result folders: write one run (or its repeats) to disk, atomically, never silently over.

A result folder holds ``metrics.parquet`` (every seed), ``summary.json`` (the runs and
their mean), ``scenario.yaml`` (the resolved scenario), ``peers.parquet``, one
``<name>.parquet`` per extra table and ``convergence.png``; with a trace (``avsim run
--trace``) also ``trace.json``, the Chrome trace events of every seed. The whole folder is first
written to a hidden temporary folder beside it and then renamed to its final name
(:func:`sim.output.atomic.staged_folder`), so a reader — or a run interrupted while writing —
sees no folder, the previous one, or the complete new one; never half a folder. Single
files (:func:`atomic_write`) are likewise written to a temporary file and renamed.
"""

from __future__ import annotations

import functools
import json
import math
import os
import secrets
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from sim.core.errors import ResultExistsError
from sim.engine.result import RunResult
from sim.output.atomic import staged_folder

#: Summary keys that are labels or places, not quantities: never averaged (``nan`` is
#: where a NaN appeared, ``{round, time_s, peer}``, or null in a healthy run).
NOT_AVERAGED = frozenset({"seed", "stop_reason", "nan"})
#: Summary fields that are ``None`` in a run that never reached a variance target: the
#: only fields ``reached`` counts.
TARGET_PREFIXES = ("rounds_to_", "time_to_")


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary path beside ``path``, then rename it to ``path``.

    Parameters
    ----------
    path
        Final file name; its folder must exist.
    write
        Writes the whole file at the path it is given.
    """
    final = Path(path)
    tmp = _fresh_file(final)
    try:
        write(tmp)
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final


def _fresh_file(final: Path) -> Path:
    """A new empty hidden file beside ``final``, created with mode 0666 less the umask in
    force now, as ``open()`` would (not ``mkstemp``'s 0600, and without reading the umask,
    which can only be read by setting it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = final.parent / f".{final.name}.{secrets.token_hex(4)}.tmp"
        try:
            os.close(os.open(tmp, flags, 0o666))
        except FileExistsError:
            continue
        return tmp


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_parquet(path: str | os.PathLike[str], frame: pd.DataFrame) -> Path:
    """Write ``frame`` (without its index) to ``path`` atomically."""
    return atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False))


def check_folder(out_dir: str | os.PathLike[str], force: bool) -> Path:
    """Say whether ``out_dir`` may receive a result, without creating it.

    Raises
    ------
    ResultExistsError
        When ``out_dir`` is a file, or a folder above it is, or it exists, is not empty
        and ``force`` is false.
    """
    folder = Path(out_dir)
    if folder.exists() and not folder.is_dir():
        raise ResultExistsError(f"{folder} exists and is not a folder")
    above = next((p for p in folder.parents if p.exists()), None)
    if above is not None and not above.is_dir():  # its folder cannot be made
        raise ResultExistsError(f"{folder}: cannot make this folder, {above} is a file")
    if folder.is_dir() and any(folder.iterdir()) and not force:
        raise ResultExistsError(f"{folder} exists and is not empty; use --force to overwrite it")
    return folder


def prepare_folder(out_dir: str | os.PathLike[str], force: bool) -> Path:
    """Create ``out_dir`` after :func:`check_folder` allowed it."""
    folder = check_folder(out_dir, force)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def summarize_runs(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean of every numeric summary key over the runs, ignoring ``None``.

    A key such as ``rounds_to_target`` is ``None`` in a run that never reached the
    target: its mean is taken over the runs that did, and is ``None`` when none did.
    The keys of :data:`NOT_AVERAGED` (``seed``, ``stop_reason``, ``nan``) and
    non-numeric values are left out.
    """
    keys = list(dict.fromkeys(key for summary in summaries for key in summary))
    mean: dict[str, Any] = {}
    for key in keys:
        if key in NOT_AVERAGED:
            continue
        values = [summary.get(key) for summary in summaries]
        if any(value is not None and not _is_number(value) for value in values):
            continue
        present = [float(value) for value in values if value is not None]
        mean[key] = math.fsum(present) / len(present) if present else None
    return mean


def reached_counts(summaries: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many runs reached each variance target: have a value for each target field
    (``rounds_to_*``, ``time_to_*``); no other field is counted."""
    keys = dict.fromkeys(key for summary in summaries for key in summary)
    return {
        key: sum(summary.get(key) is not None for summary in summaries)
        for key in keys
        if key.startswith(TARGET_PREFIXES)
    }


def write_result(
    result_or_results: RunResult | Sequence[RunResult],
    out_dir: str | os.PathLike[str],
    force: bool = False,
) -> Path:
    """Write a run, or the repeats of one scenario, to the result folder ``out_dir``.

    Parameters
    ----------
    result_or_results
        One :class:`~sim.engine.result.RunResult` or a list of them (the repeats, in seed order).
    out_dir
        The result folder; created when missing.
    force
        Replace an existing, non-empty folder (as a whole: files of the old result that
        the new one does not have do not linger).

    Returns
    -------
    Path
        The folder written.

    Raises
    ------
    ResultExistsError
        When ``out_dir`` is not empty and ``force`` is false.
    """
    results = _as_list(result_or_results)
    folder = check_folder(out_dir, force)
    with staged_folder(folder, replace=force) as staging:
        _write_files(results, staging)
    return folder


def _write_files(results: Sequence[RunResult], folder: Path) -> None:
    """Every file of the result folder, into ``folder``."""
    write_parquet(folder / "metrics.parquet", _concat(r.metrics for r in results))
    atomic_write_text(folder / "summary.json", summary_json(results))
    atomic_write_text(folder / "scenario.yaml", scenario_yaml(results[0].scenario))
    write_parquet(folder / "peers.parquet", _concat_by_seed(results, lambda r: r.peers))
    for name in dict.fromkeys(name for r in results for name in r.extra_tables):
        table = _concat_by_seed(results, functools.partial(_extra_table, name=name))
        write_parquet(folder / f"{name}.parquet", table)
    _write_figure(folder / "convergence.png", results)
    if any(r.trace is not None for r in results):
        atomic_write(folder / "trace.json", functools.partial(write_trace, results=results))


def write_trace(path: Path, results: Sequence[RunResult]) -> None:
    """Write ``trace.json``: ``{"traceEvents": [...], "displayTimeUnit": "ms"}`` with the
    trace events of every run (``pid`` = its seed), one event per line."""
    with path.open("w", encoding="utf-8") as file:
        file.write('{"traceEvents": [')
        sep = "\n"
        for result in results:
            for event in result.trace or ():
                file.write(sep + json.dumps(event, ensure_ascii=False, allow_nan=False))
                sep = ",\n"
        file.write('\n], "displayTimeUnit": "ms"}\n')


def summary_document(results: Sequence[RunResult]) -> dict[str, Any]:
    """The mapping stored in ``summary.json``."""
    scenario = results[0].scenario
    runs = [plain(r.summary) for r in results]
    return {
        "scenario": scenario.get("name"),
        "protocol": (scenario.get("protocol") or {}).get("name"),
        "runs": runs,
        "mean": plain(summarize_runs(runs)),
        "reached": reached_counts(runs),
        "version": package_version(),
        "git_sha": git_sha(),
    }


def summary_json(results: Sequence[RunResult]) -> str:
    """``summary.json``'s text: standard JSON (non-finite numbers become ``null``)."""
    return json.dumps(summary_document(results), indent=2, allow_nan=False) + "\n"


def scenario_yaml(scenario: Mapping[str, Any]) -> str:
    """The resolved scenario as YAML, keys in their schema order."""
    mapping = plain(dict(scenario), finite_only=False)
    return yaml.safe_dump(mapping, sort_keys=False, allow_unicode=True)


def package_version() -> str | None:
    """The installed avsim version, or ``None`` when it is not installed."""
    try:
        return metadata.version("avsim")
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def git_sha() -> str | None:
    """The commit of the source tree avsim is imported from, or ``None`` outside git."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and sha else None


def _as_list(result_or_results: RunResult | Sequence[RunResult]) -> list[RunResult]:
    results = (
        [result_or_results] if isinstance(result_or_results, RunResult) else list(result_or_results)
    )
    if not results:
        raise ValueError("write_result needs at least one RunResult")
    return results


def _concat(frames: Iterable[pd.DataFrame | None]) -> pd.DataFrame:
    kept = [frame for frame in frames if frame is not None]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()


def _concat_by_seed(
    results: Sequence[RunResult], pick: Callable[[RunResult], pd.DataFrame | None]
) -> pd.DataFrame:
    """Concatenate one table per run, with a leading ``seed`` column when it has none."""
    frames = []
    for result in results:
        frame = pick(result)
        if frame is None:
            continue
        if "seed" not in frame.columns:
            frame = frame.copy()
            frame.insert(0, "seed", result.summary.get("seed"))
        frames.append(frame)
    return _concat(frames)


def _extra_table(result: RunResult, name: str) -> pd.DataFrame | None:
    return result.extra_tables.get(name)


def _write_figure(path: Path, results: Sequence[RunResult]) -> None:
    from sim.output.plots import scenario_figure  # matplotlib is imported only when drawing

    figure = scenario_figure(_concat(r.metrics for r in results), results[0].scenario)
    atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=120))


def _is_number(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int | float) or _is_numpy_number(value)


def _is_numpy_number(value: object) -> bool:
    return hasattr(value, "dtype") and getattr(value, "dtype").kind in "iuf"  # noqa: B009


def plain(value: Any, finite_only: bool = True) -> Any:
    """Turn numpy scalars and tuples into plain values; non-finite floats into ``None``
    when ``finite_only`` (JSON has no infinity; YAML has, and scenarios use ``inf``)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v, finite_only) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, finite_only) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if finite_only and isinstance(value, float) and not math.isfinite(value):
        return None
    return value
