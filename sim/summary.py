"""One run's summary (an entry of ``summary.json``'s ``runs``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from sim.scenario.models import Scenario


def target_label(target: float) -> str:
    """The suffix naming a variance target in summary fields: ``1e-04``."""
    return f"{target:.0e}"


def first_below(history: list[tuple[int, float, float]], target: float | None) -> tuple:
    """(round, time_s) of the first observation with var < target, or (None, None)."""
    if not target:
        return None, None
    for rounds, time_s, var in history:
        if var < target:
            return rounds, time_s
    return None, None


def summarize(
    scenario: Scenario,
    seed: int,
    history: list[tuple[int, float, float]],
    rounds: int,
    metrics: pd.DataFrame,
    wall_time_s: float,
    counters: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Summary fields of the contract, plus ``rounds_to_<t>``/``time_to_<t>_s`` per extra
    target and the protocol's ``counters`` (see :func:`counter_fields`)."""
    last = metrics.iloc[-1]
    reached_round, reached_time = first_below(history, scenario.stop.target_var)
    summary: dict[str, Any] = {
        "seed": seed,
        "rounds": int(rounds),
        "sim_time_s": float(last["time_s"]),
        "final_var": float(last["var"]),
        "rounds_to_target": reached_round,
        "time_to_target_s": reached_time,
        "bytes_sent": float(last["bytes_sent"]),
        "messages": int(last["messages"]),
        "final_mean_drift": float(last["mean_drift"]),
        "wall_time_s": wall_time_s,
    }
    for target in scenario.metrics.targets:
        reached_round, reached_time = first_below(history, target)
        summary[f"rounds_to_{target_label(target)}"] = reached_round
        summary[f"time_to_{target_label(target)}_s"] = reached_time
    counters = counters or {}
    for name in counter_fields(scenario):
        summary[name] = int(counters.get(name, 0))
    return summary


def counter_fields(scenario: Scenario) -> tuple[str, ...]:
    """The summary fields of the scenario's protocol counters (``counter_names``)."""
    import protocols

    return protocols.get(scenario.protocol.name).counter_names
