"""Each example scenario reproduces its committed summary (``make golden`` regenerates)."""

from __future__ import annotations

import json

import pytest

from tests.golden.regenerate import GOLDEN_DIR, golden_summary, scenario_files


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_scenario_reproduces_its_golden_summary(path):
    golden_file = GOLDEN_DIR / f"{path.stem}.json"
    assert golden_file.exists(), f"no golden summary for {path.name}: run `make golden`"
    expected = json.loads(golden_file.read_text())
    got = golden_summary(path)
    assert set(got) == set(expected)
    for key, value in expected.items():
        if isinstance(value, float):
            # float fields: same to 1e-9 relative (SIMD summation order may differ by machine)
            assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-300), key
        else:
            assert got[key] == value, key
