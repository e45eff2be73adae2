"""``avsim plot``: convergence figures from result folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sim.cli.app import app, user_errors


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
