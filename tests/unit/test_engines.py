"""The engines: one per schedule, picked by clock and protocol class, each building only
what its schedule uses."""

from __future__ import annotations

from typing import Any

import pytest

import protocols
import sim
import sim.engine
import sim.engine.base
import sim.engine.schedules
from protocols.base import BarrierProtocol, ContinuousProtocol
from sim.core.errors import ScenarioError
from sim.engine.schedules import (
    BarrierEngine,
    ContinuousEngine,
    RoundsEngine,
    engine_class,
    engine_for,
)


def scenario(name: str, clock: str, **overrides: Any) -> Any:
    data = {
        "name": "engines",
        "clock": clock,
        "peers": {"count": 8, "upload": "100 Mbit/s", "download": "100 Mbit/s"},
        "vector": {"dim": 4},
        "protocol": {"name": name},
        "churn": {"model": "bernoulli", "p": 0.1},
        "stop": {"max_rounds": 3, "target_var": 0},
    }
    return sim.scenario_from_mapping(data, overrides)


@pytest.mark.parametrize("name", sorted(protocols.REGISTRY))
def test_the_engine_follows_the_clock_and_the_protocol_class(name):
    cls = protocols.get(name)
    assert engine_class(scenario(name, "rounds")) is RoundsEngine
    if issubclass(cls, BarrierProtocol):
        assert engine_class(scenario(name, "network")) is BarrierEngine
    elif issubclass(cls, ContinuousProtocol):
        assert engine_class(scenario(name, "network")) is ContinuousEngine
    else:
        with pytest.raises(ScenarioError, match=r"protocol\.name: expected a protocol that runs"):
            engine_class(scenario(name, "network"))


def test_each_engine_builds_only_what_its_schedule_uses():
    rounds = engine_for(scenario("gossip", "rounds"), 0)
    assert hasattr(rounds, "churn")
    assert hasattr(rounds, "rejoin")
    assert not hasattr(rounds, "churn_schedule")
    for name in ("gossip", "pairwise_gossip"):
        network = engine_for(scenario(name, "network"), 0)
        assert not hasattr(network, "churn")  # no rounds-clock presence masks
        assert not hasattr(network, "rejoin")  # the network rejoin is built with the clock
        assert hasattr(network, "churn_schedule")


@pytest.mark.parametrize(("name", "clock"), [("gossip", "rounds"), ("gossip", "network"),
                                             ("push_sum", "network")])  # fmt: skip
def test_the_churn_schedule_is_built_once_per_run(monkeypatch, name, clock):
    built = []
    build = sim.engine.base.build_schedule

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return build(*args, **kwargs)

    monkeypatch.setattr(sim.engine.base, "build_schedule", counting)
    result = sim.engine.run(scenario(name, clock))
    assert result.summary["rounds"] == 3
    assert len(built) == 1


def test_a_new_schedule_plugs_in_as_another_engine(monkeypatch):
    """A subclass of an engine that serves one protocol, tried first, runs it."""
    seen = []

    class Traced(RoundsEngine):
        @classmethod
        def serves(cls, clock: str, protocol_type: type) -> bool:
            return clock == "rounds" and protocol_type is protocols.get("sgp")

        def report(self, progress: Any) -> None:
            seen.append(self.rounds)
            super().report(progress)

    monkeypatch.setattr(sim.engine.schedules, "ENGINES", (Traced, *sim.engine.schedules.ENGINES))
    assert sim.engine.run(scenario("sgp", "rounds")).summary["rounds"] == 3
    assert seen == [1, 2, 3]
    sim.engine.run(scenario("gossip", "rounds"))
    assert seen == [1, 2, 3]
