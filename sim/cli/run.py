"""``avsim run``: run a scenario (with repeats) and write its result folder."""

from __future__ import annotations

import functools
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from sim.cli.app import (
    DelayedProgress,
    ForceOption,
    MaxMemoryOption,
    ScenarioArg,
    SetOption,
    app,
    cell,
    doing,
    fail,
    print_table,
    stdout,
    user_errors,
)
from sim.cli.signals import Interrupted, Stop, engine_supports_interrupt, interruptible

MAX_SEED_COLUMNS = 4
SUMMARY_COLUMNS = (
    "seed", "rounds", "sim_time_s", "final_var", "rounds_to_target", "time_to_target_s",
    "bytes_sent", "wall_time_s", "stop_reason",
)  # fmt: skip
#: Fields of a ``schedule: async`` run's summary shown after the others, where present.
ASYNC_COLUMNS = ("steps_median", "group_size_mean")
#: Summary fields that are words, not numbers (shown as they are, counted over runs).
TEXT_COLUMNS = ("stop_reason",)
#: The peers ``--trace`` follows unless ``--trace-peers`` says otherwise.
DEFAULT_TRACE_PEERS = "0-63"
#: ``--trace-max-events`` shown in ``--help`` (:data:`sim.engine.trace.MAX_EVENTS`).
DEFAULT_TRACE_MAX_EVENTS = "500000"


@app.command()
def run(
    scenario: ScenarioArg,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Result folder.", show_default="results/<name>/"),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            min=0, max=2**53, help="Seed of the first repeat.", show_default="the scenario's seed"
        ),
    ] = None,
    repeats: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=10_000,
            help="Runs (seeds seed, seed+1, …).",
            show_default="the scenario's repeats",
        ),
    ] = None,
    set_: SetOption = None,
    force: ForceOption = False,
    max_memory: MaxMemoryOption = None,
    trace: Annotated[
        bool,
        typer.Option(
            "--trace",
            help="Also write trace.json: each peer's timeline as Chrome trace events "
            "(open it in https://ui.perfetto.dev). Network clock only.",
        ),
    ] = False,
    trace_peers: Annotated[
        str | None,
        typer.Option(
            help="With --trace: the peers to follow, indices and ranges like 0-15,32.",
            show_default=DEFAULT_TRACE_PEERS,
        ),
    ] = None,
    trace_max_events: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="With --trace: events per run before the trace stops.",
            show_default=DEFAULT_TRACE_MAX_EVENTS,
        ),
    ] = None,
) -> None:
    """Run a scenario and write its result folder.

    SIGINT (Ctrl-C) or SIGTERM stops the run in progress at its next measurement and
    writes a complete folder of the runs so far (the last with stop_reason interrupted);
    a second signal aborts at once and writes nothing.
    """
    from sim.engine.resources import memory_limit
    from sim.model.scenario import load_scenario, parse_set_options
    from sim.output.run_folder import check_folder, write_result

    with (
        user_errors("interrupted; no result folder written"),
        memory_limit(max_memory),
        interruptible(engine_supports_interrupt()) as stop,
    ):
        sc = load_scenario(scenario, parse_set_options(set_))
        options = _trace_options(sc, trace, trace_peers, trace_max_events)
        folder = out if out is not None else Path("results") / sc.name
        check_folder(folder, force)
        total = repeats or sc.repeats
        results = _run_repeats(sc, sc.seed if seed is None else seed, total, stop, options)
        if not results:
            raise Interrupted(stop.signum or signal.SIGINT)
        with doing(f"writing {folder}/"):
            write_result(results, folder, force=force)
    _print_runs([r.summary for r in results])
    _warn_nan([r.summary for r in results])
    _warn_truncated(results, options)
    files = ", ".join(sorted(p.name for p in folder.iterdir()))
    if stop.requested:
        what = f"{len(results)} of {total} runs"
        if results[-1].summary.get("stop_reason") == "interrupted":
            what += ", the last stopped early (stop_reason interrupted)"
        fail(f"interrupted by {stop.name}; wrote {folder}/ with {what}", stop.exit_code)
    stdout.print(f"wrote {folder}/ ({files})", soft_wrap=True)


def _trace_options(sc: Any, trace: bool, peers: str | None, max_events: int | None) -> Any:
    """The run's :class:`TraceOptions` from ``--trace``, ``--trace-peers`` and
    ``--trace-max-events``, or None without ``--trace``; one ``error:`` line when they do
    not fit the scenario, a ``warning:`` when the default leaves peers out."""
    from sim.engine.trace import MAX_EVENTS, TraceOptions, parse_peers

    if not trace:
        extra = "--trace-peers" if peers is not None else None
        extra = "--trace-max-events" if max_events is not None else extra
        if extra is not None:
            fail(f"{extra}: expected --trace as well (it shapes the trace), got no --trace")
        return None
    if sc.clock != "network":
        fail(f"--trace: expected a scenario with clock: network, got clock: {sc.clock}")
    n_peers = sc.peers.count + sc.churn.joining
    followed = parse_peers(DEFAULT_TRACE_PEERS if peers is None else peers)
    if peers is not None and max(followed) >= n_peers:
        fail(
            f"--trace-peers: expected peer indices below {n_peers} (the run's peers), "
            f"got {max(followed)}"
        )
    if peers is None and n_peers > len(followed):
        warn(f"--trace follows peers {DEFAULT_TRACE_PEERS} of {n_peers}; "
             "choose others with --trace-peers")  # fmt: skip
    return TraceOptions(followed, MAX_EVENTS if max_events is None else max_events)


def _warn_truncated(results: Sequence[Any], options: Any) -> None:
    """One ``warning:`` line per run whose trace hit ``--trace-max-events``."""
    max_events = None if options is None else options.max_events
    for result in results:
        at_s = result.trace_truncated_at_s
        if at_s is not None:
            warn(
                f"trace.json stops at t = {at_s:.6g} s (seed {result.summary['seed']}): it "
                f"holds --trace-max-events {max_events} events; follow fewer peers with "
                "--trace-peers"
            )


def warn(message: str) -> None:
    """One ``warning:`` line on stderr."""
    import sys

    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


def _run_repeats(
    sc: Any, first_seed: int, repeats: int, stop: Stop, trace: Any = None
) -> list[Any]:
    """The runs, in seed order; after a first signal the run in progress ends early
    and no other starts."""
    from sim import run as run_scenario

    options: dict[str, Any] = {"interrupt": stop.event} if stop.graceful else {}
    if trace is not None:
        options["trace"] = trace
    results = []
    with DelayedProgress(f"{sc.name}", repeats) as bar:
        for k in range(repeats):
            if stop.requested:
                break
            progress = functools.partial(bar.update, offset=k)
            results.append(run_scenario(sc, seed=first_seed + k, progress=progress, **options))
            bar.update(1.0, offset=k)
    return results


def _print_runs(summaries: Sequence[dict[str, Any]]) -> None:
    """Fields as rows; a column per seed (up to 4 runs) or min/max, and the mean."""
    import pandas as pd

    from sim.output.sweeps.table import is_target, mean_cell

    extra = [k for k in summaries[0] if k.startswith(("rounds_to_", "time_to_"))]
    extra += [k for k in ASYNC_COLUMNS if any(k in s for s in summaries)]
    fields = list(dict.fromkeys([*SUMMARY_COLUMNS[1:], *extra]))
    few = len(summaries) <= MAX_SEED_COLUMNS
    headers = [""] + ([f"seed {s['seed']}" for s in summaries] if few else ["min", "max"])
    headers += ["mean"] if len(summaries) > 1 else []
    rows = []
    for field in fields:
        values = pd.Series([s.get(field) for s in summaries], dtype=object)
        if field in TEXT_COLUMNS:
            counts = values.astype(str).value_counts()
            listing = ", ".join(f"{name} ×{k}" for name, k in counts.items())
            cells = [cell(v) for v in values] if few else ["", ""]
            rows.append([field, *cells, *([listing] if len(summaries) > 1 else [])])
            continue
        cells = [cell(v) for v in values] if few else _min_max(values)
        mean = [mean_cell(values, target=is_target(field))] if len(summaries) > 1 else []
        rows.append([field, *cells, *mean])
    print_table(headers, rows)


def _warn_nan(summaries: Sequence[dict[str, Any]]) -> None:
    """One ``warning:`` line per run stopped by a NaN or inf (stderr)."""
    import sys

    from sim.engine.summary import nan_warning

    for summary in summaries:
        text = nan_warning(summary)
        if text:
            sys.stderr.write(f"warning: {text}\n")


def _min_max(values: Any) -> list[str]:
    import pandas as pd

    present = pd.to_numeric(values, errors="coerce").dropna()
    return [cell(present.min()), cell(present.max())] if len(present) else ["—", "—"]
