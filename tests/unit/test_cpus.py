"""sim.core.cpus: the CPUs a process may use, and AVSIM_LOOP_THREADS."""

from __future__ import annotations

import os

import pytest

import sim
from sim.core import cpus
from sim.core.errors import SimulationError
from sim.engine.netclock import alone_groups


def test_usable_cpus_is_the_affinity_mask():
    if hasattr(os, "sched_getaffinity"):
        assert cpus.usable_cpus() == len(os.sched_getaffinity(0))
    assert cpus.usable_cpus() >= 1


@pytest.mark.parametrize(("value", "threads"), [("0", 0), ("1", 1), (" 3 ", 3)])
def test_the_variable_sets_the_loop_threads(monkeypatch, value, threads):
    monkeypatch.setenv(cpus.LOOP_THREADS_ENV, value)
    assert cpus.loop_threads() == threads


@pytest.mark.parametrize("cpu_count", [1, 2, 8])
def test_unset_two_threads_where_a_second_cpu_is_usable(monkeypatch, cpu_count):
    monkeypatch.delenv(cpus.LOOP_THREADS_ENV, raising=False)
    monkeypatch.setattr(cpus, "usable_cpus", lambda: cpu_count)
    assert cpus.loop_threads() == (2 if cpu_count >= 2 else 0)
    monkeypatch.setenv(cpus.LOOP_THREADS_ENV, "")  # empty: as unset
    assert cpus.loop_threads() == (2 if cpu_count >= 2 else 0)


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "two"])
def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv(cpus.LOOP_THREADS_ENV, value)
    with pytest.raises(SimulationError) as error:
        cpus.loop_threads()
    message = str(error.value)
    assert "\n" not in message
    assert cpus.LOOP_THREADS_ENV in message
    assert repr(value.strip()) in message
    assert "integer >= 0" in message


def test_an_async_run_reads_it_at_its_start(monkeypatch):
    """A bad value stops an async network-clock run before it starts; a good one is the
    run's worker count, unless ``AloneGroups.WORKERS`` says otherwise."""
    scenario = sim.scenario_from_mapping(
        {
            "name": "threads",
            "clock": "network",
            "schedule": "async",
            "peers": {"count": 16, "upload": "100 Mbit/s", "download": "100 Mbit/s",
                      "latency": "10 ms", "compute": "1 s"},
            "vector": {"dim": 8},
            "protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 2},
            "stop": {"max_time": 5, "target_var": 0},
        }
    )  # fmt: skip
    monkeypatch.setenv(cpus.LOOP_THREADS_ENV, "x")
    with pytest.raises(SimulationError, match=cpus.LOOP_THREADS_ENV):
        sim.run(scenario, seed=0)
    seen = []
    init = alone_groups.AloneGroups.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        seen.append(self.workers)

    monkeypatch.setattr(alone_groups.AloneGroups, "__init__", spy)
    monkeypatch.setenv(cpus.LOOP_THREADS_ENV, "1")
    sim.run(scenario, seed=0)
    monkeypatch.setattr(alone_groups.AloneGroups, "WORKERS", 0)
    sim.run(scenario, seed=0)
    assert seen == [1, 0]
