"""The memory refusal names the key that drives the estimate: a protocol parameter when
putting it back to its default divides the estimate by ten or more (a tiny
``part_bytes``, a huge ``group_size``, a complete graph), else ``vector.dim`` or
``peers.count`` — and says which way to move it."""

from __future__ import annotations

from typing import Any

import pytest

import sim
from sim.engine.resources import (
    ResourceError,
    check_memory,
    culprit,
    memory_limit,
    memory_parts,
)

NETWORK: dict[str, Any] = {
    "name": "culprit",
    "clock": "network",
    "peers": {"count": 1024},
    "vector": {"dim": 1024},
    "protocol": {"name": "moshpit", "group_size": 16},
    "stop": {"max_time": 10.0},
}


def scenario(**changes: Any) -> Any:
    mapping = {**NETWORK, **changes}
    return sim.scenario_from_mapping(mapping)


def refusal(sc: Any, limit: str = "1 GiB") -> str:
    with memory_limit(limit), pytest.raises(ResourceError) as raised:
        check_memory(sc)
    return str(raised.value)


def test_a_tiny_part_size_is_named_and_to_be_raised():
    sc = scenario(
        vector={"dim": 2**20},
        protocol={"name": "moshpit", "group_size": 16, "part_bytes": 1},
    )
    message = refusal(sc, "8 GiB")
    assert message.startswith("protocol.part_bytes: 1 needs about ")
    assert "raise protocol.part_bytes (default 524288)" in message
    assert "lower peers.count" not in message


def test_a_huge_group_is_named_and_to_be_lowered():
    sc = scenario(peers={"count": 100_000}, protocol={"name": "moshpit", "group_size": 1024})
    message = refusal(sc, "8 GiB")
    assert message.startswith("protocol.group_size: 1024 needs about ")
    assert "lower protocol.group_size (default 8)" in message


def test_a_complete_graph_is_named():
    sc = scenario(
        clock="rounds",
        peers={"count": 20_000},
        vector={"dim": 16},
        protocol={"name": "gossip", "topology": "complete"},
        stop={"max_rounds": 3},
    )
    message = refusal(sc)
    assert message.startswith("protocol.topology: complete needs about ")
    assert "change protocol.topology (default ring)" in message


def test_long_vectors_name_the_dimension():
    sc = scenario(peers={"count": 20}, vector={"dim": 10**8})
    assert culprit(sc).key == "vector.dim"
    assert refusal(sc).startswith("vector.dim: 100000000 needs about ")


def test_many_peers_name_the_count_even_beside_a_non_default_group():
    # a group of 16 rather than 8 doubles the flows: the swarm is what is too large
    sc = scenario(peers={"count": 10**8}, vector={"dim": 16})
    found = culprit(sc)
    assert (found.key, found.value, found.advice) == (
        "peers.count",
        10**8,
        "lower peers.count",
    )
    assert refusal(sc).startswith("peers.count: 100000000 needs about ")


def test_a_run_that_fits_is_not_refused():
    with memory_limit("64 GiB"):
        assert check_memory(scenario()).nbytes > 0


def between_default_and_tiny_parts() -> tuple[Any, str, str]:
    """The tiny-parts scenario, its estimate in MiB, and a limit the default fits in and
    it does not (halfway; the run's fixed costs, e.g. the compiled network kernels when
    numba is installed, are in both). Every flow on the clock's events: with the groups
    alone (no ``Flow`` in flight) the tiny parts' planned flows alone divide the
    estimate by ten, and the parameter is named on the ratio (as part_bytes 1 is, above)."""
    events = {"groups_alone": False}
    sc = scenario(protocol={"name": "moshpit", "group_size": 16, "part_bytes": 8}, network=events)
    tiny, default = memory_parts(sc).nbytes, memory_parts(scenario(network=events)).nbytes
    assert default < tiny / 2
    return sc, f"{tiny / 2**20:.0f} MiB", f"{(tiny + default) / 2 / 2**20:.0f} MiB"


def test_a_parameter_whose_default_would_fit_is_named():
    sc, needs, limit = between_default_and_tiny_parts()
    assert culprit(sc).key == "peers.count"  # 3 × the default: not alone
    message = refusal(sc, limit)  # but the default would fit in the limit
    assert message.startswith(f"protocol.part_bytes: 8 needs about {needs}")
    assert refusal(sc, "1 MiB").startswith(f"peers.count: 1024 needs about {needs}")


def test_the_key_can_be_placed_in_a_sweep():
    sc, _needs, limit = between_default_and_tiny_parts()
    with memory_limit(limit), pytest.raises(ResourceError) as raised:
        check_memory(sc, where="cases[2].")
    assert str(raised.value).startswith("cases[2].protocol.part_bytes: 8 needs about ")
