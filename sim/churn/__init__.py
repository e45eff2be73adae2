"""Churn: processes that decide which peers are absent; protocols only react."""

from sim.churn.rounds import RoundChurn, build_round_churn

__all__ = ["RoundChurn", "build_round_churn"]
