"""First crossings of a decaying variance between events (closed form vs dense search)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.engine.observe.roots import first_crossing, first_crossing_at, time_of


def dense_first(alpha, beta, gamma, level, u_hi, u_lo, steps=200_001):
    """The first u (going down from u_hi) with the quadratic below level, on a grid."""
    u = np.linspace(u_hi, u_lo, steps)
    below = np.flatnonzero(alpha - 2 * beta * u + gamma * u * u < level)
    return u[below[0]] if below.size else math.nan


@pytest.mark.parametrize("seed", range(40))
def test_the_closed_form_matches_a_dense_search(seed):
    rng = np.random.default_rng(seed)
    gamma = abs(rng.normal()) * rng.choice([0.0, 1.0, 10.0])
    alpha, beta = rng.normal(size=2) * 3
    u_hi = rng.uniform(0.2, 1.0)
    u_lo = u_hi * rng.uniform(0.0, 0.9)
    value_hi = alpha - 2 * beta * u_hi + gamma * u_hi**2
    level = value_hi - abs(rng.normal())  # above the level at u_hi: a crossing may follow
    expected = dense_first(alpha, beta, gamma, level, u_hi, u_lo)
    got = float(first_crossing(alpha, beta, gamma, level, u_hi, u_lo))
    scalar = first_crossing_at(alpha, beta, gamma, level, u_hi, u_lo)
    step = (u_hi - u_lo) / 200_000
    if math.isnan(expected):
        assert math.isnan(got)
        assert math.isnan(scalar)
    else:
        assert got == pytest.approx(expected, abs=2 * step)
        assert scalar == pytest.approx(got, rel=1e-12)


def test_no_crossing_when_the_minimum_stays_above():
    # (u − 0.5)² + 1 ≥ 1 > 0.5
    assert math.isnan(first_crossing_at(1.25, 0.5, 1.0, 0.5, 1.0, 0.0))


def test_a_crossing_inside_already_below_is_at_u_hi():
    assert first_crossing_at(0.0, 0.0, 0.0, 1.0, 0.7, 0.1) == 0.7


def test_time_of_inverts_u():
    assert time_of(math.exp(-2.0 * 3.0), 1.0, 2.0) == pytest.approx(4.0)
    assert time_of(0.0, 1.0, 2.0) == math.inf
