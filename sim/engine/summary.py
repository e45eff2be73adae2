"""One run's summary (an entry of ``summary.json``'s ``runs``).

Beyond the result contract's fields, a summary says why the run stopped
(``stop_reason``: ``target``, ``max_time``, ``max_rounds``, ``nan`` or ``interrupted``),
where a NaN appeared (``nan``: ``{round, time_s, peer}``, or null), the first crossing of
every ``metrics.targets`` value on ``var`` and ``var_alive`` (and on the loss, for
``{loss: v}``; :mod:`sim.engine.observe.targets`), with a workload the final loss and
accuracy and the gradient steps (:func:`workload_fields`), and the protocol's counters.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from sim.engine.observe.targets import target_fields, target_label
from sim.engine.observe.training import training_fields
from sim.model.scenario.models import Scenario


def summarize(
    scenario: Scenario,
    seed: int,
    rounds: int,
    metrics: pd.DataFrame,
    wall_time_s: float,
    observed: dict[str, Any],
    counters: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Summary fields of the contract, then ``stop_reason``, ``nan``, the
    ``rounds_to_<t>``/``time_to_<t>_s`` fields of each extra target (and their
    ``_alive`` twins) from ``observed`` (:meth:`sim.engine.observe.observer.Observer.fields`),
    and the protocol's ``counters`` (see :func:`counter_fields`)."""
    last = metrics.iloc[-1]
    summary: dict[str, Any] = {
        "seed": seed,
        "rounds": int(rounds),
        "sim_time_s": float(last["time_s"]),
        "final_var": float(last["var"]),
        "rounds_to_target": observed["rounds_to_target"],
        "time_to_target_s": observed["time_to_target_s"],
        "bytes_sent": float(last["bytes_sent"]),
        "messages": int(last["messages"]),
        "final_mean_drift": float(last["mean_drift"]),
        "wall_time_s": wall_time_s,
        "stop_reason": observed["stop_reason"],
        "nan": observed["nan"],
    }
    for name in target_fields(scenario):
        summary[name] = observed[name]
    for name in workload_fields(scenario):
        summary[name] = observed[name]
    counters = counters or {}
    for name in counter_fields(scenario):
        summary[name] = int(counters.get(name, 0))
    return summary


def nan_warning(summary: dict[str, Any]) -> str | None:
    """One line saying where a run's NaN or inf appeared, or None for a healthy run."""
    nan = summary.get("nan")
    if not nan:
        return None
    return (
        f"seed {summary.get('seed')}: a NaN or inf appeared in the state at round "
        f"{nan['round']}, t = {nan['time_s']:g} s (peer {nan['peer']}); the run stopped there"
    )


def schedule_fields(scenario: Scenario) -> tuple[str, ...]:
    """The summary fields the scenario's schedule adds (``schedule: async`` with a group
    protocol: steps, groups, phases, matchmaking counts; see :mod:`sim.engine.steps`)."""
    import protocols
    from sim.engine.steps import SUMMARY_FIELDS

    group = issubclass(protocols.get(scenario.protocol.name), protocols.GroupProtocol)
    return SUMMARY_FIELDS if scenario.schedule == "async" and group else ()


def workload_fields(scenario: Scenario) -> tuple[str, ...]:
    """The summary fields a training workload adds (none for ``workload: none``):
    ``final_loss``, ``final_accuracy`` or ``final_excess_loss``, ``final_local_loss``
    and the gradient steps (total, per peer min, median, max)."""
    return training_fields(scenario.workload.name)


def counter_fields(scenario: Scenario) -> tuple[str, ...]:
    """The summary fields of the scenario's protocol counters (``counter_names``)."""
    import protocols

    return protocols.get(scenario.protocol.name).counter_names


__all__ = [
    "counter_fields",
    "nan_warning",
    "schedule_fields",
    "summarize",
    "target_label",
    "workload_fields",
]
