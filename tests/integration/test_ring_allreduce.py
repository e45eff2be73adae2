"""ring_allreduce on the network clock: closed-form attempt time, exact mean, abort and
restart after a member is lost."""

from __future__ import annotations

import numpy as np
import pytest

import sim

UP = 12.5e6  # 100 Mbit/s
S_BYTES = 4096 * 8  # dim 4096, float64


def scenario(**overrides):
    data = {
        "name": "ring",
        "clock": "network",
        "peers": {"count": 8, "upload": UP, "download": UP, "latency": "5 ms"},
        "vector": {"dim": 4096},
        "protocol": {"name": "ring_allreduce"},
        "stop": {"max_rounds": 1, "target_var": 0},
    }
    return sim.scenario_from_mapping(data, overrides)


def test_one_attempt_takes_2_n_minus_1_steps_of_latency_plus_a_chunk():
    result = sim.run(scenario())
    n = 8
    expected = 2 * (n - 1) * (0.010 + S_BYTES / (n * UP))
    assert result.summary["sim_time_s"] == pytest.approx(expected, rel=1e-12)
    assert result.summary["bytes_sent"] == pytest.approx(2 * (n - 1) * S_BYTES)
    x = result.state.x
    np.testing.assert_allclose(x, np.broadcast_to(x.mean(axis=0), x.shape), rtol=0, atol=1e-12)


def test_a_lost_member_aborts_the_attempt_and_it_restarts_after_the_delay(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("peer,down_s,up_s\n3,0.02,0.5\n")
    sc = scenario(
        churn={"model": "trace", "file": str(trace)},
        **{"stop.max_rounds": 2, "protocol.restart_delay": "1 s", "metrics.every": 1e-3},
    )
    result = sim.run(sc)
    x0 = sim.run(scenario(**{"stop.max_rounds": 0})).state.x
    rows = result.metrics
    first_end = rows["time_s"].iloc[1]
    assert rows["var"].iloc[1] == pytest.approx(rows["var"].iloc[0])  # aborted: unchanged
    # the second attempt starts after the restart delay, with peer 3 back (up at 0.5 s)
    n = 8
    attempt = 2 * (n - 1) * (0.010 + S_BYTES / (n * UP))
    assert result.summary["sim_time_s"] == pytest.approx(first_end + 1.0 + attempt)
    np.testing.assert_allclose(result.state.x.mean(axis=0), x0.mean(axis=0), rtol=1e-12, atol=1e-15)
    assert result.summary["final_var"] < 1e-25


def test_rounds_clock_averages_the_present_peers_and_leaves_the_absent_alone():
    from protocols import get
    from protocols.contract import Context, State

    cls = get("ring_allreduce")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 3))
    present = np.array([True, True, False, True, True, False])
    state = State(x=x.copy())
    cls(cls.Params(), Context(6, 3, 8, rng)).round(state, present, 0)
    np.testing.assert_allclose(state.x[present], np.broadcast_to(x[present].mean(axis=0), (4, 3)))
    np.testing.assert_array_equal(state.x[~present], x[~present])


@pytest.mark.parametrize("pieces", [2, 5])
def test_pipeline_chunks_send_pieces_and_give_the_same_mean(pieces):
    whole = sim.run(scenario())
    piped = sim.run(scenario(**{"protocol.pipeline_chunks": pieces}))
    np.testing.assert_array_equal(piped.state.x, whole.state.x)
    assert piped.summary["messages"] == pieces * whole.summary["messages"]
    assert piped.summary["bytes_sent"] == pytest.approx(whole.summary["bytes_sent"])
    n = 8
    # each piece pays the latency; the pieces of a step pipeline over the ring
    piece_s = 0.010 + S_BYTES / (n * pieces * UP)
    assert piped.summary["sim_time_s"] >= (2 * (n - 1) + pieces - 1) * piece_s * (1 - 1e-12)


def test_pipelining_brings_a_slow_link_to_its_bandwidth_bound():
    """One member uploads at b/4: its link must carry 2(n−1)·S/n bytes whatever happens.
    Whole chunks leave it idle while it waits for its predecessor; pieces keep it busy."""
    setting = {
        "peers.latency": "10 us",
        "vector.dim": 2**16,
        "peers.classes": [{"fraction": 0.875}, {"fraction": 0.125, "upload": UP / 4}],
    }
    n, s_bytes = 8, 2**16 * 8
    bound = 2 * (n - 1) * s_bytes / n / (UP / 4)
    whole = sim.run(scenario(**setting)).summary["sim_time_s"]
    piped = sim.run(scenario(**setting, **{"protocol.pipeline_chunks": 4})).summary["sim_time_s"]
    assert bound < piped < 1.005 * bound < whole
