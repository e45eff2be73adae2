"""Churn: processes that decide which peers are absent; protocols only react.

:mod:`~sim.churn.schedule` turns a ``churn`` section into a seeded schedule of state
changes; the rounds clock samples it once per round (:mod:`~sim.churn.rounds`), the
network clock replays it in simulated seconds (:mod:`~sim.churn.process`).
"""

from sim.churn.process import churn_process
from sim.churn.rounds import RoundChurn, build_round_churn
from sim.churn.schedule import ChurnChange, ChurnSchedule, build_schedule
from sim.churn.trace import Trace, TraceError, load_trace

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
