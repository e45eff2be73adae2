"""The outcome of one run: metrics table, summary, resolved scenario, peers, final state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass
class RunResult:
    """What :func:`sim.run` returns.

    Attributes
    ----------
    metrics
        One row per sample: ``seed, round, time_s, var, err_init, alive_fraction,
        bytes_sent, messages`` (+ extra columns such as ``var_alive``, ``mean_drift``).
    summary
        One run's summary (the entries of ``summary.json``'s ``runs`` list).
    scenario
        The resolved scenario as a plain mapping (all defaults filled in).
    peers
        Resolved per-peer values (``peer, upload_bytes_per_s, download_bytes_per_s,
        latency_s, compute, delay_s``; plus ``class`` when classes are used).
    state
        The final :class:`protocols.contract.State` (vectors on the array backend).
    extra_tables
        Extra tables by name (``traffic`` on the network clock).
    trace
        With ``trace=``: the run's Chrome trace events (:mod:`sim.engine.trace`),
        ``pid`` = the seed; else ``None``.
    trace_truncated_at_s
        Simulated time at which the trace hit its event cap; ``None`` when complete.
    """

    metrics: pd.DataFrame
    summary: dict[str, Any]
    scenario: dict[str, Any]
    peers: pd.DataFrame
    state: Any = None
    extra_tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    trace: list[dict[str, Any]] | None = None
    trace_truncated_at_s: float | None = None
