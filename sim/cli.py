"""The ``avsim`` command line: run, validate, sweep, list, schema, plot.

Library code raises :class:`~sim.errors.AvsimError`; only this module turns errors in
user input into one line on stderr and exit code 2 — never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import typer
import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from sim.errors import AvsimError, ScenarioError

USAGE_EXIT = 2
#: A progress bar appears once a run has lasted this long (shorter runs stay quiet).
PROGRESS_DELAY_S = 2.0
#: Up to this many repeats the summary table shows one column per seed.
MAX_SEED_COLUMNS = 4
SUMMARY_COLUMNS = (
    "seed", "rounds", "sim_time_s", "final_var", "rounds_to_target", "time_to_target_s",
    "bytes_sent", "wall_time_s",
)  # fmt: skip

app = typer.Typer(
    name="avsim",
    help="Discrete-event simulator for averaging protocols on unreliable networks.",
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    add_completion=False,
)
stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False)

ScenarioArg = Annotated[Path, typer.Argument(help="Scenario YAML file.")]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set", help="Override a scenario key: dotted.key=value (YAML scalar). Repeatable."
    ),
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Overwrite an existing, non-empty folder.")
]


def main() -> None:
    """Console entry point: run the app; usage errors too become one line and exit 2."""
    try:
        code = app(standalone_mode=False)
    except (KeyboardInterrupt, typer.Abort):
        code = _error_line("interrupted", 130)
    except typer.exceptions.TyperException as exc:  # usage errors: bad option, missing argument
        code = _error_line(_click_message(exc), getattr(exc, "exit_code", USAGE_EXIT))
    except AvsimError as exc:  # raised outside a command body (should not happen; be safe)
        code = _error_line(str(exc))
    sys.exit(code if isinstance(code, int) else 0)


@contextlib.contextmanager
def user_errors(interrupted: str = "interrupted") -> Iterator[None]:
    """Turn errors in user input (AvsimError, unreadable files, bad YAML) into exit 2."""
    try:
        yield
    except KeyboardInterrupt:
        _fail(interrupted, 130)
    except AvsimError as exc:
        _fail(str(exc))
    except yaml.YAMLError as exc:
        _fail(f"malformed YAML: {exc}")
    except OSError as exc:
        _fail(_os_message(exc))


@app.command()
def run(
    scenario: ScenarioArg,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Result folder [default: results/<name>/].")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(min=0, help="Seed of the first repeat [default: the scenario's].")
    ] = None,
    repeats: Annotated[
        int | None, typer.Option(min=1, help="Runs, with seeds seed, seed+1, ...")
    ] = None,
    set_: SetOption = None,
    force: ForceOption = False,
) -> None:
    """Run a scenario and write its result folder."""
    from sim.results import check_folder, write_result
    from sim.scenario import load_scenario, parse_set_options

    with user_errors():
        sc = load_scenario(scenario, parse_set_options(set_))
        folder = out if out is not None else Path("results") / sc.name
        check_folder(folder, force)
        results = _run_repeats(sc, sc.seed if seed is None else seed, repeats or sc.repeats)
        write_result(results, folder, force=force)
    _print_runs([r.summary for r in results])
    stdout.print(
        f"wrote {folder}/ ({', '.join(sorted(p.name for p in folder.iterdir()))})", soft_wrap=True
    )


@app.command()
def info(scenario: ScenarioArg, set_: SetOption = None) -> None:
    """Show what a scenario resolves to: peers, protocol and its derived constants
    (e.g. A²CiD²'s chi1, chi2, eta, alpha_tilde), without running it."""
    from sim.engine import Run
    from sim.scenario import load_scenario, parse_set_options

    with user_errors():
        sc = load_scenario(scenario, parse_set_options(set_))
        built = Run(sc, sc.seed)
    peers = built.peers
    rows: dict[str, Any] = {
        "clock": sc.clock,
        "peers": sc.peers.count,
        "upload median (bytes/s)": float(peers["upload_bytes_per_s"].median()),
        "latency median (s)": float(peers["latency_s"].median()),
        "protocol": sc.protocol.name,
        **built.protocol.describe(),
    }
    for key, value in rows.items():
        stdout.print(f"{key:<28} {_cell(value)}", soft_wrap=True)


@app.command()
def validate(scenario: ScenarioArg, set_: SetOption = None) -> None:
    """Check a scenario or a sweep file: print "ok", or one line saying what is wrong (exit 2).

    A sweep file (one with ``cases``) is checked by expanding every run it describes.
    """
    from sim.scenario import load_scenario, parse_set_options
    from sim.scenario.loader import read_yaml

    with user_errors():
        data = read_yaml(scenario)
        if isinstance(data, dict) and "cases" in data:
            from sim.sweeps import load_sweep
            from sim.sweeps.plan import expand

            if set_:
                raise ScenarioError("--set", set_, "no --set with a sweep file (edit its cases)")
            runs = expand(load_sweep(scenario))
            typer.echo(f"ok (sweep of {len(runs)} runs)")
            return
        load_scenario(scenario, parse_set_options(set_))
    typer.echo("ok")


@app.command()
def sweep(
    sweep_file: Annotated[Path, typer.Argument(metavar="SWEEP", help="Sweep YAML file.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Sweep folder [default: results/<name>/].")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Worker processes [default: one per CPU].")
    ] = None,
    scheduler: Annotated[
        str | None, typer.Option(help="Dask scheduler address, or 'local' for a LocalCluster.")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Skip the runs a partial sweep already did.")
    ] = False,
    keep_runs: Annotated[
        bool, typer.Option("--keep-runs", help="Also keep one result folder per run.")
    ] = False,
    force: ForceOption = False,
) -> None:
    """Run a sweep (cases x grid x repeats) and tabulate it."""
    from sim.sweeps import load_sweep
    from sim.sweeps import sweep as run_sweep

    with user_errors("interrupted; run it again with --resume to continue"):
        spec = load_sweep(sweep_file)
        with DelayedProgress(f"sweep {spec.spec.name}", 1) as bar:
            result = run_sweep(spec, out, workers, scheduler, resume, keep_runs, force, bar.count)
    _print_table(*result.table, title=spec.spec.name)
    files = sorted(p.name for p in result.out_dir.iterdir())
    stdout.print(f"wrote {result.out_dir}/ ({', '.join(files)})", soft_wrap=True)


@app.command("list")
def list_protocols() -> None:
    """List the protocols, their descriptions and their parameters with defaults."""
    from protocols import REGISTRY

    for name, protocol in REGISTRY.items():
        typer.echo(f"{name}: {_first_line(protocol.description)}")
        for line in _param_lines(protocol.Params):
            typer.echo(f"    {line}")


@app.command()
def schema() -> None:
    """Print the JSON Schema of the scenario format (for editors)."""
    from sim.scenario import json_schema

    typer.echo(json.dumps(json_schema(), indent=2))


@app.command()
def plot(
    dirs: Annotated[list[Path], typer.Argument(metavar="DIR...", help="Result folders.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="One figure comparing all DIRs.")
    ] = None,
) -> None:
    """Draw convergence figures: each DIR's convergence.png, or one --out comparing them."""
    from sim.plots import plot_dirs

    with user_errors():
        written = plot_dirs(dirs, out)
    for path in written:
        typer.echo(f"wrote {path}")


class DelayedProgress:
    """A rich progress bar on stderr that appears only after ``delay_s`` and on a terminal."""

    def __init__(self, description: str, total: float, delay_s: float = PROGRESS_DELAY_S) -> None:
        self.description, self.total, self.delay_s = description, total, delay_s
        self.started = time.perf_counter()
        self.bar: Progress | None = None
        self.task: Any = None

    def __enter__(self) -> DelayedProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def update(self, completed: float, offset: float = 0.0) -> None:
        """Show ``offset + completed`` out of ``total`` (starting the bar when it is due)."""
        completed += offset
        if self.bar is None and self._due():
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
                                TimeElapsedColumn(), console=stderr, transient=True)  # fmt: skip
            self.task = self.bar.add_task(self.description, total=self.total)
            self.bar.start()
        if self.bar is not None:
            self.bar.update(self.task, completed=completed)

    def count(self, done: int, total: int) -> None:
        """Sweep-style progress: ``done`` of ``total`` runs."""
        self.total = total
        if self.bar is not None:
            self.bar.update(self.task, total=total)
        self.update(done)

    def _due(self) -> bool:
        return stderr.is_terminal and time.perf_counter() - self.started >= self.delay_s


def _run_repeats(sc: Any, first_seed: int, repeats: int) -> list[Any]:
    from sim import run as run_scenario

    results = []
    with DelayedProgress(f"{sc.name}", repeats) as bar:
        for k in range(repeats):
            progress = functools.partial(bar.update, offset=k)
            results.append(run_scenario(sc, seed=first_seed + k, progress=progress))
            bar.update(1.0, offset=k)
    return results


def _print_runs(summaries: Sequence[dict[str, Any]]) -> None:
    """Fields as rows; a column per seed (up to 4 runs) or min/max, and the mean."""
    import pandas as pd

    from sim.sweeps.table import mean_cell

    extra = [k for k in summaries[0] if k.startswith(("rounds_to_", "time_to_"))]
    fields = list(dict.fromkeys([*SUMMARY_COLUMNS[1:], *extra]))
    few = len(summaries) <= MAX_SEED_COLUMNS
    headers = [""] + ([f"seed {s['seed']}" for s in summaries] if few else ["min", "max"])
    headers += ["mean"] if len(summaries) > 1 else []
    rows = []
    for field in fields:
        values = pd.Series([s.get(field) for s in summaries], dtype=object)
        cells = [_cell(v) for v in values] if few else _min_max(values)
        rows.append([field, *cells, *([mean_cell(values)] if len(summaries) > 1 else [])])
    _print_table(headers, rows)


def _min_max(values: Any) -> list[str]:
    import pandas as pd

    present = pd.to_numeric(values, errors="coerce").dropna()
    return [_cell(present.min()), _cell(present.max())] if len(present) else ["—", "—"]


def _print_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None
) -> None:
    table = Table(title=title)
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*row)
    stdout.print(table)


def _cell(value: Any) -> str:
    from sim.sweeps.table import format_number

    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return format_number(float(value))


def _param_lines(params: Any) -> list[str]:
    lines = []
    for name, field in params.model_fields.items():
        if name == "name":
            continue
        default = (
            "required"
            if field.is_required()
            else repr(field.get_default(call_default_factory=True))
        )
        kind = _type_name(field.annotation)
        about = f"  {field.description}" if field.description else ""
        lines.append(f"{name}: {kind} = {default}{about}")
    return lines


def _type_name(annotation: Any) -> str:
    """``int``, ``idealized|partial|abort`` for a Literal, ``str | None``."""
    origin = get_origin(annotation)
    if origin is Literal:
        return "|".join(str(arg) for arg in get_args(annotation))
    if origin is Annotated:
        return _type_name(get_args(annotation)[0])
    if origin in (Union, UnionType):
        return " | ".join(_type_name(arg) for arg in get_args(annotation))
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def _fail(message: str, code: int = USAGE_EXIT) -> None:
    """Inside a command: print one line on stderr and exit with ``code``."""
    raise typer.Exit(_error_line(message, code))


def _error_line(message: str, code: int = USAGE_EXIT) -> int:
    """Write ``error: <message>`` as one line on stderr; return ``code``."""
    line = " ".join(str(message).split())
    sys.stderr.write(f"error: {line}\n")
    sys.stderr.flush()
    return code


def _click_message(exc: Exception) -> str:
    format_message = getattr(exc, "format_message", None)
    return format_message() if callable(format_message) else str(exc)


def _os_message(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"
