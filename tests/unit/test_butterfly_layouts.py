"""Groups of two share one butterfly layout (``protocols._moshpit_net._layout``) and one
part split per pattern of who may reduce (``ShareCache.counts``): every plan and flow is
the one a group planned on its own gets, bit for bit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols._butterfly import ButterflySetup, ShareCache
from protocols._moshpit_net import Matched, plan_groups
from sim.kernels.compression import IDENTITY


@st.composite
def rounds(draw):
    n = draw(st.integers(2, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    bandwidth = rng.lognormal(0.0, 1.0, n) * (rng.random(n) > 0.1)  # some at 0
    reducer = rng.random(n) > 0.2  # some clients
    groups = []
    for _ in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, min(4, n)))
        groups.append(rng.permutation(n)[:size].astype(np.intp))
    dim = draw(st.integers(1, 300))
    wire_coords = draw(st.sampled_from([None, dim, 5 * dim + 3]))
    balance = draw(st.booleans())
    return bandwidth, reducer, groups, dim, wire_coords, balance


def _plan(cache: ShareCache, setup: ButterflySetup, groups: list[np.ndarray], start: float = 0.0):
    starts = start + np.arange(len(groups)) * 0.5
    return plan_groups(Matched(groups, starts, 0.0), cache, setup)


@settings(max_examples=200, deadline=None)
@given(rounds())
def test_shared_layouts_give_the_plans_of_groups_planned_alone(case):
    bandwidth, reducer, groups, dim, wire_coords, balance = case
    setup = ButterflySetup(dim, 8, 8 * 7, IDENTITY, 0.5, 2.0, wire_coords)
    shared = ShareCache(bandwidth, reducer, dim, balance)
    for _ in range(2):  # the second time, every group of two finds its layout
        plans, flows = _plan(shared, setup, groups)
    alone_plans, alone_flows = [], []
    for g, group in enumerate(groups):  # each with caches of its own, nothing reused
        p, f = _plan(ShareCache(bandwidth, reducer, dim, balance), setup, [group], g * 0.5)
        if p:
            alone_plans += p
            alone_flows.append(f)
    assert len(plans) == len(alone_plans)
    for mine, theirs in zip(plans, alone_plans, strict=True):
        for field in ("members", "bounds", "reducer", "piece", "sender", "width"):
            np.testing.assert_array_equal(getattr(mine, field), getattr(theirs, field))
    sizes = [ShareCache(bandwidth, reducer, dim, balance).counts(g) for g in groups]
    assert set(shared.layouts) == {c.tobytes() for c in sizes if c is not None and c.size <= 2}
    for field in (f.name for f in dataclasses.fields(flows)):
        got = getattr(flows, field)
        parts, a = [], 0
        for plan, f in zip(plans, alone_flows, strict=True):  # offsets in the round
            part = np.array(getattr(f, field))
            if field in ("after", "previous"):  # numbered from the group's first flow
                part = np.where(part >= 0, part + plan.first, -1)
            if field in ("opens", "waits"):
                part = np.where(part >= 0, part + a, -1)
            parts.append(part)
            a += plan.bounds.shape[0]
        want = np.concatenate(parts) if parts else np.zeros(0)
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=field)
        assert np.asarray(got).dtype == want.dtype or want.size == 0, field


def test_a_pair_splits_as_the_load_balancer_says_whatever_its_bandwidths():
    rng = np.random.default_rng(3)
    n = 40
    bandwidth = rng.lognormal(0.0, 1.0, n)
    cache = ShareCache(bandwidth, np.ones(n, bool), 1001, balance=True)
    for _ in range(50):
        pair = rng.permutation(n)[:2]
        fresh = ShareCache(bandwidth, np.ones(n, bool), 1001, balance=True)
        np.testing.assert_array_equal(cache.counts(pair), fresh.counts(pair))
    assert len(cache._cache) == 1  # one split for every pair that can both reduce


def test_a_shared_layout_is_read_only():
    setup = ButterflySetup(50, 8, 8 * 7, IDENTITY)
    cache = ShareCache(np.ones(4), np.ones(4, bool), 50, balance=False)
    plans, _ = _plan(cache, setup, [np.array([0, 1])])
    with pytest.raises(ValueError, match="read-only"):
        plans[0].piece[0] = 1
