"""Error bounds of the wire quantizers, and the same values on every backend."""

from __future__ import annotations

import array_api_strict as xps
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sim.kernels.compression import METHODS, N_BINS, fp16_round, roundtrip, wire_bytes
from tests.strategies import finite_floats, messages

FP16_NORMAL_MIN = 2.0**-14
FP16_MAX = 65504.0


@given(messages())
def test_fp16_relative_error_is_at_most_half_an_ulp(x):
    received, nbytes = roundtrip(x, "fp16")
    normal = (np.abs(x) >= FP16_NORMAL_MIN) & (np.abs(x) <= FP16_MAX)
    assert np.all(np.abs(received - x)[normal] <= 2.0**-11 * np.abs(x[normal]))
    assert np.all(np.abs(received - x)[~normal & (np.abs(x) < 1)] <= 2.0**-25)
    assert nbytes == x.size * 2


@given(st.lists(st.one_of(finite_floats(1e5), st.floats(-1e-4, 1e-4)), max_size=200))
def test_fp16_emulation_is_the_cast(values):
    x = np.array(values, dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(fp16_round(xps.asarray(x))), fp16_round(x))
    x32 = x.astype(np.float32)
    np.testing.assert_array_equal(np.asarray(fp16_round(xps.asarray(x32))), fp16_round(x32))


@given(messages())
def test_uniform8_error_is_at_most_half_a_bin_inside_six_sigma(x):
    received, _ = roundtrip(x, "uniform8")
    mean, sigma = x.mean(axis=1, keepdims=True), x.std(axis=1, keepdims=True)
    half_bin = 6 * sigma / N_BINS
    round_off = 1e-12 * (np.abs(mean) + 6 * sigma)
    inside = np.abs(x - mean) <= 6 * sigma
    error = np.abs(received - x)
    assert np.all((error <= half_bin + round_off)[inside])


@given(messages())
def test_quantile8_error_is_at_most_the_width_of_the_bin(x):
    received, _ = roundtrip(x, "quantile8")
    n = x.shape[1]
    ordered = np.sort(x, axis=1)
    edges = (np.arange(N_BINS + 1) * n + N_BINS - 1) // N_BINS
    ranks = np.stack([np.searchsorted(row, values) for row, values in zip(ordered, x, strict=True)])
    bins = ranks * N_BINS // n
    lowest = np.take_along_axis(ordered, edges[bins], axis=1)
    highest = np.take_along_axis(ordered, edges[bins + 1] - 1, axis=1)
    assert np.all(np.abs(received - x) <= highest - lowest)
    assert all(np.unique(row).size <= N_BINS for row in received)
    equal = x[:, :, None] == x[:, None, :]
    assert np.all((received[:, :, None] == received[:, None, :])[equal])


@given(messages(), st.sampled_from(METHODS))
def test_received_values_stay_within_the_message_range_and_bytes_add_up(x, method):
    received, nbytes = roundtrip(x, method)
    assert nbytes == x.shape[0] * wire_bytes(method, x.shape[1], 8)
    if method == "quantile8":
        assert np.all(received >= x.min(axis=1, keepdims=True))
        assert np.all(received <= x.max(axis=1, keepdims=True))


@given(messages(), st.sampled_from(METHODS))
def test_equal_values_round_trip_exactly(x, method):
    constant = np.repeat(fp16_round(x[:, :1]), x.shape[1], axis=1)
    np.testing.assert_array_equal(roundtrip(constant, method)[0], constant)


@given(messages(max_coords=300), st.sampled_from(METHODS))
def test_array_api_strict_gives_the_numpy_values(x, method):
    received = np.asarray(roundtrip(xps.asarray(x), method)[0])
    np.testing.assert_array_equal(received, roundtrip(x, method)[0])
