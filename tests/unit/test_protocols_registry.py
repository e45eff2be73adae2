"""The protocol registry: names, lookup errors, the parameter union, module docstrings."""

from __future__ import annotations

import importlib
import typing

import pytest
from pydantic import TypeAdapter, ValidationError

import protocols
from sim.core.errors import ScenarioError


def test_registry_names_are_module_names_and_params_names():
    for name, cls in protocols.REGISTRY.items():
        module = importlib.import_module(f"protocols.{name}")
        assert getattr(module, cls.__name__) is cls
        assert typing.get_args(cls.Params.model_fields["name"].annotation) == (name,)
        assert cls.description


@pytest.mark.parametrize("name", list(protocols.REGISTRY))
def test_every_protocol_module_documents_messages_and_invariants(name):
    doc = importlib.import_module(f"protocols.{name}").__doc__
    assert "Messages" in doc
    assert "Invariants" in doc
    assert "| quantity | guarantee | failure modes |" in doc


def test_unknown_names_list_the_known_ones():
    with pytest.raises(ScenarioError, match=r"protocol\.name") as info:
        protocols.get("mosh")
    assert info.value.key == "protocol.name"
    assert "moshpit" in info.value.expected
    assert "all_reduce" in info.value.expected


def test_params_union_dispatches_on_the_name():
    adapter = TypeAdapter(protocols.params_union())
    for name, cls in protocols.REGISTRY.items():
        assert type(adapter.validate_python({"name": name})) is cls.Params
    with pytest.raises(ValidationError):
        adapter.validate_python({"name": "moshpit", "group_size": 4, "colour": "red"})
    with pytest.raises(ValidationError):
        adapter.validate_python({"name": "nothing"})


def test_params_are_frozen():
    params = protocols.get("moshpit").Params()
    with pytest.raises(ValidationError):
        params.group_size = 3
