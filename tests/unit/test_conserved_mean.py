"""``mean_drift`` measures what a protocol conserves (``Protocol.conserved_mean``)."""

from __future__ import annotations

import numpy as np
import pytest

import sim
import sim.engine.schedules
from protocols.base import Protocol
from sim.engine.recorder import statistics


def scenario(protocol: dict, clock: str, **extra):
    stop = {"max_rounds": 30} if clock == "rounds" else {"max_time": 30}
    return sim.scenario_from_mapping(
        {
            "name": "drift",
            "clock": clock,
            "peers": {"count": 16},
            "vector": {"dim": 4},
            "protocol": protocol,
            "stop": {**stop, "target_var": 0},
            **extra,
        }
    )


@pytest.mark.parametrize("clock", ["rounds", "network"])
def test_push_sum_drift_is_that_of_sum_x_over_sum_w_which_an_exact_wire_keeps(clock):
    result = sim.run(scenario({"name": "push_sum"}, clock))
    x, w = result.state.x, result.state.extra["w"]
    estimates = x / w
    assert np.abs(estimates.mean(axis=0) - x.sum(axis=0) / w.sum()).max() > 1e-6  # differ
    assert result.summary["final_mean_drift"] < 1e-12
    assert result.metrics["mean_drift"].max() < 1e-12


@pytest.mark.parametrize("clock", ["rounds", "network"])
def test_push_sum_drift_still_shows_the_wire_error(clock):
    result = sim.run(scenario({"name": "push_sum", "compression": "uniform8"}, clock))
    assert result.summary["final_mean_drift"] > 1e-6


def test_the_hook_gives_sum_x_over_sum_w_over_the_rows_asked():
    run = sim.engine.schedules.engine_for(scenario({"name": "push_sum"}, "rounds"), 0)
    run.env.process(run.process(None))
    run.env.run()
    state, rows = run.state, np.array([1, 4, 9])
    mean = run.protocol.conserved_mean(state, rows)
    x, w = state.x[rows], state.extra["w"][rows]
    np.testing.assert_allclose(mean, x.sum(axis=0) / w.sum(), rtol=1e-14)
    np.testing.assert_allclose(
        run.protocol.conserved_mean(state), state.x.sum(axis=0) / state.extra["w"].sum(), rtol=1e-14
    )


def test_by_default_the_drift_is_that_of_the_mean_estimate():
    run = sim.engine.schedules.engine_for(
        scenario({"name": "gossip", "topology": "ring"}, "rounds"), 0
    )
    assert Protocol.conserved_mean is type(run.protocol).conserved_mean
    assert run.protocol.conserved_mean(run.state) is None


def test_the_conserved_mean_moves_the_drift_not_err_init():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 4))
    present, mean0 = np.ones(16, dtype=bool), np.zeros(4)
    plain = statistics(x, present, mean0)
    conserved = np.full(4, 0.5)
    shifted = statistics(x, present, mean0, conserved=conserved)
    assert shifted.mean_drift == pytest.approx(0.5)
    assert (shifted.var, shifted.err_init, shifted.var_alive) == (
        plain.var, plain.err_init, plain.var_alive,
    )  # fmt: skip
    assert plain.mean_drift == pytest.approx(np.sqrt(np.mean(x.mean(axis=0) ** 2)))
