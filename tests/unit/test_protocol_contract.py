"""The protocol contract: registration by class, clocks by type, barrier rounds planned once."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import pytest

import protocols
from protocols.base import BarrierProtocol, ContinuousProtocol, Protocol, ProtocolParams
from protocols.contract import Context, Flows, RoundPlan, RoundStats, State

DOC = """toy: a protocol for the tests.

Messages: none.

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| x | unchanged | all |
"""


class ToyParams(ProtocolParams):
    name: Literal["toy"] = "toy"


def _round(self: Any, state: State, present: np.ndarray, t: int) -> RoundStats:
    return RoundStats()


@pytest.fixture
def toy_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module ``protocols.toy`` with a proper docstring; the registry is left as found."""
    monkeypatch.setitem(sys.modules, "protocols.toy", types.ModuleType("protocols.toy", DOC))
    before = dict(protocols.REGISTRY)
    yield "protocols.toy"
    protocols.REGISTRY.clear()
    protocols.REGISTRY.update(before)


def define(module: str, base: type = Protocol, **namespace: Any) -> type:
    """A protocol class defined in ``module`` (the class statement, done by hand)."""
    body = {"__module__": module, "Params": ToyParams, "description": "toy", "round": _round}
    body.update(namespace)
    return type("Toy", (base,), {k: v for k, v in body.items() if v is not None})


def test_defining_a_protocol_class_registers_it_under_its_params_name(toy_module):
    cls = define(toy_module)
    assert protocols.get("toy") is cls
    assert protocols.clocks_of(cls) == ("rounds",)


@pytest.mark.parametrize(
    ("module", "change", "message"),
    [
        ("protocols.toy", {"description": ""}, "description"),
        ("protocols.elsewhere", {}, r"defined in the module protocols\.toy"),
        ("protocols.toy", {"round": None}, "leaves abstract: round"),
    ],
)
def test_a_class_breaking_a_rule_is_refused_at_definition(
    toy_module, monkeypatch, module, change, message
):
    monkeypatch.setitem(sys.modules, "protocols.elsewhere", sys.modules[toy_module])
    with pytest.raises(TypeError, match=message):
        define(module, **change)
    assert "toy" not in protocols.REGISTRY


def test_a_module_docstring_without_the_invariants_table_is_refused(monkeypatch):
    module = types.ModuleType("protocols.toy", "toy: no table here.\n\nMessages: none.\n")
    monkeypatch.setitem(sys.modules, "protocols.toy", module)
    with pytest.raises(TypeError, match="docstring lacks"):
        define("protocols.toy")
    assert "toy" not in protocols.REGISTRY


def test_a_second_class_under_a_taken_name_is_refused():
    class GossipParams(ProtocolParams):
        name: Literal["gossip"] = "gossip"

    with pytest.raises(TypeError, match=r"already registered by protocols\.gossip\.Gossip"):
        define("protocols.gossip", Params=GossipParams)
    assert protocols.get("gossip").__name__ == "Gossip"


def test_a_params_name_that_is_not_one_literal_is_refused(toy_module):
    class Two(ProtocolParams):
        name: Literal["toy", "other"] = "toy"

    class Plain(ProtocolParams):
        name: str = "toy"

    for params in (Two, Plain):
        with pytest.raises(TypeError, match="Literal"):
            define(toy_module, Params=params)


def test_a_runnable_class_without_params_is_refused(toy_module):
    with pytest.raises(TypeError, match="sets no Params"):
        type("Loose", (Protocol,), {"__module__": toy_module, "round": _round})


def test_abstract_intermediate_classes_are_not_registered():
    from protocols._edge_clocks import EdgeClockProtocol

    assert EdgeClockProtocol not in protocols.REGISTRY.values()
    with pytest.raises(TypeError):
        BarrierProtocol(None, Context(2, 1, 8, np.random.default_rng(0)))  # type: ignore[abstract]


def test_the_registry_holds_every_protocol_module_in_sorted_order():
    assert list(protocols.REGISTRY) == sorted(protocols.REGISTRY)
    for info in pkgutil.iter_modules(protocols.__path__):
        module = importlib.import_module(f"protocols.{info.name}")
        defined = [
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, Protocol)
            and value.__module__ == module.__name__
            and "Params" in vars(value)
        ]
        assert defined == ([protocols.REGISTRY[info.name]] if defined else []), info.name


def test_the_clocks_follow_the_class():
    for cls in protocols.REGISTRY.values():
        network = issubclass(cls, (BarrierProtocol, ContinuousProtocol))
        assert protocols.clocks_of(cls) == (("rounds", "network") if network else ("rounds",))
        assert not (issubclass(cls, BarrierProtocol) and issubclass(cls, ContinuousProtocol))
    assert protocols.clocks_of(protocols.get("all_reduce")) == ("rounds",)


BARRIER = sorted(n for n, c in protocols.REGISTRY.items() if issubclass(c, BarrierProtocol))


def build(name: str, n: int = 12, seed: int = 3) -> tuple[Protocol, State]:
    cls = protocols.get(name)
    params = cls.Params()
    if hasattr(params, "group_size"):
        params = params.model_copy(update={"group_size": 4})
    protocol = cls(params, Context(n, 3, 8, np.random.default_rng(seed)))
    state = State(np.random.default_rng(seed + 1).normal(size=(n, 3)))
    protocol.init_state(state)
    return protocol, state


@pytest.mark.parametrize("name", BARRIER)
def test_a_plans_finish_never_runs_round_again(name):
    """The trap of a default that re-ran ``round()`` inside ``finish``: a second draw."""
    protocol, state = build(name)

    def forbidden(*args: Any) -> RoundStats:
        raise AssertionError("finish called round()")

    present = np.ones(12, dtype=bool)
    present[5] = False
    plan = protocol.plan(present, 0)
    protocol.round = forbidden  # type: ignore[method-assign]
    flows = plan.flows()
    assert isinstance(flows, Flows)
    assert 5 not in flows.src  # an absent peer sends nothing
    lost = np.zeros(12, dtype=bool)
    lost[7] = True
    plan.delivered = (flows.src != 7) & (flows.dst != 7)  # as the network clock fills them
    plan.timed_out = np.zeros(flows.src.size, dtype=bool)
    x = state.x.copy()
    assert isinstance(plan.finish(state, lost), RoundStats)
    np.testing.assert_array_equal(state.x[[5, 7]], x[[5, 7]])


@pytest.mark.parametrize("name", BARRIER)
def test_the_rounds_clock_builds_no_flows(name):
    protocol, state = build(name)
    assert isinstance(protocol, BarrierProtocol)
    planned = protocol.plan

    def plan(present: np.ndarray, t: int) -> RoundPlan:
        result = planned(present, t)
        result.flows = lambda: pytest.fail("the rounds clock built the flows")
        return result

    protocol.plan = plan  # type: ignore[method-assign]
    for t in range(3):
        protocol.round(state, np.ones(12, dtype=bool), t)


@pytest.mark.parametrize("name", [n for n in BARRIER if n != "moshpit"])
def test_the_default_round_is_the_plan_with_nobody_lost(name):
    """Same draws in the same order, same arithmetic, bit for bit."""
    (a, x_a), (b, x_b) = build(name), build(name)
    assert isinstance(b, BarrierProtocol)
    present = np.ones(12, dtype=bool)
    present[2] = False
    for t in range(4):
        a.round(x_a, present, t)
        b.plan(present, t).finish(x_b, np.zeros(12, dtype=bool))
    np.testing.assert_array_equal(x_a.x, x_b.x)
    assert a.ctx.rng.random() == b.ctx.rng.random()
