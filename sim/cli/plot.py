"""``avsim plot``: convergence figures from result folders, sweep figures from sweep folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sim.cli.app import app, user_errors


@app.command()
def plot(
    dirs: Annotated[
        list[Path],
        typer.Argument(metavar="DIR...", help="Result folders or sweep folders."),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="One figure comparing all DIRs (or the sweep figure of one sweep folder).",
            show_default="each DIR's convergence.png or sweep.png",
        ),
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label",
            help="Legend label of a DIR, one per DIR in order. Repeatable.",
            show_default="the folder names",
        ),
    ] = None,
) -> None:
    """Draw the figures of result folders and sweep folders.

    Each result folder's convergence.png and each sweep folder's sweep.png, or with
    --out one figure comparing the result folders.
    """
    from sim.output.plots import plot_dirs

    with user_errors():
        written = plot_dirs(dirs, out, label)
    for path in written:
        typer.echo(f"wrote {path}")
