"""The drift statistic (``protocols._common.shift_drift``) is numpy's own sum of squares,
not BLAS: a BLAS call leaves its threads spinning for ~0.1 s of another core (a third
of a Moshpit network round's CPU at 1024 peers), and its order of additions depends on
the CPU's kernel."""

from __future__ import annotations

import math

import numpy as np
import pytest

from protocols._common import shift_drift


def test_shift_drift_is_the_norm_per_peer_and_coordinate():
    shift = np.random.default_rng(0).standard_normal(65536)
    expected = float(np.linalg.norm(shift)) / 8 / math.sqrt(shift.size)
    assert shift_drift(shift, 8) == pytest.approx(expected, rel=1e-12)
    assert shift_drift(np.zeros(16), 3) == 0.0
    assert shift_drift(np.full(4, 2.0), 2) == 1.0  # ‖(2, 2, 2, 2)‖ = 4; 4 / 2 / 2


def test_shift_drift_calls_no_blas(monkeypatch):
    def blas(*args, **kwargs):
        raise AssertionError("shift_drift called a BLAS routine")

    for name in ("dot", "vdot", "inner", "matmul"):
        monkeypatch.setattr(np, name, blas)
    monkeypatch.setattr(np.linalg, "norm", blas)
    assert shift_drift(np.arange(4.0), 1) == pytest.approx(math.sqrt(14) / 2)
