"""A group's routes for the loop (:func:`sim.engine.netclock.alone_routes.group_routes`):
looked up in arrays for large groups, one connection at a time for small ones, the same
arrays (latencies, resources numbered in order of first use, capacities)."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.engine.netclock import alone_routes
from sim.network import FlowNetwork


@st.composite
def groups(draw: st.DrawFn) -> tuple[FlowNetwork, np.ndarray, np.ndarray]:
    n = draw(st.integers(2, 12))
    rate = st.one_of(st.just(float("inf")), st.floats(1.0, 1e9))
    up = np.array(draw(st.lists(rate, min_size=n, max_size=n)))
    down = np.array(draw(st.lists(rate, min_size=n, max_size=n)))
    if draw(st.booleans()):
        latency = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)))
    else:
        latency = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n * n, max_size=n * n)))
        latency = latency.reshape(n, n)
    net = FlowNetwork(simpy.Environment(), up, down, latency, "maxmin", None, "general")
    f = draw(st.integers(1, 60))
    peers = st.integers(0, n - 1)
    src = np.array(draw(st.lists(peers, min_size=f, max_size=f)), dtype=np.int64)
    dst = np.array(draw(st.lists(peers, min_size=f, max_size=f)), dtype=np.int64)
    return net, src, dst


def _routes(net: FlowNetwork, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, ...]:
    mask = np.zeros(net.n, dtype=bool)
    mask[src] = mask[dst] = True
    members = np.flatnonzero(mask)
    local = np.full(net.n, -1, dtype=np.int64)
    local[members] = np.arange(members.size)
    return alone_routes.group_routes(net, src, dst, local, members)


@settings(max_examples=300, deadline=None)
@given(groups())
def test_routes_in_arrays_are_the_routes_one_by_one(group: tuple) -> None:
    net, src, dst = group
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(alone_routes, "VECTOR_ROUTES", 10**9)
        one_by_one = _routes(net, src, dst)
        patch.setattr(alone_routes, "VECTOR_ROUTES", 0)
        in_arrays = _routes(net, src, dst)
    for a, b in zip(one_by_one, in_arrays, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
