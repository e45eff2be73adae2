"""sim.engine.recorder.apart: the mean subtracted from a statistics block is a copy half a
page from the block's address (4K aliasing, docs/design.md, stop 37), with the same
values, so the subtraction gives the same bits."""

from __future__ import annotations

import numpy as np
import pytest

from sim.engine.recorder import PAGE, apart


@pytest.mark.parametrize("columns", [1, 7, 1024, 4096])
def test_the_copy_sits_half_a_page_from_the_block_with_the_same_values(columns: int):
    rng = np.random.default_rng(columns)
    block = rng.standard_normal((64, columns))
    mean = block.mean(axis=0)
    moved = apart(mean, block)
    assert (moved.ctypes.data - block.ctypes.data) % PAGE == PAGE // 2
    np.testing.assert_array_equal(moved, mean)
    expected = block - mean
    block -= moved
    np.testing.assert_array_equal(block, expected)
