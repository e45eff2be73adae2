"""A boolean is never read as a number (sim.core.section.StrictSection).

pydantic's lax mode reads ``true`` as 1 for ``int`` and ``float`` fields: ``peers:
{count: true}`` ran one peer, ``seed: true`` seed 1. Every section's numeric key now
refuses a boolean with one error naming the key; boolean keys still take booleans.
"""

from __future__ import annotations

from typing import Any

import pytest

import sim
from sim.core.errors import ScenarioError
from sim.core.fields import WholeBytes
from sim.core.section import StrictSection, numeric_fields

BASE: dict[str, Any] = {
    "name": "b",
    "peers": {"count": 8},
    "vector": {"dim": 4},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 3},
}


@pytest.mark.parametrize(
    ("key", "extra"),
    [
        ("seed", {}),
        ("repeats", {}),
        ("peers.count", {}),
        ("vector.dim", {}),
        ("protocol.group_size", {}),
        ("stop.max_rounds", {}),
        ("stop.target_var", {}),
        ("churn.p", {"churn": {"model": "bernoulli"}}),
        ("churn.joins.count", {"churn": {"model": "bernoulli", "p": 0.1, "joins": {"rate": 1}}}),
    ],
)
@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_for_a_number_names_the_key(key: str, extra: dict[str, Any], value: bool):
    with pytest.raises(ScenarioError) as caught:
        sim.scenario_from_mapping({**BASE, **extra}, {key: value})  # the dotted override
    assert caught.value.key == key
    assert caught.value.got is value
    assert "a number, not a boolean" in str(caught.value)


def test_boolean_keys_still_take_booleans():
    moshpit = {"name": "moshpit", "group_size": 4, "load_balance": False}
    assert sim.scenario_from_mapping({**BASE, "protocol": moshpit}).protocol.load_balance is False


def test_numeric_fields_are_the_number_typed_ones():
    class Example(StrictSection):
        a: int = 0
        b: float | None = None
        c: int | str = 0
        d: bool = False
        e: int | bool = 0
        f: str = ""
        g: WholeBytes = 8  # its own parser refuses a boolean, and says what it expects
        h: WholeBytes | None = None

    assert numeric_fields(Example) == ("a", "b", "c")
    assert Example(d=True, e=True).e is True
