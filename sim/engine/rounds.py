"""The ``rounds`` clock: synchronous rounds, one per unit of simulated time, no network.

Each round reads who is present (and who exists) off the churn schedule, applies the
``churn.rejoin`` rule to returning peers, then calls the protocol's
:meth:`~protocols.base.Protocol.round` with the presence mask. Traffic is what the
protocol reports (:class:`~protocols.contract.RoundStats`). Every protocol runs here.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from sim.core.seeding import component_rng
from sim.engine.base import Engine, Progress
from sim.model.churn import RoundChurn
from sim.model.rejoin import Rejoin
from sim.model.scenario.models import Scenario


class RoundsEngine(Engine):
    """Synchronous rounds: the papers' round-based experiments.

    Builds the churn's presence masks per round (:class:`~sim.model.churn.RoundChurn`) and the
    rejoin rule (:class:`~sim.model.rejoin.Rejoin`).
    """

    scenario_clock = "rounds"

    def __init__(
        self, scenario: Scenario, seed: int, interrupt: threading.Event | None = None
    ) -> None:
        super().__init__(scenario, seed, interrupt)
        self.churn = RoundChurn(self.schedule())
        self.rejoin = Rejoin(scenario, component_rng(seed, "rejoin"))
        self.rejoin.previous = self.exists.copy()  # joiners count as returning peers

    def process(self, progress: Progress | None) -> Generator[simpy.Event, Any, None]:
        """One round per unit of simulated time until a stop rule fires."""
        done = self.observe(self.exists.copy(), first=True)
        while not done:
            self._round_churn(self.churn.present(self.rounds), self.churn.exists)
            self.tracker.begin_round(float(self.rounds))
            stats = self.protocol.round(self.state, self.present, self.rounds)
            self.tracker.end_round(self.rounds + 1, float(self.rounds + 1))
            self.bytes_sent += stats.bytes_sent
            self.messages += stats.messages
            self.rounds += 1
            yield self.env.timeout(1)
            done = self.observe(self.present)
            self.report(progress)

    def _round_churn(self, present: np.ndarray, exists: np.ndarray | None) -> None:
        """The round's presence and membership, and the rejoin of returning peers."""
        exists = self.exists if exists is None else exists
        changed = np.flatnonzero((present != self.present) | (exists != self.exists))

        def apply() -> None:
            self.exists, self.present = exists, present
            self.rejoin.apply(self.state, present)

        self.tracker.change(changed, apply)
