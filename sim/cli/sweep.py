"""``avsim sweep``: run a sweep (cases x grid x repeats) and tabulate it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from sim.cli.app import (
    DelayedProgress,
    ForceOption,
    MaxMemoryOption,
    SetOption,
    app,
    print_table,
    stdout,
    user_errors,
)
from sim.cli.signals import interruptible


@app.command()
def sweep(
    sweep_file: Annotated[Path, typer.Argument(metavar="SWEEP", help="Sweep YAML file.")],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Sweep folder.", show_default="results/<name>/"),
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Worker processes.", show_default="one per CPU")
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            help="Dask scheduler address, or 'local' for a LocalCluster.",
            show_default="none: local processes",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Skip the runs a partial sweep already did.")
    ] = False,
    keep_runs: Annotated[
        bool, typer.Option("--keep-runs", help="Also keep one result folder per run.")
    ] = False,
    set_: SetOption = None,
    repeats: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=10_000,  # sim.model.scenario.models.MAX_REPEATS (not imported: a fast --help)
            help="Runs per case and grid cell.",
            show_default="the sweep's repeats",
        ),
    ] = None,
    force: ForceOption = False,
    max_memory: MaxMemoryOption = None,
) -> None:
    """Run a sweep (cases x grid x repeats) and tabulate it.

    --set applies to every run, after its case and before its grid values; a key the grid
    sweeps is an error. --max-memory applies to every run, in every worker; a sweep whose
    largest run would not fit is refused before any run starts.
    """
    from sim.engine.resources import memory_limit
    from sim.model.scenario import parse_set_options
    from sim.output.sweeps import load_sweep
    from sim.output.sweeps import sweep as run_sweep

    interrupted = "interrupted; run it again with --resume to continue"
    with (
        user_errors(interrupted),
        memory_limit(max_memory),  # parsed here: a bad size is an error before anything
        interruptible(False, True, interrupted),  # SIGTERM as Ctrl-C
    ):
        overrides = parse_set_options(set_)
        spec = load_sweep(sweep_file)
        folder = out if out is not None else Path("results") / spec.spec.name
        with DelayedProgress(f"sweep {spec.spec.name}", 1) as bar:
            result = run_sweep(spec, folder, workers, scheduler, resume, keep_runs, force,
                               bar.count, overrides=overrides, repeats=repeats)  # fmt: skip
    if stdout.is_terminal:
        print_table(*result.table, title=spec.spec.name)
    else:  # a pipe or a file: the Markdown table, cells unwrapped
        sys.stdout.write(result.markdown)
        sys.stdout.flush()
    files = sorted(p.name for p in folder.iterdir())
    stdout.print(f"wrote {folder}/ ({', '.join(files)})", soft_wrap=True)
