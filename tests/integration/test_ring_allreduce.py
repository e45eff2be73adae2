"""ring_allreduce on the network clock: closed-form attempt time, exact mean, abort and
restart after a member is lost; each peer sends to its successor in step order on one
connection (issue 12, part 4)."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from sim.network import Flow, FlowNetwork

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


def straggler(dim, pieces=1, **overrides):
    """Issue 12's example: 8 peers at 1 Gbit/s and 0.5 ms, one of them at 100 Mbit/s."""
    slow = {"fraction": 0.125, "upload": "100 Mbit/s", "download": "100 Mbit/s"}
    setting = {
        "peers.upload": "1 Gbit/s",
        "peers.download": "1 Gbit/s",
        "peers.latency": "0.5 ms",
        "peers.classes": [{"fraction": 0.875}, slow],
        "vector.dim": dim,
        "vector.dtype": "float32",
        "protocol.pipeline_chunks": pieces,
    }
    return scenario(**setting, **overrides)


def ring_time(n, s_bytes, pieces, latency_s, rate):
    """One attempt, each connection carrying one message at a time: the critical path
    stays on the slowest connection (route latency ``latency_s``, rate ``rate``)."""
    return 2 * (n - 1) * (pieces * latency_s + s_bytes / (n * rate))


@pytest.mark.slow
def test_the_issue_straggler_example_takes_the_closed_form_of_its_slowest_link():
    """100 MB of float32 (~10 s of wall time): 14.01 s, where sharing the uplink between
    steps gave 20.88 s."""
    dim = 25_000_000
    closed = ring_time(8, dim * 4, 1, 2 * 0.5e-3, 100e6 / 8)
    assert sim.run(straggler(dim)).summary["sim_time_s"] == pytest.approx(closed, rel=0.01)


@pytest.mark.parametrize("pieces", [1, 4])
def test_a_straggler_ring_takes_exactly_the_closed_form_of_its_slowest_link(pieces):
    dim = 250_000  # 1 MB: the latency weighs 10 % of a step
    result = sim.run(straggler(dim, pieces))
    closed = ring_time(8, dim * 4, pieces, 2 * 0.5e-3, 100e6 / 8)
    assert result.summary["sim_time_s"] == pytest.approx(closed, rel=1e-9)
    assert result.summary["messages"] == 2 * 7 * 8 * pieces


@pytest.mark.parametrize("pieces", [2, 3])
def test_a_homogeneous_ring_with_pieces_pays_a_latency_per_piece(pieces):
    result = sim.run(scenario(**{"protocol.pipeline_chunks": pieces}))
    closed = ring_time(8, S_BYTES, pieces, 0.010, UP)
    assert result.summary["sim_time_s"] == pytest.approx(closed, rel=1e-12)


def test_the_slowest_hop_sets_the_pace_with_unequal_latencies():
    """One peer 40 ms away: both its connections have a route latency of 45 ms, and every
    step waits for them (the step of a connection starts when its own previous one ended)."""
    far = {"fraction": 0.125, "latency": "40 ms"}
    sc = scenario(**{"peers.latency": "5 ms", "peers.classes": [{"fraction": 0.875}, far]})
    closed = ring_time(8, S_BYTES, 1, 0.045, UP)
    assert sim.run(sc).summary["sim_time_s"] == pytest.approx(closed, rel=1e-12)


@pytest.fixture
def sent(monkeypatch):
    """Every flow the network starts during a run, in start order."""
    flows: list[Flow] = []
    send = FlowNetwork.send

    def recording(self, *args, **kwargs):
        flow = send(self, *args, **kwargs)
        flows.append(flow)
        return flow

    monkeypatch.setattr(FlowNetwork, "send", recording)
    return flows


@pytest.mark.parametrize("pieces", [1, 3])
def test_a_connection_carries_its_pieces_in_order_one_at_a_time(sent, pieces):
    """On each connection i → i+1 the j-th message, (step, piece) = divmod(j, P), starts
    the instant the previous one ended or the piece it forwards arrived from i−1 (the
    j−P-th message of connection i−1 → i), whichever is later: messages never overlap."""
    n = 8
    sim.run(straggler(250_000, pieces))
    per_connection: dict[int, list[Flow]] = {}
    for flow in sent:
        assert flow.dst == (flow.src + 1) % n
        per_connection.setdefault(flow.src, []).append(flow)
    assert sorted(per_connection) == list(range(n))
    for i, flows in per_connection.items():
        assert len(flows) == 2 * (n - 1) * pieces
        assert all(f.phase == "done" and f.latency_s > 0 for f in flows)
        before = per_connection[(i - 1) % n]
        for j, flow in enumerate(flows):
            ended = flows[j - 1].end_s if j > 0 else 0.0
            arrived = before[j - pieces].end_s if j >= pieces else 0.0
            assert flow.start_s == max(ended, arrived)


def test_a_broken_connection_sends_nothing_more_and_the_others_finish(tmp_path):
    """Peer 3 goes down during step 1: its two connections (2 → 3, 3 → 4) end with it
    (their 12 later messages fail at once, unsent); the six others send all 14 steps, so
    the aborted attempt lasts as long as a complete one."""
    trace = tmp_path / "trace.csv"
    trace.write_text("peer,down_s,up_s\n3,0.02,0.5\n")
    sc = scenario(
        churn={"model": "trace", "file": str(trace)},
        **{"stop.max_rounds": 2, "protocol.restart_delay": "1 s", "metrics.every": 1e-3},
    )
    result = sim.run(sc)
    n, steps = 8, 14
    attempt = ring_time(n, S_BYTES, 1, 0.010, UP)
    step = attempt / steps
    down_in_step = int(0.02 // step)
    assert down_in_step == 1
    assert 0.02 - step < 0.010  # its step-1 messages were still in their latency: no bytes
    assert result.metrics["time_s"].iloc[1] == pytest.approx(attempt, rel=1e-12)
    first = (n - 2) * steps + 2 * (down_in_step + 1)
    first_bytes = (n - 2) * steps + 2 * down_in_step
    assert result.summary["messages"] == first + n * steps
    assert result.summary["bytes_sent"] == pytest.approx((first_bytes + n * steps) * S_BYTES / n)
