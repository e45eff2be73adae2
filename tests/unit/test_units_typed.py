"""Units people type (issue 10): Mbps, hours, rates like 3/min, percentages; errors name
the innermost key; negative, NaN and infinite values are refused where they make no sense."""

from __future__ import annotations

import math

import pytest

from sim.core import units
from sim.core.errors import ScenarioError
from sim.model.scenario import scenario_from_mapping

BASE = {"name": "t", "peers": {"count": 8}, "protocol": {"name": "random_groups"}}


def make(**overrides):
    return scenario_from_mapping(BASE, overrides)


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [
        ("20 Mbps", 2.5e6), ("20Mbps", 2.5e6), ("1 Gbps", 125e6), ("800 kbps", 1e5),
        ("8 Kbps", 1e3), ("5 bps", 0.625), ("12.5 MBps", 12.5e6), ("3 Bps", 3.0),
        ("100 Mbit/sec", 12.5e6), ("100 Mb/s", 12.5e6), ("1 Mibps", 1024**2 / 8),
    ],
)  # fmt: skip
def test_bandwidth_spellings(text, bytes_per_s):
    assert units.parse_bandwidth(text) == pytest.approx(bytes_per_s)


@pytest.mark.parametrize("bad", ["100 mbps", "100 Mbit", "100 M bit/s", "100 Mbps/s", "30%"])
def test_bandwidth_misspellings_are_refused(bad):
    with pytest.raises(ValueError, match="Mbps"):
        units.parse_bandwidth(bad)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1 hour", 3600.0), ("2 hours", 7200.0), ("1 hr", 3600.0), ("1h", 3600.0),
        ("3 minutes", 180.0), ("1 minute", 60.0), ("5 mins", 300.0), ("2 seconds", 2.0),
        ("1 second", 1.0), ("3 secs", 3.0), ("1 day", 86400.0), ("250 milliseconds", 0.25),
        ("10 \u00b5s", 1e-5),
    ],
)  # fmt: skip
def test_duration_spellings(text, seconds):
    assert units.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "per_second"),
    [("3/min", 0.05), ("0.5/s", 0.5), ("2/h", 2 / 3600), ("10 / hour", 10 / 3600),
     ("6/minute", 0.1), ("0.5 Hz", 0.5), ("4", 4.0), (2, 2.0)],
)  # fmt: skip
def test_rate_spellings(text, per_second):
    assert units.parse_rate(text) == pytest.approx(per_second)


@pytest.mark.parametrize("bad", ["3/", "3/fortnight", "3 per min", "fast", "3 min", None, True])
def test_rate_misspellings_are_refused(bad):
    with pytest.raises(ValueError, match="3/min"):
        units.parse_rate(bad)


@pytest.mark.parametrize(("text", "value"), [("30%", 0.3), ("30 %", 0.3), ("0.25", 0.25), (1, 1.0)])
def test_fraction_spellings(text, value):
    assert units.parse_fraction(text) == pytest.approx(value)


def test_units_people_type_are_accepted_in_their_fields():
    sc = make(**{
        "peers.classes": [
            {"fraction": "30%", "upload": "20 Mbps"},
            {"fraction": "70%", "upload": {"dist": "lognormal", "median": "1 Gbps", "sigma": 1}},
        ],
        "churn": {"model": "waves", "rate": "3/min", "fraction": "10%", "duration": "1 hour",
                  "joins": {"count": 2, "rate": "1/h"}},
        "stop.max_time": "2 hours",
    })  # fmt: skip
    assert [c.fraction for c in sc.peers.classes] == pytest.approx([0.3, 0.7])
    assert sc.peers.classes[0].upload.get("value") == pytest.approx(2.5e6)
    assert sc.peers.classes[1].upload.get("median") == pytest.approx(125e6)
    assert (sc.churn.rate, sc.churn.fraction, sc.churn.duration) == pytest.approx((0.05, 0.1, 3600))
    assert sc.churn.joins.rate == pytest.approx(1 / 3600)
    assert sc.stop.max_time == 7200.0
    bernoulli = make(churn={"model": "bernoulli", "p": "5%", "period": "1 minute"})
    assert (bernoulli.churn.p, bernoulli.churn.period) == pytest.approx((0.05, 60.0))


def test_protocol_rates_and_probabilities_take_units():
    sc = make(protocol={"name": "pairwise_gossip", "rate": "30/min", "topology": "erdos_renyi",
                        "p": "50%"})  # fmt: skip
    assert (sc.protocol.rate, sc.protocol.p) == pytest.approx((0.5, 0.5))
    assert make(protocol={"name": "push_sum", "rate": "2 Hz"}).protocol.rate == 2.0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"peers.upload": {"dist": "lognormal", "median": "20 Mbpx", "sigma": 1}},
         "peers.upload.median: expected a bandwidth like"),
        ({"peers.upload": {"dist": "lognormal", "mediam": "20 Mbps", "sigma": 1}},
         "peers.upload.mediam: unknown key; known keys here: dist, median, sigma"),
        ({"peers.upload": {"dist": "lognormal", "median": "20 Mbps"}},
         "peers.upload.sigma: expected a value (this key is required)"),
        ({"peers.upload": {"median": "20 Mbps"}},
         "peers.upload.dist: expected one of: lognormal, uniform, choice, got None"),
        ({"peers.upload": {"dist": ["lognormal"]}}, "peers.upload.dist: expected one of"),
        ({"peers.latency": {"dist": "lognormal", "median": "5 ms", "sigma": math.inf}},
         "peers.latency.sigma: expected a finite number >= 0 and <= 10, got inf"),
        ({"peers.upload": {"dist": "uniform", "low": 0, "high": "inf"}},
         "peers.upload.high: expected a finite value"),
        ({"peers.latency": {"dist": "choice", "values": ["1 ms", "soon"]}},
         "peers.latency.values.1: expected a duration like"),
        ({"peers.latency": {"dist": "choice", "values": [1, 2], "weights": [1, math.nan]}},
         "peers.latency.weights.1: expected a finite number >= 0, got nan"),
        ({"peers.latency": {"dist": "choice", "values": [1, 2], "weights": [1e308, 1e308]}},
         "peers.latency.weights: expected weights with a positive, finite sum"),
        ({"peers.classes": [{"fraction": 1, "upload": {"dist": "uniform", "low": 1, "high": "x"}}]},
         "peers.classes.0.upload.high: expected a bandwidth"),
        ({"peers.compute": math.inf}, "peers.compute: expected a duration like '20 ms'"),
    ],
)  # fmt: skip
def test_errors_name_the_innermost_key(overrides, message):
    with pytest.raises(ScenarioError) as info:
        make(**overrides)
    assert str(info.value).startswith(message), str(info.value)


def waves(**fields):
    return {"churn": {"model": "waves", "rate": 1, "fraction": 0.1, "duration": 1, **fields}}


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (waves(rate="-3/min"), "churn.rate"),
        (waves(rate="1e30/s"), "churn.rate"),
        (waves(fraction="150%"), "churn.fraction"),
        (waves(fraction="0%"), "churn.fraction"),
        ({"churn": {"model": "bernoulli", "p": "-5%"}}, "churn.p"),
        ({"churn": {"model": "bernoulli", "p": math.nan}}, "churn.p"),
        ({"churn": {"model": "exponential", "mtbf": -1, "mttr": 1}}, "churn.mtbf"),
        ({"churn": {"model": "exponential", "mtbf": 1, "mttr": 5e-324}}, "churn.mttr"),
        ({"churn": {"model": "bernoulli", "p": 0.5, "period": "0.1 us"}}, "churn.period"),
        ({"protocol": {"name": "moshpit", "part_bytes": 1e30}}, "protocol.part_bytes"),
        ({"churn": {"model": "none", "joins": {"count": 1, "rate": math.inf}}}, "churn.joins.rate"),
        ({"churn": {"model": "none", "joins": {"count": 1, "rate": "0/min"}}}, "churn.joins.rate"),
        ({"peers.classes": [{"fraction": "100.5%"}]}, "peers.classes.0.fraction"),
        ({"peers.classes": [{"fraction": math.nan}]}, "peers.classes.0.fraction"),
        ({"protocol": {"name": "a2cid2", "eta": math.inf}}, "protocol.eta"),
        ({"protocol": {"name": "a2cid2", "alpha_tilde": math.nan}}, "protocol.alpha_tilde"),
        ({"protocol": {"name": "a2cid2", "rate": math.inf}}, "protocol.rate"),
        ({"protocol": {"name": "pairwise_gossip", "rate": 1e30}}, "protocol.rate"),
        ({"protocol": {"name": "push_sum", "rate": "-1/s"}}, "protocol.rate"),
        ({"protocol": {"name": "gossip", "topology": "erdos_renyi", "p": "0%"}}, "protocol.p"),
        ({"protocol": {"name": "moshpit", "group_size": 1, "grid_dims": 99}}, "protocol.grid_dims"),
        ({"protocol": {"name": "moshpit", "group_size": math.nan}}, "protocol.group_size"),
        ({"protocol": {"name": "moshpit", "matchmaking_time": -1}}, "protocol.matchmaking_time"),
    ],
)  # fmt: skip
def test_values_that_make_no_sense_are_refused_naming_the_key(overrides, key):
    with pytest.raises(ScenarioError) as info:
        make(**overrides)
    assert str(info.value).startswith(f"{key}: "), str(info.value)
    assert "\n" not in str(info.value)


def test_the_json_schema_accepts_unit_strings_for_rates_and_fractions():
    from sim.model.scenario import json_schema

    defs = json_schema()["$defs"]
    assert {"type": "string"} in defs["WavesChurn"]["properties"]["rate"]["anyOf"]
    assert {"type": "string"} in defs["PeerClass"]["properties"]["fraction"]["anyOf"]
    upload = defs["Peers"]["properties"]["upload"]
    assert upload["default"] == 12.5e6
    lognormal = next(
        a for a in upload["anyOf"] if a.get("properties", {}).get("dist") == {"const": "lognormal"}
    )
    assert lognormal["required"] == ["dist", "median", "sigma"]
