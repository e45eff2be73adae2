"""random_groups through a compressing wire (moshpit's butterfly arithmetic, equal shares)."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from protocols import get
from protocols.base import Context, State
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
