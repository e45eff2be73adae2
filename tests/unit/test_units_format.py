"""Showing quantities in human units: bandwidths in bit/s with a decimal prefix,
durations in the unit that reads best; what is shown parses back to the same value."""

from __future__ import annotations

import math

import pytest

from sim.core.units import format_bandwidth, format_duration, parse_bandwidth, parse_duration


@pytest.mark.parametrize(
    ("bytes_per_s", "text"),
    [(12.5e6, "100 Mbit/s"), (125e6, "1 Gbit/s"), (1.25e6, "10 Mbit/s"), (125.0, "1 kbit/s"),
     (0.0, "0 bit/s"), (math.inf, "inf"), (6.25e6 / 1.6, "31.25 Mbit/s")],
)  # fmt: skip
def test_bandwidths_read_in_bits_per_second(bytes_per_s, text):
    assert format_bandwidth(bytes_per_s) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.02, "20 ms"), (0.0005, "500 us"), (1.5, "1.5 s"), (90.0, "90 s"), (150.0, "2.5 min"),
     (7200.0, "2 h"), (0.0, "0 s"), (math.inf, "inf")],
)  # fmt: skip
def test_durations_read_in_the_unit_that_fits(seconds, text):
    assert format_duration(seconds) == text


@pytest.mark.parametrize("value", [1.0, 125.0, 3.3e5, 12.5e6, 7.7e9, 1e12])
def test_a_shown_bandwidth_parses_back(value):
    assert parse_bandwidth(format_bandwidth(value)) == pytest.approx(value, rel=1e-3)


@pytest.mark.parametrize("value", [2e-6, 0.004, 0.25, 42.0, 600.0, 86400.0])
def test_a_shown_duration_parses_back(value):
    assert parse_duration(format_duration(value)) == pytest.approx(value, rel=1e-3)
