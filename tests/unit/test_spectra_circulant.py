"""A connected circulant graph's χ₁ and χ₂ come in closed form (``method`` "circulant"),
equal to the eigendecomposition's; a graph that is not quite circulant, or not connected,
gets the general methods."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols._spectra import circulant_offsets, graph_constants


def circulant(n: int, classes: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """Edges {i, i + d mod n} for each class d ≤ n/2, once each, at the class's rate."""
    edges, rates = [], []
    for d, rate in classes.items():
        starts = range(n // 2) if 2 * d == n else range(n)
        for i in starts:
            edges.append((i, (i + d) % n))
            rates.append(rate)
    return np.array(edges, dtype=np.intp), np.array(rates)


@st.composite
def circulants(draw):
    n = draw(st.integers(3, 60))
    offsets = draw(st.sets(st.integers(1, n // 2), min_size=1, max_size=4))
    classes = {d: draw(st.floats(0.05, 20.0)) for d in sorted(offsets)}
    edges, rates = circulant(n, classes)
    order = np.random.default_rng(n).permutation(len(rates))  # any order, either way round
    edges, rates = edges[order], rates[order]
    flip = np.random.default_rng(n + 1).random(len(rates)) < 0.5
    edges[flip] = edges[flip][:, ::-1]
    return n, edges, rates


@settings(max_examples=150, deadline=None)
@given(circulants())
def test_the_closed_form_matches_the_eigendecomposition(graph):
    n, edges, rates = graph
    general = graph_constants(edges, rates, n, dense_max=10**6, closed_form=False)
    got = graph_constants(edges, rates, n)
    classes = circulant_offsets(edges, rates, n)
    assert classes is not None
    if math.gcd(n, *(d for d, _, _ in classes)) > 1:  # separate circulants: the general path
        assert got == general
        return
    assert got.method == "circulant"
    assert got.chi1 == pytest.approx(general.chi1, rel=1e-9)
    assert got.chi2 == pytest.approx(general.chi2, rel=1e-9)


def test_a_large_ring_matches_the_textbook_forms():
    n, rate = 4096, 0.75
    edges, rates = circulant(n, {1: rate})
    got = graph_constants(edges, rates, n, transitive=True)
    assert got.method == "circulant"
    assert got.chi1 == pytest.approx(1 / (4 * rate * np.sin(np.pi / n) ** 2), rel=1e-13)
    assert got.chi2 == pytest.approx((n - 1) / n / rate / 2, rel=1e-13)


def test_a_disconnected_circulant_gets_the_general_path():
    edges, rates = circulant(8, {2: 1.0})  # two 4-cycles
    got = graph_constants(edges, rates, 8)
    assert got.method == "dense"
    assert got == graph_constants(edges, rates, 8, closed_form=False)


@pytest.mark.parametrize("mutation", ["rate", "missing", "twice"])
def test_a_graph_that_is_almost_circulant_is_not_taken_for_one(mutation):
    edges, rates = circulant(12, {1: 1.0, 3: 0.5})
    if mutation == "rate":
        rates = rates.copy()
        rates[5] = 0.75
    elif mutation == "missing":
        edges, rates = edges[1:], rates[1:]
    else:
        edges, rates = np.vstack((edges, edges[:1])), np.append(rates, rates[0])
    assert circulant_offsets(edges, rates, 12) is None
    got = graph_constants(edges, rates, 12)
    assert got.method == "dense"
    assert got == graph_constants(edges, rates, 12, closed_form=False)
