"""Wire compression kernels: sizes, hand-checked values, and backends (sim/kernels/compression)."""

from __future__ import annotations

import array_api_strict as xps
import numpy as np
import pytest

from sim.kernels.compression import (
    FP16_MAX,
    METHODS,
    fp16_round,
    roundtrip,
    roundtrip_parts,
    wire_bytes,
)


@pytest.mark.parametrize(
    ("method", "expected"),
    [("none", 8000), ("fp16", 2000), ("uniform8", 1008), ("quantile8", 2024)],
)
def test_wire_bytes_of_a_thousand_float64_coordinates(method, expected):
    assert wire_bytes(method, 1000, 8) == expected


def test_an_empty_message_is_not_sent():
    assert all(wire_bytes(method, 0, 8) == 0 for method in METHODS)


def test_roundtrip_counts_every_message():
    x = np.zeros((3, 10), dtype=np.float32)
    assert roundtrip(x, "none")[1] == 120
    assert roundtrip(x, "uniform8")[1] == 3 * 18


def test_none_returns_the_values_sent():
    x = np.random.default_rng(1).normal(size=(2, 50))
    received, _ = roundtrip(x, "none")
    assert received is x


def test_fp16_rounds_to_nearest_even_and_saturates():
    x = np.array([1 + 2**-11, 1 + 3 * 2**-11, 70000.0, -1e9, 2**-25, 3 * 2**-25, 0.1])
    expected = [1.0, 1 + 2**-9, FP16_MAX, -FP16_MAX, 0.0, 2**-23, float(np.float16(0.1))]
    np.testing.assert_array_equal(roundtrip(x, "fp16")[0], expected)


def test_fp16_emulation_matches_the_cast():
    rng = np.random.default_rng(2)
    x = rng.normal(size=4000) * 10.0 ** rng.integers(-9, 6, size=4000)
    emulated = np.asarray(fp16_round(xps.asarray(x)))
    np.testing.assert_array_equal(emulated, fp16_round(x))


def test_uniform8_decodes_to_bin_centres():
    # mean 0, σ = 1: range [-6, 6] in 256 bins of 12/256
    x = np.array([[-1.0, 1.0]])
    width = 12 / 256
    code = np.floor((x - (-6.0)) / width)
    np.testing.assert_allclose(roundtrip(x, "uniform8")[0], -6.0 + (code + 0.5) * width)


def test_uniform8_clips_values_outside_six_sigma():
    x = np.zeros((1, 1000))
    x[0, 0] = 1000.0  # mean 1, σ ≈ 31.6: far outside mean ± 6σ
    received, _ = roundtrip(x, "uniform8")
    mean, sigma = x.mean(), x.std()
    assert received[0, 0] == pytest.approx(mean + 6 * sigma - 6 * sigma / 256)


def test_quantile8_table_holds_bin_means():
    # 512 distinct values: bins of two consecutive ranks, each decoded to their mean
    x = np.random.default_rng(3).permutation(512).astype(np.float64)[None, :]
    received, nbytes = roundtrip(x, "quantile8")
    np.testing.assert_array_equal(received, np.floor(x / 2) * 2 + 0.5)
    assert nbytes == 512 + 1024


def test_quantile8_is_exact_below_256_coordinates():
    x = np.random.default_rng(4).normal(size=(3, 255))
    np.testing.assert_array_equal(roundtrip(x, "quantile8")[0], x)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_constant_and_single_coordinate_messages_are_exact(method, dtype):
    value = np.float16(0.1) if method == "fp16" else 0.1
    for shape in [(2, 1), (2, 1000), (1,)]:
        x = np.full(shape, value, dtype=dtype)
        received, _ = roundtrip(x, method)
        assert received.dtype == dtype
        np.testing.assert_array_equal(received, x)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_array_api_strict_gives_the_numpy_values(method, dtype):
    x = np.random.default_rng(5).standard_t(3, size=(3, 700)).astype(dtype)
    expected, expected_bytes = roundtrip(x, method)
    received, nbytes = roundtrip(xps.asarray(x), method)
    np.testing.assert_array_equal(np.asarray(received), expected)
    assert nbytes == expected_bytes


@pytest.mark.parametrize("method", METHODS)
def test_parts_are_separate_messages(method):
    x = np.random.default_rng(6).normal(size=(4, 900))
    starts, stops = np.array([0, 300, 300, 800]), np.array([300, 300, 800, 900])
    received, nbytes = roundtrip_parts(x, starts, stops, method)
    for j, (start, stop) in enumerate(zip(starts, stops, strict=True)):
        part, part_bytes = roundtrip(x[:, start:stop], method)
        np.testing.assert_array_equal(received[:, start:stop], part)
        assert nbytes[j] == part_bytes
    assert nbytes[1] == 0


def test_one_dimensional_input_is_one_message():
    x = np.random.default_rng(7).normal(size=600)
    received, nbytes = roundtrip(x, "quantile8")
    assert received.shape == x.shape
    np.testing.assert_array_equal(received, roundtrip(x[None, :], "quantile8")[0][0])
    assert nbytes == 600 + 1024


def test_unknown_method_is_an_error_listing_the_known_ones():
    with pytest.raises(ValueError, match="none, fp16, uniform8, quantile8"):
        roundtrip(np.zeros((1, 3)), "int4")


def test_integer_vectors_are_an_error():
    with pytest.raises(ValueError, match="real floating"):
        roundtrip(np.zeros((1, 3), dtype=np.int64), "fp16")


def test_quantile8_gives_equal_values_one_code_on_every_backend():
    x = np.random.default_rng(8).integers(0, 7, size=(2, 1000)).astype(np.float64)
    received, _ = roundtrip(x, "quantile8")
    for row, sent in zip(received, x, strict=True):
        assert all(np.unique(row[sent == value]).size == 1 for value in np.unique(sent))
    np.testing.assert_array_equal(np.asarray(roundtrip(xps.asarray(x), "quantile8")[0]), received)
