"""The scenario format: defaults, units, overrides and one-line errors naming the key."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.core.errors import ScenarioError
from sim.model.peers import largest_remainder, resolve_peers
from sim.model.scenario import (
    apply_overrides,
    json_schema,
    parse_set_options,
    scenario_from_mapping,
)

BASE = {"name": "t", "protocol": {"name": "random_groups", "group_size": 4}}


def make(**overrides):
    return scenario_from_mapping(BASE, overrides)


def test_defaults_fill_every_section():
    sc = make()
    assert sc.peers.count == 64
    assert sc.clock == "rounds"
    assert sc.stop.max_rounds == 50
    assert sc.churn.model == "none"


def test_unit_strings_become_si_floats():
    sc = make(**{"peers.upload": "100 Mbit/s", "peers.latency": "20 ms"})
    assert sc.peers.upload.get("value") == pytest.approx(12.5e6)
    assert sc.peers.latency.get("value") == pytest.approx(0.02)


def test_resolved_scenario_round_trips_through_its_dump():
    sc = make(**{"peers.upload": {"dist": "lognormal", "median": "100 Mbit/s", "sigma": 0.5}})
    again = scenario_from_mapping(sc.model_dump(mode="json"))
    assert again == sc


def test_set_options_are_yaml_scalars():
    assert parse_set_options(["churn.p=0.01", "peers.count=512", "x=abc"]) == {
        "churn.p": 0.01,
        "peers.count": 512,
        "x": "abc",
    }


def test_protocol_override_with_a_new_name_replaces_its_parameters():
    data = {"protocol": {"name": "moshpit", "grid_dims": 3}}
    out = apply_overrides(data, {"protocol": {"name": "gossip"}})
    assert out["protocol"] == {"name": "gossip"}


@pytest.mark.parametrize(
    ("overrides", "key", "fragment"),
    [
        ({"peers.upload": "-3 Mbit/s"}, "peers.upload", "bandwidth"),
        ({"peers.count": 0}, "peers.count", "greater than or equal to 1"),
        ({"peers.uplaod": "1 Mbit/s"}, "peers.uplaod", "unknown key"),
        ({"protocol": {"name": "nope"}}, "protocol.name", "moshpit"),
        ({"protocol.group_size": "big"}, "protocol.group_size", "integer"),
        ({"churn": {"model": "bernoulli", "p": 1.5}}, "churn.p", "1"),
        ({"churn": {"model": "bernoulli", "mtbf": 3}}, "churn.mtbf", "unknown key"),
        (
            {"peers.latency": {"dist": "uniform", "low": "1 s", "high": "1 ms"}},
            "peers.latency",
            "low",
        ),
        ({"vector.dtype": "int8"}, "vector.dtype", "float64"),
        ({"stop.target_var": math.nan}, "stop.target_var", "greater"),
    ],
)
def test_bad_values_name_the_dotted_key(overrides, key, fragment):
    with pytest.raises(ScenarioError) as info:
        make(**overrides)
    message = str(info.value)
    assert message.startswith(f"{key}: "), message
    assert fragment in message
    assert "\n" not in message


def test_unknown_key_lists_the_known_ones():
    with pytest.raises(ScenarioError, match=r"known keys here: .*download"):
        make(**{"peers.uplaod": 1})


def test_class_fractions_must_sum_to_one():
    classes = [{"fraction": 0.5, "upload": "1 Gbit/s"}, {"fraction": 0.4}]
    with pytest.raises(ScenarioError, match=r"peers\.classes: .*sum"):
        make(**{"peers.classes": classes})


def test_classes_become_whole_counts_and_override_values():
    classes = [{"fraction": 0.25, "upload": "1 Gbit/s"}, {"fraction": 0.75, "upload": "10 Mbit/s"}]
    sc = make(**{"peers.count": 10, "peers.classes": classes})
    table = resolve_peers(sc.peers, np.random.default_rng(0))
    counts = table["class"].value_counts().sort_index().tolist()
    assert counts == [3, 7]  # 2.5 and 7.5: the tie goes to the first by stable order
    fast = table.loc[table["class"] == 0, "upload_bytes_per_s"]
    assert np.all(fast == 125e6)


def test_largest_remainder_sums_to_total():
    counts = largest_remainder([1 / 3, 1 / 3, 1 / 3], 10)
    assert counts.sum() == 10
    assert sorted(counts.tolist()) == [3, 3, 4]


def test_distributions_are_sampled_from_the_given_generator():
    sc = make(**{"peers.latency": {"dist": "uniform", "low": "10 ms", "high": "200 ms"}})
    a = resolve_peers(sc.peers, np.random.default_rng(1))
    b = resolve_peers(sc.peers, np.random.default_rng(1))
    assert a.equals(b)
    assert a["latency_s"].between(0.01, 0.2).all()
    assert a["latency_s"].nunique() > 1


@pytest.mark.parametrize(
    ("key", "value"),
    [
        # found by the input fuzzer: every draw overflowed to inf, a run went on silently
        ("peers.latency", {"dist": "lognormal", "median": 1.7976931348623157e308, "sigma": 1}),
        ("peers.upload", {"dist": "lognormal", "median": 1e300, "sigma": 10}),
    ],
)
def test_draws_that_overflow_are_refused_naming_the_key(key, value):
    sc = make(**{key: value})
    with pytest.raises(ScenarioError, match=rf"^{key}: expected a distribution whose draws"):
        resolve_peers(sc.peers, np.random.default_rng(0))
    classes = [{"fraction": 0.5}, {"fraction": 0.5, key.split(".")[1]: value}]
    sc = make(**{"peers.classes": classes})
    with pytest.raises(ScenarioError, match=rf"^peers\.classes\.1\.{key.split('.')[1]}: "):
        resolve_peers(sc.peers, np.random.default_rng(0))


def test_json_schema_lists_the_sections():
    schema = json_schema()
    assert {"peers", "churn", "protocol", "stop", "vector"} <= set(schema["properties"])
