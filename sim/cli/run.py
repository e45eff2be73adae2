"""``avsim run``: run a scenario (with repeats) and write its result folder."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from sim.cli.app import (
    DelayedProgress,
    ForceOption,
    ScenarioArg,
    SetOption,
    app,
    cell,
    print_table,
    stdout,
    user_errors,
)

MAX_SEED_COLUMNS = 4
SUMMARY_COLUMNS = (
    "seed", "rounds", "sim_time_s", "final_var", "rounds_to_target", "time_to_target_s",
    "bytes_sent", "wall_time_s",
)  # fmt: skip


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
        cells = [cell(v) for v in values] if few else _min_max(values)
        rows.append([field, *cells, *([mean_cell(values)] if len(summaries) > 1 else [])])
    print_table(headers, rows)


def _min_max(values: Any) -> list[str]:
    import pandas as pd

    present = pd.to_numeric(values, errors="coerce").dropna()
    return [cell(present.min()), cell(present.max())] if len(present) else ["—", "—"]
