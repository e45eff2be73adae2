"""Shared links in scenarios (``network.sites``, ``network.links``): closed-form round
times on the network clock, same-site traffic off the links, one-line errors."""

from __future__ import annotations

import pytest

import sim
from sim.core.errors import ScenarioError

S_BYTES = 1024 * 8  # dim 1024, float64
UP = 12.5e6  # 100 Mbit/s
N = 16
CLASSES = [{"name": "a", "fraction": 0.5}, {"name": "b", "fraction": 0.5}]
COMPLETE = {"name": "gossip", "topology": "complete"}
CROSS = (N // 2) ** 2  # complete graph, 8 + 8 peers: 64 flows each way between the sites


def scenario(network=None, protocol=COMPLETE, rounds=3, classes=CLASSES, **overrides):
    data = {
        "name": "links",
        "clock": "network",
        "peers": {"count": N, "upload": UP, "download": UP, "latency": "10 ms"},
        "vector": {"dim": 1024},
        "protocol": protocol,
        "stop": {"max_rounds": rounds, "target_var": 0},
    }
    if classes is not None:
        data["peers"]["classes"] = classes
    if network is not None:
        data["network"] = network
    return sim.scenario_from_mapping(data, overrides)


def two_sites(capacity, latency="0 s"):
    return {
        "sites": {"a": "A", "b": "B"},
        "links": [{"a": "A", "b": "B", "capacity": capacity, "latency": latency}],
    }


def sim_time(sc):
    return sim.run(sc).summary["sim_time_s"]


def test_cross_site_flows_share_the_link_capacity():
    # C / 64 is far below every NIC share, so each cross flow runs at C / 64 from the end
    # of its latency phase (peer latencies + link latency) and all 64 end together.
    capacity, link_latency = 1e6, 0.005
    per_round = 0.020 + link_latency + CROSS * S_BYTES / capacity
    result = sim.run(scenario(two_sites("8 Mbit/s", "5 ms")))
    assert result.summary["sim_time_s"] == pytest.approx(3 * per_round, rel=1e-12)
    assert result.summary["bytes_sent"] == pytest.approx(3 * N * (N - 1) * S_BYTES)


def test_a_latency_only_link_delays_cross_site_flows_by_its_latency():
    # same-site flows end (7 S / UP ≈ 5 ms) before the cross flows leave their 20 + 50 ms
    # latency phase; then each NIC carries 8 cross flows alone
    per_round = 0.020 + 0.050 + (N // 2) * S_BYTES / UP
    result = sim.run(scenario(two_sites("inf", "50 ms")))
    assert result.summary["sim_time_s"] == pytest.approx(3 * per_round, rel=1e-12)


def test_a_path_of_two_links_adds_latencies_and_takes_the_narrowest_capacity():
    network = {
        "sites": {"a": "dc", "b": "isp"},
        "links": [
            {"a": "dc", "b": "backbone", "capacity": "10 Gbit/s", "latency": "2 ms"},
            {"a": "isp", "b": "backbone", "capacity": "8 Mbit/s", "latency": "3 ms"},
            # a direct link with more latency than the path over the backbone: unused
            {"a": "dc", "b": "isp", "capacity": "1 kbit/s", "latency": "1 s"},
        ],
    }
    per_round = 0.020 + 0.005 + CROSS * S_BYTES / 1e6
    assert sim_time(scenario(network)) == pytest.approx(3 * per_round, rel=1e-12)


def test_same_site_traffic_does_not_use_the_links():
    plain = sim_time(scenario())
    tiny = {"a": "dc", "b": "far", "capacity": "1 bit/s", "latency": "10 s"}
    same_site = {"sites": {"a": "dc", "b": "dc"}, "links": [tiny]}
    assert sim_time(scenario(same_site)) == pytest.approx(plain, rel=1e-12)
    # unmapped classes, and peers without classes, all sit at site "default"
    default = {"links": [{**tiny, "a": "default"}]}
    assert sim_time(scenario(default)) == pytest.approx(plain, rel=1e-12)
    assert sim_time(scenario(default, classes=None)) == sim_time(scenario(classes=None))


def test_an_unmapped_class_sits_at_the_default_site():
    network = {
        "sites": {"a": "A"},
        "links": [{"a": "A", "b": "default", "capacity": "8 Mbit/s"}],
    }
    assert sim_time(scenario(network)) == pytest.approx(3 * (0.020 + CROSS * S_BYTES / 1e6))


def test_links_are_ignored_on_the_rounds_clock():
    network = two_sites("8 Mbit/s", "5 ms")
    assert sim.run(scenario(network, clock="rounds")).summary["sim_time_s"] == 3


def test_sites_and_links_round_trip_in_si_units():
    sc = scenario(two_sites("8 Mbit/s", "5 ms"))
    assert sc.network.sites == {"a": "A", "b": "B"}
    link = sc.network.links[0]
    assert (link.a, link.b, link.capacity, link.latency) == ("A", "B", 1e6, 0.005)
    dumped = sc.model_dump(mode="json")
    assert sim.scenario_from_mapping(dumped) == sc


def _error(network, run=False, **kwargs):
    def build_and_run():
        sc = scenario(network, **kwargs)
        if run:
            sim.run(sc)

    with pytest.raises(ScenarioError) as info:
        build_and_run()
    message = str(info.value)
    assert "\n" not in message
    return info.value.key, message


LINK = {"a": "A", "b": "B", "capacity": "1 Gbit/s"}


@pytest.mark.parametrize(
    ("links", "key", "fragment"),
    [
        ([{**LINK, "capacity": 0}], "network.links.0.capacity", "capacity > 0"),
        ([{**LINK, "capacity": -1}], "network.links.0.capacity", ""),
        ([{**LINK, "capacity": "10 Gbit"}], "network.links.0.capacity", "bandwidth"),
        ([{**LINK, "latency": "-5 ms"}], "network.links.0.latency", ""),
        ([{**LINK, "b": "A"}], "network.links.0", "two different sites"),
        ([LINK, {**LINK, "a": "B", "b": "A"}], "network.links.1", "network.links.0"),
        ([{**LINK, "bandwidth": 1}], "network.links.0.bandwidth", "unknown key"),
        ([{"a": "A", "b": "B"}], "network.links.0.capacity", "required"),
        ({"a": "A"}, "network.links", ""),
    ],
)
def test_bad_links_name_the_dotted_key(links, key, fragment):
    _, message = _error({"links": links})
    assert message.startswith(key + ":")
    assert fragment in message


def test_a_site_of_an_unknown_class_is_refused():
    key, message = _error({"sites": {"a": "A", "c": "B"}, "links": [LINK]}, run=True)
    assert key == "network.sites.c"
    assert "class name of peers.classes (a, b)" in message


def test_a_site_without_a_path_to_the_others_is_refused():
    network = {"sites": {"a": "A", "b": "C"}, "links": [LINK]}
    key, message = _error(network, run=True)
    assert key == "network.sites.b"
    assert "joined to site 'A' by network.links, got 'C'" in message


def test_an_unmapped_class_at_an_unlinked_default_site_is_refused():
    key, message = _error({"sites": {"a": "A"}, "links": [LINK]}, run=True)
    assert key == "network.sites"
    assert "a site for class 'b'" in message


def test_sites_apart_with_no_links_at_all_are_refused():
    key, _ = _error({"sites": {"a": "A", "b": "B"}}, run=True)
    assert key == "network.sites.b"


def test_one_site_needs_no_links():
    assert sim_time(scenario({"sites": {"a": "A", "b": "A"}})) == sim_time(scenario())
