"""Churn: processes that decide which peers are absent; protocols only react.

:mod:`~sim.model.churn.schedule` turns a ``churn`` section into a seeded schedule of state
changes; the rounds clock samples it once per round (:mod:`~sim.model.churn.rounds`), the
network clock replays it in simulated seconds (:mod:`~sim.model.churn.process`).
"""

from sim.model.churn.process import churn_process
from sim.model.churn.rounds import RoundChurn, build_round_churn
from sim.model.churn.schedule import ChurnChange, ChurnSchedule, build_schedule
from sim.model.churn.trace import Trace, TraceError, load_trace

__all__ = [
    "ChurnChange",
    "ChurnSchedule",
    "RoundChurn",
    "Trace",
    "TraceError",
    "build_round_churn",
    "build_schedule",
    "churn_process",
    "load_trace",
]
