"""random_groups through a compressing wire (moshpit's butterfly arithmetic, equal shares)."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from protocols import get
from protocols.contract import Context, State
from sim.kernels.compression import fp16_round, wire_bytes


def scenario(clock="rounds", compression="none", count=32, dim=3000):
    return sim.scenario_from_mapping(
        {
            "name": "rg-wire",
            "clock": clock,
            "peers": {"count": count},
            "vector": {"dim": dim, "dtype": "float32"},
            "protocol": {"name": "random_groups", "group_size": 8, "compression": compression},
            "stop": {"max_rounds": 4, "target_var": 0},
        }
    )


@pytest.mark.parametrize("method", ["fp16", "uniform8", "quantile8"])
def test_bytes_are_the_compressed_parts_on_both_clocks(method):
    # 4 groups of 8, dim 3000: parts of 375 coordinates, 8·7 requests + 8·7 replies a group
    expected = 4 * 4 * 2 * 8 * 7 * wire_bytes(method, 375, 4)
    for clock in ("rounds", "network"):
        assert sim.run(scenario(clock, method)).summary["bytes_sent"] == expected


@pytest.mark.parametrize("method", ["fp16", "uniform8", "quantile8"])
def test_network_clock_gives_the_rounds_clock_vectors(method):
    on_rounds = sim.run(scenario("rounds", method))
    on_net = sim.run(scenario("network", method))
    np.testing.assert_array_equal(on_net.state.x, on_rounds.state.x)
    assert on_net.summary["final_mean_drift"] > 0


def test_one_group_matches_a_hand_computed_fp16_butterfly():
    cls = get("random_groups")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 10)) * 100
    protocol = cls(cls.Params(group_size=4, compression="fp16"), Context(4, 10, 8, rng))
    state = State(x=x.copy())
    protocol.round(state, np.ones(4, dtype=bool), 0)
    # every member ends with, per part, the part's mean as the others see it: only the
    # reducer's own row is exact in the reduction, and only the reducer keeps the exact
    # mean. Which member reduces which part depends on the shuffle, so check the rule
    # part by part against every possible reducer.
    bounds = [(0, 3), (3, 6), (6, 8), (8, 10)]
    for start, stop in bounds:
        candidates = []
        for r in range(4):
            sent = fp16_round(x[:, start:stop])
            sent[r] = x[r, start:stop]
            reduced = sent.mean(axis=0)
            block = np.broadcast_to(fp16_round(reduced), (4, stop - start)).copy()
            block[r] = reduced
            candidates.append(block)
        got = state.x[:, start:stop]
        assert any(np.array_equal(got, c) for c in candidates)


# -- ring_allreduce ---------------------------------------------------------------------------


def hop_by_hop(x, members, counts, method):
    """Reference ring all-reduce through the wire, one chunk and one hop at a time."""
    from sim.kernels.compression import roundtrip

    n, out = members.size, x.copy()
    ring = x[members].copy()
    new = ring.copy()
    starts = np.cumsum(counts) - counts
    for c in range(n):
        cols = slice(starts[c], starts[c] + counts[c])
        partial = ring[c, cols]
        for k in range(1, n):
            partial = roundtrip(partial, method)[0] + ring[(c + k) % n, cols]
        mean = partial / n
        new[:, cols] = roundtrip(mean, method)[0]
        new[(c - 1) % n, cols] = mean
    out[members] = new
    return out


@pytest.mark.parametrize("method", ["none", "fp16", "uniform8", "quantile8"])
def test_ring_reduce_is_the_hop_by_hop_chain(method):
    from sim.kernels.ring import ring_reduce

    rng = np.random.default_rng(5)
    x = rng.standard_normal((7, 300))
    members, counts = np.array([4, 1, 5, 0, 2, 6]), np.array([50, 50, 50, 50, 50, 50])
    counts[:2] += 1
    counts[-2:] -= 1
    got, shift = ring_reduce(x.copy(), members, counts, method)
    np.testing.assert_array_equal(got, hop_by_hop(x, members, counts, method))
    np.testing.assert_allclose(shift, (got - x).sum(axis=0), atol=1e-12)
    np.testing.assert_array_equal(got[3], x[3])  # not a member


def ring(clock, method, pieces=1):
    return sim.scenario_from_mapping(
        {
            "name": "ring-wire",
            "clock": clock,
            "peers": {"count": 8},
            "vector": {"dim": 1001, "dtype": "float32"},
            "protocol": {"name": "ring_allreduce", "compression": method,
                         "pipeline_chunks": pieces},
            "stop": {"max_rounds": 1, "target_var": 0},
        }
    )  # fmt: skip


@pytest.mark.parametrize("method", ["fp16", "uniform8", "quantile8"])
def test_ring_bytes_and_vectors_agree_on_both_clocks(method):
    # 8 chunks: one of 126 coordinates, seven of 125; each sent 2·7 times
    expected = 14 * (wire_bytes(method, 126, 4) + 7 * wire_bytes(method, 125, 4))
    on_rounds, on_net = sim.run(ring("rounds", method)), sim.run(ring("network", method))
    assert on_rounds.summary["bytes_sent"] == on_net.summary["bytes_sent"] == expected
    np.testing.assert_array_equal(on_net.state.x, on_rounds.state.x)
    assert on_net.summary["final_mean_drift"] > 0
    piped = sim.run(ring("network", method, pieces=3))
    np.testing.assert_array_equal(piped.state.x, on_rounds.state.x)


@pytest.mark.parametrize("method", ["none", "fp16", "uniform8", "quantile8"])
def test_ring_reduce_is_the_same_on_array_api_strict(method):
    xps = pytest.importorskip("array_api_strict")
    from sim.kernels.ring import ring_reduce

    x = np.random.default_rng(6).standard_normal((7, 300))
    members, counts = np.array([4, 1, 5, 0, 2, 6]), np.full(6, 50)
    on_numpy, _ = ring_reduce(x.copy(), members, counts, method)
    on_strict, _ = ring_reduce(xps.asarray(x), members, counts, method)
    np.testing.assert_array_equal(np.asarray(on_strict), on_numpy)
