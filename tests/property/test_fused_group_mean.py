"""The fused group-mean kernels (sim/kernels/fused.py) give the tiles' values bit for bit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import array_api_strict as xps
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import sim.kernels.fused as fused_module
import sim.kernels.grouped as grouped_module
from protocols import get
from protocols.contract import Context, State
from sim.kernels import Groups, group_mean
from tests.strategies import BOUND, partitions, permutations

BACKENDS = [
    "numpy",
    pytest.param(
        "numba",
        marks=pytest.mark.skipif(fused_module.jit_module() is None, reason="numba not installed"),
    ),
]
#: Tile layouts of the reference: whole buckets; column blocks of two (an odd dim leaves
#: a one-column tile, summed pairwise by numpy, which must stay a tile); single columns.
TILINGS = {
    "whole": {},
    "pairs": {"GATHER_ELEMENTS": 0, "CACHE_ELEMENTS": 1, "MIN_BLOCK_COLUMNS": 2},
    "singles": {"GATHER_ELEMENTS": 0, "CACHE_ELEMENTS": 1, "MIN_BLOCK_COLUMNS": 1},
}
#: Thresholds that send every bucket of two columns or more to the given backend, and
#: column blocks of 8 bytes in the numba loop (several blocks, the last one short).
ALWAYS = {"JIT_MIN_ELEMENTS": 0, "JIT_MIN_ROW_BYTES": 0, "ROW_LOOP_BYTES": 0, "JIT_BLOCK_BYTES": 8}


@contextmanager
def patched(tiling: str = "whole", backend: str | None = None) -> Iterator[None]:
    """The given tiling; fused ``backend`` everywhere it applies, or never (None)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in TILINGS[tiling].items():
            patch.setattr(grouped_module, name, value)
        if backend is None:
            patch.setattr(grouped_module, "backend_for", lambda *args: None)
        else:
            for name, value in ALWAYS.items():
                patch.setattr(fused_module, name, value)
            if backend == "numpy":
                patch.setattr(fused_module, "jit_module", lambda: None)
        yield


def tiles(x: np.ndarray, groups: Groups, weights: np.ndarray | None = None) -> np.ndarray:
    """The reference: group_mean through the tiles only."""
    with patched():
        return group_mean(x.copy(), groups, weights)


def assert_same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype
    assert got.tobytes() == expected.tobytes(), np.flatnonzero(got != expected)[:10]


@st.composite
def cases(draw: st.DrawFn, min_dim: int = 1, max_dim: int = 12):
    """(x, groups, weights): ragged groups, singletons, absent peers (label −1), a shuffled
    member order, float32 or float64, with or without weights."""
    n = draw(st.integers(1, 48))
    dim = draw(st.integers(min_dim, max_dim))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    elements = st.floats(-BOUND, BOUND, width=np.dtype(dtype).itemsize * 8)
    x = draw(hnp.arrays(dtype, (n, dim), elements=elements))
    labels = draw(partitions(n, max_groups=draw(st.integers(1, n))))
    groups = Groups.from_labels(labels, draw(permutations(n)))
    weighted = draw(st.booleans())
    weights = np.abs(draw(hnp.arrays(np.float64, n, elements=st.floats(0, 8)))) + 0.125
    return x, groups, weights if weighted else None


@pytest.mark.parametrize("backend", BACKENDS)
@given(case=cases(min_dim=2))  # one-column tiles are summed pairwise: never fused
def test_a_fused_backend_on_whole_buckets_equals_the_tiles_bit_for_bit(backend, case):
    x, groups, weights = case
    expected = tiles(x, groups, weights)
    totals = grouped_module._checked(groups, weights)[1]
    got = x.copy()
    with patched("whole", backend):
        for span in groups.buckets:
            fused_module.fused_group_mean(got, groups, span, x.shape[1], weights, totals, backend)
    assert_same_bits(got, expected)


@pytest.mark.parametrize("tiling", TILINGS)
@pytest.mark.parametrize("backend", BACKENDS)
@given(case=cases())
def test_group_mean_with_fused_kernels_equals_the_tiles_bit_for_bit(backend, tiling, case):
    x, groups, weights = case
    with patched(tiling):
        expected = group_mean(x.copy(), groups, weights)
    with patched(tiling, backend):
        got = group_mean(x.copy(), groups, weights)
    assert_same_bits(got, expected)


@pytest.mark.parametrize("backend", BACKENDS)
@given(case=cases())
def test_fused_numpy_equals_array_api_strict_bit_for_bit(backend, case):
    x, groups, weights = case
    with patched("whole", backend):
        on_numpy = group_mean(x.copy(), groups, weights)
        on_strict = group_mean(xps.asarray(x), groups, weights)
    assert not isinstance(on_strict, np.ndarray)
    assert_same_bits(on_numpy, np.asarray(on_strict))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_one_column_state_keeps_the_tiles_pairwise_sum(backend):
    """numpy sums a one-column tile of 20 members pairwise, not in member order: for this
    state the two orders differ in the last bit, and group_mean must keep the tiles'."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((20, 1)) * 10.0 ** rng.integers(-3, 4, (20, 1))).astype(np.float32)
    groups = Groups.single(np.arange(20), 20)
    with patched("whole", backend):
        got = group_mean(x.copy(), groups)
    assert_same_bits(got, tiles(x, groups))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fused_kernels_propagate_infinities_and_nans_as_the_tiles(backend):
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    x[1, 0], x[2, 1], x[0, 2], x[3, 3] = np.inf, -np.inf, np.inf, np.nan
    groups = Groups.from_labels(np.array([0, 0, 0, 1, 1, -1, 2, 2, 2, 2]))
    with np.errstate(invalid="ignore"), patched("whole", backend):  # inf − inf
        got = group_mean(x.copy(), groups)
    with np.errstate(invalid="ignore"):
        expected = tiles(x, groups)
    assert np.isnan(expected).any()
    assert np.isinf(expected).any()
    np.testing.assert_array_equal(got, expected)  # NaN where NaN (payloads may differ)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_wide_float32_state_goes_through_the_fused_kernel(backend, monkeypatch):
    if backend == "numpy":
        monkeypatch.setattr(fused_module, "jit_module", lambda: None)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 8192), dtype=np.float32)
    groups = Groups.from_labels(rng.integers(-1, 5, 64), rng.permutation(64))
    span = groups.buckets[0]
    members = int(groups.offsets[span[1]] - groups.offsets[span[0]])
    assert fused_module.backend_for(x, members, 8192) == backend
    assert_same_bits(group_mean(x.copy(), groups), tiles(x, groups))


def test_backend_choice_keeps_the_tiles_where_fusing_would_not_pay_or_apply(monkeypatch):
    monkeypatch.setattr(fused_module, "jit_module", lambda: None)
    wide = np.zeros((8, 8192), dtype=np.float32)
    assert fused_module.backend_for(wide, 8, 8192) == "numpy"
    assert fused_module.backend_for(wide, 8, 1) is None  # one column: pairwise in numpy
    assert fused_module.backend_for(wide.astype(np.float16), 8, 8192) is None
    assert fused_module.backend_for(np.zeros((10**6, 8)), 10**6, 8) is None  # narrow rows
    monkeypatch.setattr(fused_module, "jit_module", lambda: fused_module)  # "importable"
    assert fused_module.backend_for(wide, 8, 8192) == "numba"
    assert fused_module.backend_for(wide[:, ::2], 8, 4096) == "numpy"  # not C-contiguous
    assert fused_module.backend_for(np.zeros((10**6, 8)), 10**6, 8) is None
    assert fused_module.fused_columns([(0, 512), (512, 1024), (1024, 1025)]) == 1024
    assert fused_module.fused_columns([(0, 1), (1, 2)]) == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["moshpit", "random_groups"])
def test_rounds_clock_rounds_are_bit_identical_with_fused_kernels(name, backend):
    """Five rounds with churn (absent peers, ragged groups) on a wide float32 state."""
    n, dim = 96, 1500
    params = {"group_size": 6, "grid_dims": 2} if name == "moshpit" else {"group_size": 7}
    states = []
    for fused in (None, backend):
        cls = get(name)
        rng = np.random.default_rng(11)
        protocol = cls(cls.Params(**params), Context(n, dim, 4, rng))
        state = State(x=np.random.default_rng(5).standard_normal((n, dim), dtype=np.float32))
        protocol.init_state(state)
        presence = np.random.default_rng(7).random((5, n)) > 0.2
        with patched("whole", fused):
            for t in range(5):
                protocol.round(state, presence[t], t)
        states.append(state.x)
    assert_same_bits(states[1], states[0])
