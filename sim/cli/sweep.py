"""``avsim sweep``: run a sweep (cases x grid x repeats) and tabulate it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sim.cli.app import DelayedProgress, ForceOption, app, print_table, stdout, user_errors


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
    print_table(*result.table, title=spec.spec.name)
    files = sorted(p.name for p in result.out_dir.iterdir())
    stdout.print(f"wrote {result.out_dir}/ ({', '.join(files)})", soft_wrap=True)
