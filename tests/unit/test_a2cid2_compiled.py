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
    waves, compiled = runs_without_and_with(scenario, "JIT_MIN_ELEMENTS")
    assert same_bits(waves.state.x, compiled.state.x)
    assert waves.metrics.equals(compiled.metrics)


def runs_without_and_with(scenario, threshold: str):
    """The run with the compiled path off (``threshold`` out of reach), then always on."""
    import sim

    results = []
    for least in (1 << 62, 0):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(a2cid2, threshold, least)
            results.append(sim.run(scenario, seed=3))
    return results


# -- the network clock's closed-form waves (A2cid2._solo_wave) -----------------------------
def _protocol(n: int, eta: float, alpha_tilde: float):
    from protocols.a2cid2 import A2cid2, A2cid2Params
    from protocols.contract import Context

    params = A2cid2Params(topology="complete", eta=eta, alpha_tilde=alpha_tilde)
    return A2cid2(params, Context(n, 1, 8, np.random.default_rng(0)))


def wave_both_ways(x, x_tilde, last, i, j, at, eta, alpha_tilde):
    """(numpy, compiled): _solo_wave's (x, x̃, last) with the compiled wave off, then on."""
    from protocols.contract import State

    out = []
    for least in (1 << 62, 0):
        protocol = _protocol(x.shape[0], eta, alpha_tilde)
        protocol.last[:] = last
        state = State(x=x.copy(), extra={"x_tilde": x_tilde.copy()})
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(a2cid2, "WAVE_MIN_ELEMENTS", least)
            with np.errstate(all="ignore"):
                protocol._solo_wave(state, i, j, at)
        out.append((state.x, state.extra["x_tilde"], protocol.last))
    return out


@st.composite
def waves_of_pairs(draw: st.DrawFn):
    n = draw(peer_counts(2, 12))
    order = draw(st.permutations(list(range(n))))
    pairs = draw(st.integers(1, n // 2))
    i = np.array(order[:pairs], dtype=np.intp)
    j = np.array(order[pairs : 2 * pairs], dtype=np.intp)
    dim = draw(st.integers(1, 5))
    x = draw(vectors(n, dim))
    x_tilde = x + draw(vectors(n, dim))
    last = draw(event_times(n))
    # each end's snapshot and update: ties with its last time (a coefficient of 0) too
    start = last[np.concatenate((i, j))] + draw(
        st.lists(st.sampled_from([0.0, 0.0, 1e-9, 0.25]), min_size=2 * pairs, max_size=2 * pairs)
    )
    end = start + draw(
        st.lists(st.sampled_from([0.0, 1e-3, 0.5]), min_size=2 * pairs, max_size=2 * pairs)
    )
    eta = draw(st.sampled_from([0.0, 1e-300, 0.3, 2.0]))
    alpha_tilde = draw(st.sampled_from([0.5, 0.37, 1.9]))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    return x.astype(dtype), x_tilde.astype(dtype), last, i, j, (start, end), eta, alpha_tilde


@given(waves_of_pairs())
def test_the_compiled_wave_gives_the_numpy_waves_bits(case):
    numpy_way, compiled = wave_both_ways(*case)
    for a, b in zip(numpy_way, compiled, strict=True):
        assert same_bits(a, b)


def test_the_compiled_wave_keeps_non_finite_values_and_signed_zeros():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(8, 3))
    x_tilde = x + rng.normal(size=(8, 3))
    x[0, 0], x[1, 1], x_tilde[2, 2], x[3, 0], x_tilde[4, 1] = -0.0, np.inf, np.nan, -np.inf, -0.0
    i, j = np.array([0, 2, 4, 6]), np.array([1, 3, 5, 7])
    last = np.zeros(8)
    start = np.array([0.0, 0.1, 0.0, 0.2, 0.0, 0.0, 0.3, 0.0])  # some pairs do not move
    for eta in (0.0, 0.8):
        numpy_way, compiled = wave_both_ways(x, x_tilde, last, i, j, (start, start + 0.5), eta, 0.4)
        for a, b in zip(numpy_way, compiled, strict=True):
            assert same_bits(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("target_var", [0.0, 1e-9])
def test_network_runs_are_bit_identical_with_and_without_the_compiled_wave(dtype, target_var):
    import sim

    scenario = sim.scenario_from_mapping(
        {
            "name": "a2cid2-wave",
            "clock": "network",
            "peers": {"count": 64, "upload": "100 Mbit/s", "download": "100 Mbit/s"},
            "vector": {"dim": 64, "dtype": dtype},
            "churn": {"model": "exponential", "mtbf": "30 s", "mttr": "5 s"},
            "protocol": {"name": "a2cid2", "topology": "ring"},
            "stop": {"max_time": 20, "max_rounds": None, "target_var": target_var},
            "metrics": {"every": 2},
        }
    )
    numpy_way, compiled = runs_without_and_with(scenario, "WAVE_MIN_ELEMENTS")
    assert same_bits(numpy_way.state.x, compiled.state.x)
    drop = [c for c in numpy_way.metrics.columns if "wall" in c]
    assert numpy_way.metrics.drop(columns=drop).equals(compiled.metrics.drop(columns=drop))


@given(waves_of_pairs())
def test_the_compiled_trajectories_are_trajectory_rows(case):
    from protocols.a2cid2 import trajectory_rows
    from protocols.contract import State

    x, x_tilde, last, i, j, _, eta, alpha_tilde = case
    pairs = np.stack((i, j), axis=1)
    slots = np.arange(pairs.shape[0])[::-1].copy()  # written out of order
    a = np.full((pairs.shape[0], 2, x.shape[1]), np.nan)
    d = a.copy()
    protocol = _protocol(x.shape[0], eta, alpha_tilde)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(a2cid2, "WAVE_MIN_ELEMENTS", 0)
        state = State(x=x, extra={"x_tilde": x_tilde})
        assert protocol.estimate_pairs_into(state, pairs, slots, a, d)
    expected = trajectory_rows(x, x_tilde, pairs.reshape(-1), last[pairs.reshape(-1)])
    shape = (-1, 2, x.shape[1])
    assert same_bits(a[slots], expected.a.reshape(shape))
    assert same_bits(d[slots], expected.d.reshape(shape))
