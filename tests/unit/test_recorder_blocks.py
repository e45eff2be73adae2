"""The recorder's sample (``sim.engine.recorder.statistics``) restricted to the peers that
exist: the same statistics as on those rows alone, and blocks of those rows only (a run
whose joining peers do not exist yet does not cast every row of the state)."""

from __future__ import annotations

import tracemalloc

import numpy as np

from sim.engine.recorder import BLOCK_ELEMENTS, statistics


def state(rows: int, dim: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((rows, dim), dtype=np.float32)


def test_a_restricted_sample_is_that_of_the_existing_rows_alone():
    x = state(300, 70)
    exists = np.zeros(300, dtype=bool)
    exists[::7] = True
    present = np.ones(300, dtype=bool)
    present[::21] = False  # some existing peers are away
    mean0 = np.linspace(-1.0, 1.0, 70)
    restricted = statistics(x, present, mean0, exists)
    alone = statistics(x[exists], present[exists], mean0)
    for field in ("var", "err_init", "var_alive", "mean_drift", "squares", "alive_squares"):
        assert getattr(restricted, field) == getattr(alone, field), field
    assert (restricted.n, restricted.n_alive) == (alone.n, alone.n_alive)
    np.testing.assert_array_equal(restricted.mean, alone.mean)


def test_a_restricted_sample_converts_only_the_existing_rows():
    # 64 of 4096 peers exist: a block is 64 rows of BLOCK_ELEMENTS / 64 columns (here the
    # whole 4096), 2 MiB in float64, where every row's columns would take 128 MiB
    x = state(4096, 4096)
    exists = np.zeros(4096, dtype=bool)
    exists[:64] = True
    present = exists.copy()
    mean0 = np.zeros(4096)
    tracemalloc.start()
    try:
        statistics(x, present, mean0, exists)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert BLOCK_ELEMENTS // 64 >= 4096  # one block holds every column of the 64 rows
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.1f} MiB"
