"""Resource guards (sim.engine.resources, sim.engine.workload): refuse a run that cannot fit before
allocating anything, name the key that drives it, take the limit from --max-memory or
the environment, count a network-clock run's flows, describe an out-of-memory."""

from __future__ import annotations

import tracemalloc
import warnings
from typing import Any

import pytest

import protocols
import protocols.moshpit
import sim
import sim.engine.base
from sim import engine
from sim.core.errors import AvsimError
from sim.engine import resources, workload
from sim.engine.resources import ResourceError, estimate_memory, memory_limit, memory_parts
from sim.engine.workload import SlowRunWarning, estimate_events

BASE: dict[str, Any] = {
    "name": "guard",
    "peers": {"count": 16},
    "vector": {"dim": 8},
    "protocol": {"name": "moshpit", "group_size": 4},
    "stop": {"max_rounds": 3, "target_var": 0},
}


def scenario(**changes: Any) -> Any:
    mapping = {**BASE, **changes}
    return sim.scenario_from_mapping(mapping)


def test_a_huge_vector_is_refused_before_anything_is_allocated():
    huge = scenario(vector={"dim": 10**9})
    tracemalloc.start()
    try:
        with pytest.raises(ResourceError) as raised:
            engine.run(huge)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20
    message = str(raised.value)
    assert message.startswith("vector.dim: 1000000000 needs about ")
    assert "GiB of memory" in message
    assert "available" in message
    assert "--max-memory" in message
    assert "\n" not in message


def test_a_huge_population_names_peers_count():
    with pytest.raises(ResourceError, match=r"^peers\.count: 1000000000 needs about"):
        engine.run(scenario(peers={"count": 10**9}, vector={"dim": 1}))


def test_the_estimate_grows_with_every_driver():
    small = estimate_memory(scenario(vector={"dim": 4096}))
    assert estimate_memory(scenario(vector={"dim": 8192})) > small
    assert estimate_memory(scenario(peers={"count": 32}, vector={"dim": 4096})) > small
    assert estimate_memory(scenario(vector={"dim": 4096, "dtype": "float32"})) < small
    wide = scenario(protocol={"name": "gossip", "topology": "complete"}, peers={"count": 4096})
    ring = scenario(protocol={"name": "gossip", "topology": "ring"}, peers={"count": 4096})
    assert memory_parts(wide).parts["tables"] > 100 * memory_parts(ring).parts["tables"]


def test_joining_peers_count_in_the_estimate():
    joins = {"model": "none", "joins": {"count": 16, "rate": 1.0}}
    with_joins = scenario(churn=joins, vector={"dim": 4096})
    assert resources.peer_count(with_joins) == 32
    assert estimate_memory(with_joins) > estimate_memory(scenario(vector={"dim": 4096}))


def test_max_memory_overrides_the_available_memory():
    medium = scenario(vector={"dim": 2**20})  # 16 peers x 8 MiB
    with memory_limit("64 MiB"), pytest.raises(ResourceError, match="limit set by --max-memory"):
        engine.run(medium)
    small = scenario()
    with memory_limit("64 MiB"):
        assert engine.run(small).summary["rounds"] == 3
    with memory_limit("none"):
        assert resources.limit_bytes()[0] == float("inf")


def test_the_environment_sets_the_limit_for_sweep_workers(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(resources.LIMIT_ENV, "1 MiB")
    with pytest.raises(ResourceError, match=f"limit set by {resources.LIMIT_ENV}"):
        resources.check_memory(scenario(vector={"dim": 2**16}))
    with memory_limit("1 GiB"):  # the command line wins over the environment
        resources.check_memory(scenario(vector={"dim": 2**16}))


@pytest.mark.parametrize("bad", ["lots", "-3 GiB", "0"])
def test_a_bad_limit_is_one_line_naming_the_option(bad: str):
    with pytest.raises(AvsimError, match=r"^--max-memory: expected"), memory_limit(bad):
        pass


def test_barrier_rounds_count_their_flows_exactly():
    net = scenario(
        clock="network",
        peers={"count": 32},
        protocol={"name": "random_groups", "group_size": 4},
        stop={"max_rounds": 5, "target_var": 0},
    )
    events, seconds, drivers = estimate_events(net)
    messages = engine.run(net).summary["messages"]
    assert events == messages == 5 * 2 * 32 * 3
    assert seconds == pytest.approx(events * workload.FLOW_COST_S)
    assert "peers.count 32" in drivers
    assert "stop.max_rounds" in drivers


def test_continuous_time_counts_rate_times_peers_times_seconds():
    net = scenario(
        clock="network",
        peers={"count": 64},
        protocol={"name": "push_sum", "rate": 2.0},
        stop={"max_rounds": None, "max_time": 20, "target_var": 0},
    )
    events, _, drivers = estimate_events(net)
    messages = engine.run(net).summary["messages"]
    assert events == 2.0 * 64 * 20
    assert 0.8 * events <= messages <= 1.05 * events  # Poisson rings; busy senders skip
    assert "protocol.rate 2/s" in drivers


def test_max_time_bounds_the_rounds_by_the_shortest_round():
    slow = scenario(
        clock="network",
        peers={"count": 16, "upload": "1 Mbit/s", "download": "1 Mbit/s", "latency": 0},
        vector={"dim": 125_000},  # 1 MB: at least 2 s of sending per round
        protocol={"name": "sgp"},
        stop={"max_rounds": None, "max_time": 60, "target_var": 0},
    )
    fp = resources.footprint(slow)
    assert workload.shortest_round_s(slow, fp.round_bytes_per_peer) == pytest.approx(16.0)
    events, _, drivers = estimate_events(slow)
    assert events == 4 * 2 * 16  # rounds of 16 s start at 0, 16, 32 and 48 s
    assert engine.run(slow).summary["messages"] <= events
    assert "stop.max_time" in drivers


def test_an_hours_long_run_warns_once_on_one_line():
    endless = scenario(
        clock="network",
        peers={"count": 4096},
        protocol={"name": "pairwise_gossip"},
        stop={"max_rounds": None, "max_time": 1e6, "target_var": 0},
    )
    message = workload.slow_run_message(endless)
    assert message is not None
    assert "\n" not in message
    assert message.startswith("this run may take up to ")
    assert "peers.count 4096" in message
    assert "stop.max_time" in message
    with pytest.warns(SlowRunWarning, match="this run may take up to"):
        resources.guard(endless)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resources.guard(endless)  # the same message again: not repeated
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resources.guard(scenario())  # a short run: no warning


def test_rounds_clock_runs_have_no_flow_estimate():
    assert estimate_events(scenario()) == (0.0, 0.0, "")


def test_an_out_of_memory_in_a_round_names_the_round(monkeypatch: pytest.MonkeyPatch):
    calls = []

    def failing(x: Any, groups: Any, weights: Any = None) -> Any:
        calls.append(1)
        if len(calls) == 3:
            raise MemoryError("Unable to allocate 7.28 TiB for an array")
        return x

    monkeypatch.setattr(protocols.moshpit, "group_mean", failing)
    with pytest.raises(MemoryError) as raised:
        engine.run(scenario())
    assert resources.out_of_memory_while(raised.value) == "running round 2"


def test_an_out_of_memory_while_drawing_names_the_state(monkeypatch: pytest.MonkeyPatch):
    def failing(*args: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(sim.engine.base, "initial_vectors", failing)
    with pytest.raises(MemoryError) as raised:
        engine.run(scenario())
    assert resources.out_of_memory_while(raised.value) == "building the state"


def test_every_protocol_declares_a_footprint():
    for name, cls in protocols.REGISTRY.items():
        params = scenario(protocol={"name": name}).protocol
        for clock in ("rounds", "network"):
            fp = cls.footprint(params, 64, 1024, 8, clock)
            assert fp.state_arrays >= 1.0, name
            if clock == "network" and clock in protocols.clocks_of(cls):
                assert fp.flows_per_round > 0 or fp.flows_per_s > 0, name


def test_rounds_of_no_simulated_time_warn_that_the_run_may_never_end():
    instant = scenario(
        clock="network",
        peers={"count": 8, "upload": "inf", "download": "inf", "latency": 0},
        protocol={"name": "sgp"},
        stop={"max_rounds": None, "max_time": 10},
    )
    message = workload.slow_run_message(instant)
    assert message is not None
    assert message.startswith("this run may never end: its rounds take no simulated time")
    assert message.endswith("set stop.max_rounds")


def test_async_steps_of_no_simulated_time_name_compute():
    instant = scenario(
        clock="network",
        schedule="async",
        peers={"count": 8, "upload": "inf", "download": "inf", "latency": 0, "compute": 0},
        protocol={"name": "moshpit", "group_size": 2, "grid_dims": 3},
        stop={"max_rounds": None, "max_time": 10},
    )
    message = workload.slow_run_message(instant)
    assert message is not None
    assert message.startswith("this run may never end: its steps take no simulated time")
    assert "no peers.compute" in message
