"""Unit strings parse to SI floats; bad ones are refused."""

from __future__ import annotations

import math

import pytest

from sim.core import units


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [
        ("100 Mbit/s", 12.5e6),
        ("12.5 MB/s", 12.5e6),
        ("1 Gbit/s", 125e6),
        ("1 GiB/s", 1024.0**3),
        ("8 kbit/s", 1000.0),
        (1000, 1000.0),
        (2.5, 2.5),
        ("inf", math.inf),
        ("0 Mbit/s", 0.0),
    ],
)
def test_bandwidths_parse_to_bytes_per_second(text, bytes_per_s):
    assert units.parse_bandwidth(text) == pytest.approx(bytes_per_s)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20 ms", 0.02), ("0.5 s", 0.5), ("2 min", 120.0), ("1 h", 3600.0), (3, 3.0), ("5", 5.0)],
)
def test_durations_parse_to_seconds(text, seconds):
    assert units.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "size"), [("512 KiB", 524288.0), ("4 MB", 4e6), (10, 10.0)])
def test_sizes_parse_to_bytes(text, size):
    assert units.parse_size(text) == pytest.approx(size)


@pytest.mark.parametrize(
    "bad", ["-3 Mbit/s", "fast", "100 Mbit", "nan", float("nan"), True, None, "10 ms", [1]]
)
def test_bad_bandwidths_are_refused(bad):
    with pytest.raises(ValueError, match="bandwidth"):
        units.parse_bandwidth(bad)


@pytest.mark.parametrize("bad", ["-1 s", "inf", "20 Mbit/s", "soon", float("nan")])
def test_bad_durations_are_refused(bad):
    with pytest.raises(ValueError, match="duration"):
        units.parse_duration(bad)
