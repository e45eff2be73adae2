"""A²CiD²'s compiled event loop (sim/kernels/_a2cid2_jit.py) against its waves: the same
bits, float32 and float64, ties in time (some coefficients zero), η = 0, NaN and inf."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import protocols.a2cid2 as a2cid2
from protocols.a2cid2 import apply_events
from tests.strategies import event_times, pair_sequences, peer_counts, vectors

pytest.importorskip("numba")


def both_paths(x, x_tilde, times, i, j, eta, alpha_tilde):
    """(waves, compiled): apply_events with the compiled loop off, then always on."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(a2cid2, "JIT_MIN_ELEMENTS", 1 << 62)
        waves = apply_events(x.copy(), x_tilde.copy(), times, i, j, eta, alpha_tilde)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(a2cid2, "JIT_MIN_ELEMENTS", 0)
        chosen = []
        choose = a2cid2._compiled_module
        patch.setattr(a2cid2, "_compiled_module", lambda *a: chosen.append(choose(*a)) or chosen[0])
        compiled = apply_events(x.copy(), x_tilde.copy(), times, i, j, eta, alpha_tilde)
        assert chosen[0] is not None  # the compiled loop ran
    return waves, compiled


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


@st.composite
def cases(draw: st.DrawFn):
    n = draw(peer_counts(2, 12))
    i, j = draw(pair_sequences(n, max_size=60))
    dim = draw(st.integers(1, 5))
    x = draw(vectors(n, dim))
    x_tilde = x + draw(vectors(n, dim))
    times = draw(event_times(i.size))
    eta = draw(st.sampled_from([0.0, 1e-300, 0.3, 2.0]))
    alpha_tilde = draw(st.sampled_from([0.5, 0.37, 1.9]))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    return x.astype(dtype), x_tilde.astype(dtype), times, i, j, eta, alpha_tilde


@given(cases())
def test_the_compiled_loop_gives_the_waves_bits(case):
    x, x_tilde, times, i, j, eta, alpha_tilde = case
    waves, compiled = both_paths(x, x_tilde, times, i, j, eta, alpha_tilde)
    assert all(same_bits(w, c) for w, c in zip(waves, compiled, strict=True))


def test_non_finite_values_and_signed_zeros_take_the_same_path():
    rng = np.random.default_rng(3)
    n, k = 16, 400
    x = rng.normal(size=(n, 3))
    x_tilde = x + rng.normal(size=(n, 3))
    x[0, 0], x[1, 1], x_tilde[2, 2], x[3, 0] = -0.0, np.inf, np.nan, -np.inf
    times = np.sort(rng.random(k))
    times[:5] = 0.0  # the first events' coefficients are 0: waves that mix some rows only
    i = rng.integers(0, n, k)
    j = (i + 1 + rng.integers(0, n - 1, k)) % n
    with np.errstate(all="ignore"):
        for eta in (0.0, 0.8):
            waves, compiled = both_paths(x, x_tilde, times, i, j, eta, 0.4)
            assert all(same_bits(w, c) for w, c in zip(waves, compiled, strict=True))


def test_the_loop_is_kept_for_what_it_does_not_cover():
    x = np.zeros((4, 8192))
    assert a2cid2._compiled_module(x, x.copy(), 4, "none", None) is not None
    assert a2cid2._compiled_module(x, x.copy(), 1, "none", None) is None  # too small
    assert a2cid2._compiled_module(x, x.copy(), 4, "fp16", None) is None  # lossy wire
    assert a2cid2._compiled_module(x, x.astype(np.float32), 4, "none", None) is None
    assert a2cid2._compiled_module(x.astype(np.float16), x, 4, "none", None) is None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_whole_runs_are_bit_identical_with_and_without_the_loop(dtype):
    import sim

    scenario = sim.scenario_from_mapping(
        {
            "name": "a2cid2-jit",
            "peers": {"count": 64},
            "vector": {"dim": 3, "dtype": dtype},
            "churn": {"model": "bernoulli", "p": 0.2},
            "protocol": {"name": "a2cid2", "topology": "exponential"},
            "stop": {"max_rounds": 6, "target_var": 0},
        }
    )
    results = []
    for threshold in (1 << 62, 0):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(a2cid2, "JIT_MIN_ELEMENTS", threshold)
            results.append(sim.run(scenario, seed=3))
    waves, compiled = results
    assert same_bits(waves.state.x, compiled.state.x)
    assert waves.metrics.equals(compiled.metrics)
