"""The ``rounds`` clock: synchronous rounds, one per unit of simulated time, no network.

Each round reads who is present (and who exists) off the churn schedule, applies the
``churn.rejoin`` rule to returning peers, then calls the protocol's
:meth:`~protocols.base.Protocol.round` with the presence mask. Traffic is what the
protocol reports (:class:`~protocols.contract.RoundStats`). Every protocol runs here.

With a ``workload`` every present peer first takes ``local_steps`` gradient steps
(:class:`~sim.engine.training.RoundTraining`): local SGD between averaging rounds.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

import numpy as np
import pandas as pd
import simpy

from sim.core.seeding import component_rng
from sim.engine.base import Engine, Progress
from sim.engine.training import RoundTraining, returning
from sim.model.churn import RoundChurn
from sim.model.rejoin import Rejoin
from sim.model.scenario.models import Scenario


class RoundsEngine(Engine):
    """Synchronous rounds: the papers' round-based experiments.

    Builds the churn's presence masks per round (:class:`~sim.model.churn.RoundChurn`), the
    rejoin rule (:class:`~sim.model.rejoin.Rejoin`) and, with a workload, the local steps
    of each round (:class:`~sim.engine.training.RoundTraining`).
    """

    scenario_clock = "rounds"

    def __init__(
        self, scenario: Scenario, seed: int, interrupt: threading.Event | None = None
    ) -> None:
        super().__init__(scenario, seed, interrupt)
        self.churn = RoundChurn(self.schedule())
        self.rejoin = Rejoin(scenario, component_rng(seed, "rejoin"))
        self.rejoin.previous = self.exists.copy()  # joiners count as returning peers
        self.training = None
        if self.trainer is not None:
            self.training = RoundTraining(scenario, self.trainer, self.state, self.tracker)
        self._end_s: float | None = None

    def now(self) -> tuple[int, float]:
        """(round, time) of a change now: the round under way, at its start, or at its
        end for the steps ``overlap`` adds after the averaging."""
        rounds, time_s = super().now()
        return rounds, time_s if self._end_s is None else self._end_s

    def process(self, progress: Progress | None) -> Generator[simpy.Event, Any, None]:
        """One round per unit of simulated time until a stop rule fires."""
        done = self.observe(self.exists.copy(), first=True)
        while not done:
            if self.training is not None or not self.churn.steady(self.rounds):
                self._round_churn(self.churn.present(self.rounds), self.churn.exists)
            if self.training is not None:
                self.training.before_round(self.present)
            self.tracker.begin_round(float(self.rounds))
            stats = self.protocol.round(self.state, self.present, self.rounds)
            self.tracker.end_round(self.rounds + 1, float(self.rounds + 1))
            if self.training is not None:
                self._end_s = float(self.rounds + 1)  # overlap: the steps land at the end
                self.training.after_round()
                self._end_s = None
            self.bytes_sent += stats.bytes_sent
            self.messages += stats.messages
            self.rounds += 1
            yield self.env.timeout(1)
            done = self.observe(self.present)
            self.report(progress)

    def _round_churn(self, present: np.ndarray, exists: np.ndarray | None) -> None:
        """The round's presence and membership, and the rejoin of returning peers.

        Skipped (by :meth:`process`) while the churn is steady and there is no workload:
        nobody changed, so nobody returns, and only a workload's loss trail hears of a
        change that changed nobody (:attr:`~sim.engine.observe.tracker.Tracker.on_change`).
        """
        exists = self.exists if exists is None else exists
        changed = np.flatnonzero((present != self.present) | (exists != self.exists))

        def apply() -> None:
            self.exists, self.present = exists, present
            back = returning(self.rejoin.previous, present)
            self.rejoin.apply(self.state, present)
            if self.training is not None:
                self.training.returned(back)

        self.tracker.change(changed, apply)

    def tables(self) -> dict[str, pd.DataFrame]:
        """With a workload, ``training``: each peer's gradient steps."""
        return {} if self.training is None else {"training": self.training.table()}
