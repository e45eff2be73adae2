"""Stateful churn on the ``rounds`` clock, for every registered protocol.

A Hypothesis state machine builds a small real run (:class:`sim.engine.rounds.RoundsEngine`:
4–16 peers, drawn parameters, ``keep``/``reset``/``fetch`` rejoin), then preempts peers,
restores them and runs rounds in any order; a round applies the rejoin rule to returning
peers (:class:`sim.model.rejoin.Rejoin`) and calls the protocol, as the engine's rounds
process does. After every step the protocol's invariants in force are checked
(:class:`tests.property.test_stateful_invariants.Ledger`). The protocols come from
``protocols.REGISTRY``: a new protocol is tested here without editing this file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, reject, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import protocols
import sim
from sim.core.errors import AvsimError
from sim.engine.schedules import Engine, RoundsEngine, engine_for
from tests.property.test_stateful_invariants import Ledger, RoundRecord, arrays
from tests.strategies import stateful_scenarios

#: Runs per protocol and clock, and steps per run: ``AVSIM_STATEFUL_EXAMPLES`` and
#: ``AVSIM_STATEFUL_STEPS`` (defaults for ``make test``; ``make fuzz`` runs more, longer).
EXAMPLES = int(os.environ.get("AVSIM_STATEFUL_EXAMPLES", "15"))
STEPS = int(os.environ.get("AVSIM_STATEFUL_STEPS", "40"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

pick = st.integers(0, 2**16)


def build_run(mapping: dict, build: Callable[[Any, int], Engine] = engine_for) -> Any:
    """The engine of a drawn scenario (``build(scenario, seed)``); a configuration that
    does not build is rejected."""
    try:
        scenario = sim.scenario_from_mapping(mapping, {})
        return build(scenario, scenario.seed)
    except AvsimError:
        reject()


class RoundsMachine(RuleBasedStateMachine):
    """Peers go and come between rounds; rounds run with whoever is present."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.ledger: Ledger | None = None

    @initialize(data=st.data())
    def build(self, data: st.DataObject) -> None:
        self.run = build_run(data.draw(stateful_scenarios(self.name, "rounds")))
        assert isinstance(self.run, RoundsEngine)
        rejoin = self.run.scenario.churn.rejoin
        in_force = self.run.protocol.invariants_in_force("rounds", rejoin)
        self.present = self.run.exists.copy()
        self.t = 0
        self.records: list[RoundRecord] = []
        self.ledger = Ledger(self.run.protocol, self.run.state, in_force)

    @rule(k=pick)
    def preempt(self, k: int) -> None:
        up = np.flatnonzero(self.present)
        if up.size:
            self.present[up[k % up.size]] = False

    @rule(k=pick)
    def restore(self, k: int) -> None:
        down = np.flatnonzero(~self.present)
        if down.size:
            self.present[down[k % down.size]] = True

    @rule()
    def one_round(self) -> None:
        run, present = self.run, self.present.copy()
        assert self.ledger is not None
        self.ledger.external(lambda: run.rejoin.apply(run.state, present))
        before = arrays(run.state)
        stats = run.protocol.round(run.state, present, self.t)
        self.records.append(RoundRecord(present, before, arrays(run.state), stats))
        self.t += 1

    @precondition(lambda self: self.ledger is not None)
    @invariant()
    def invariants_hold(self) -> None:
        assert self.ledger is not None
        self.ledger.check(self.records)
        self.records.clear()


@pytest.mark.parametrize("name", sorted(protocols.REGISTRY))
def test_invariants_hold_under_any_churn_on_the_rounds_clock(name):
    run_state_machine_as_test(lambda: RoundsMachine(name), settings=SETTINGS)
