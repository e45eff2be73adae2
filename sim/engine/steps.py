"""What ``schedule: async`` counts: every peer's steps and time per phase, every group.

A peer's loop is a sequence of phases: ``compute`` (its local work), ``matchmaking``
(finding a group) and ``allreduce`` (its group's butterfly). :class:`StepBook` keeps
the completed steps of each peer, the steps that hit ``averaging_timeout``
(``steps_failed``), the peer-seconds spent in each phase (a phase under way counts up
to now) and one row per group run. From them come the extra metrics columns
(:data:`COLUMNS`), the summary fields and the ``groups`` and ``steps`` tables.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

PHASES = ("compute", "matchmaking", "allreduce")
COMPUTE, MATCHMAKING, ALLREDUCE = range(3)
#: The metrics columns ``schedule: async`` adds after the common ones.
COLUMNS = (
    "steps_min", "steps_median", "steps_max", "compute_s", "matchmaking_s", "allreduce_s",
)  # fmt: skip
#: Members listed in the ``groups`` table up to this group size (larger: left empty).
MAX_LISTED = 64
#: The summary fields ``schedule: async`` adds (:meth:`StepBook.summary`).
SUMMARY_FIELDS = (
    "steps_min", "steps_median", "steps_max", "steps_failed", "groups_run", "group_size_mean",
    "group_sizes", "compute_s", "matchmaking_s", "allreduce_s", "matchmaking_messages",
    "matchmaking_disbands", "requests_rejected",
)  # fmt: skip
GROUP_COLUMNS = ("group", "leader", "key", "size", "assembled_s", "done_s", "averaged", "members")


class StepBook:
    """Steps, phases and groups of one async run of ``n`` peers."""

    def __init__(self, n: int) -> None:
        self.steps = np.zeros(n, dtype=np.int64)
        self.failed = np.zeros(n, dtype=np.int64)
        self.phase_s = np.zeros((len(PHASES), n))
        self.phase_of = np.full(n, -1, dtype=np.int64)  # the phase under way, -1: none
        self.since_s = np.zeros(n)  # when it started
        self.groups: list[tuple[Any, ...]] = []

    def begin(self, peer: int, phase: int, now: float) -> None:
        """``peer`` enters ``phase`` at ``now``."""
        self.phase_of[peer], self.since_s[peer] = phase, now

    def end(self, peer: int, now: float) -> tuple[int, float]:
        """``peer`` leaves its phase at ``now``; (the phase, when it started)."""
        phase, since = int(self.phase_of[peer]), float(self.since_s[peer])
        if phase >= 0:
            self.phase_s[phase, peer] += now - since
            self.phase_of[peer] = -1
        return phase, since

    def totals(self, now: float) -> np.ndarray:
        """(3, n) peer-seconds per phase, the phases under way counted up to ``now``."""
        totals = self.phase_s.copy()
        busy = np.flatnonzero(self.phase_of >= 0)
        totals[self.phase_of[busy], busy] += now - self.since_s[busy]
        return totals

    def row(self, now: float, exists: np.ndarray) -> tuple[Any, ...]:
        """The values of :data:`COLUMNS` now, over the peers that exist."""
        steps = self.steps[exists] if exists.any() else np.zeros(1, dtype=np.int64)
        phases = self.totals(now).sum(axis=1)
        return (
            int(steps.min()), float(np.median(steps)), int(steps.max()),
            *(float(v) for v in phases),
        )  # fmt: skip

    def group_done(self, group: Any, done_s: float, averaged: np.ndarray) -> None:
        """A group's all-reduce ended at ``done_s``; ``averaged`` (g,) per member."""
        members = group.members
        listed = " ".join(map(str, members.tolist())) if members.size <= MAX_LISTED else ""
        self.groups.append((
            f"{group.id[0]}:{group.id[1]}", group.leader, group.key, int(members.size),
            group.at_s, done_s, int(np.count_nonzero(averaged)), listed,
        ))  # fmt: skip

    def summary(self, now: float, exists: np.ndarray, counts: dict[str, int]) -> dict[str, Any]:
        """The summary fields: steps, failed steps, groups and their sizes, phase
        totals, and the matchmaker's ``counts``."""
        steps_min, steps_median, steps_max, *phases = self.row(now, exists)
        sizes = Counter(int(row[3]) for row in self.groups)
        run = len(self.groups)
        return {
            "steps_min": steps_min,
            "steps_median": steps_median,
            "steps_max": steps_max,
            "steps_failed": int(self.failed.sum()),
            "groups_run": run,
            "group_size_mean": sum(k * v for k, v in sizes.items()) / run if run else 0.0,
            "group_sizes": {str(k): sizes[k] for k in sorted(sizes)},
            **{f"{name}_s": value for name, value in zip(PHASES, phases, strict=True)},
            "matchmaking_messages": int(counts["messages"]),
            "matchmaking_disbands": int(counts["disbanded"]),
            "requests_rejected": int(counts["rejected"]),
        }

    def tables(self, now: float) -> dict[str, pd.DataFrame]:
        """``groups`` (one row per group run) and ``steps`` (one row per peer)."""
        totals = self.totals(now)
        steps = {"peer": np.arange(self.steps.size), "steps": self.steps,
                 "steps_failed": self.failed}  # fmt: skip
        steps.update({f"{name}_s": totals[k] for k, name in enumerate(PHASES)})
        groups = pd.DataFrame(self.groups, columns=list(GROUP_COLUMNS))
        return {"groups": groups, "steps": pd.DataFrame(steps)}
