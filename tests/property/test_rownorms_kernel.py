"""The compiled row norms of the tracker's batches (sim/kernels/rownorms.py) give numpy's
bits: the same subtraction and product per coordinate, and each row summed as numpy's
pairwise sum adds a contiguous vector (8 running sums up to 128 values, halves above),
for every row length, with NaN, infinities, signed zeros and values of any size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.kernels import rownorms
from sim.kernels.rownorms import rowdots

jit = rownorms.jit_module()
needs_numba = pytest.mark.skipif(jit is None, reason="numba does not import (the extra fast)")

#: Row lengths around numpy's switches: < 8 values, 8 running sums (≤ 128), halves above.
LENGTHS = st.one_of(
    st.integers(1, 300), st.sampled_from([511, 512, 1000, 1024, 1031, 4096, 4097, 20011])
)


@st.composite
def rows(draw: st.DrawFn) -> tuple:
    """(n_rows, dim, seed, spread, odd, dtype): rows a and d, centres p and q and growth
    factors are drawn from the seed by :func:`arrays` (some entries odd when ``odd``:
    NaN, ±inf, −0.0, huge or tiny, so that the sums' order shows in the bits)."""
    return (
        draw(st.integers(1, 12)),
        draw(LENGTHS),
        draw(st.integers(0, 2**32 - 1)),
        draw(st.sampled_from([0.0, 3.0, 12.0])),
        draw(st.booleans()),
        draw(st.sampled_from(["float64", "float32"])),
    )


def arrays(case: tuple) -> dict:
    n_rows, dim, seed, spread, odd, dtype = case
    rng = np.random.default_rng(seed)

    def values(shape: tuple[int, ...]) -> np.ndarray:
        out = rng.standard_normal(shape) * rng.lognormal(0.0, spread, shape)
        if odd:
            where = rng.random(shape) < 0.02
            out[where] = rng.choice([np.nan, np.inf, -np.inf, -0.0, 1e300, 1e-300], where.sum())
        return out

    a, p, d, q = values((n_rows, dim)), values((dim,)), values((n_rows, dim)), values((dim,))
    grow = rng.lognormal(0.0, 2.0, n_rows)
    return {"a": a, "p": p, "d": d, "grow": grow, "q": q, "dtype": np.dtype(dtype)}


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Same bits, a NaN's payload and sign aside (which NaN an operation on two NaNs
    returns is the hardware's choice; nothing reads it)."""
    nan = np.isnan(want)
    if not np.array_equal(np.isnan(got), nan):
        return False
    return bool(np.array_equal(got[~nan].view(np.int64), want[~nan].view(np.int64)))


@needs_numba
@settings(max_examples=150, deadline=None)
@given(rows())
def test_centred_norms_are_numpys_bits(case: tuple) -> None:
    drawn = arrays(case)
    with np.errstate(all="ignore"):
        a = drawn["a"].astype(drawn["dtype"])
        out = np.empty(a.shape[0])
        jit.centred_norms(a, drawn["p"], out)
        centred = a.astype(np.float64) - drawn["p"]
        assert same_bits(out, rowdots(centred, centred))


@needs_numba
@settings(max_examples=150, deadline=None)
@given(rows())
def test_decaying_norms_are_numpys_bits(case: tuple) -> None:
    drawn = arrays(case)
    a, p, d, grow, q = (drawn[k] for k in ("a", "p", "d", "grow", "q"))
    out = np.empty((3, a.shape[0]))
    with np.errstate(all="ignore"):
        jit.decaying_norms(a, p, d, grow, q, out)
        centred, centred_b = a - p, d * grow[:, None] - q
        want = (
            rowdots(centred, centred),
            rowdots(centred, centred_b),
            rowdots(centred_b, centred_b),
        )
    for got, expected in zip(out, want, strict=True):
        assert same_bits(got, expected)


@pytest.mark.parametrize("dim", [64, 4097])
def test_the_dispatch_gives_the_numpy_paths_bits(dim: int, monkeypatch) -> None:
    """Batches above the threshold (compiled when numba imports) and below it (numpy)
    give the same values for the same rows."""
    rng = np.random.default_rng(dim)
    n_rows = -(-rownorms.JIT_MIN_ELEMENTS // dim) + 3
    a, d = rng.standard_normal((n_rows, dim)), rng.standard_normal((n_rows, dim))
    p, q, grow = rng.standard_normal(dim), rng.standard_normal(dim), rng.random(n_rows)
    big = rownorms.centred_norms(a, p), *rownorms.decaying_norms(a, p, d, grow, q)
    monkeypatch.setattr(rownorms, "JIT_MIN_ELEMENTS", 1 << 62)
    small = rownorms.centred_norms(a, p), *rownorms.decaying_norms(a, p, d, grow, q)
    for got, want in zip(big, small, strict=True):
        assert same_bits(got, want)
