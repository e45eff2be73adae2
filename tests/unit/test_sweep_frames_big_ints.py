"""Every value a valid run accepts can be stored in the sweep's tables: a whole number
outside int64 (``delay: 1e30`` written as a YAML integer) makes its column of numbers
float64, every value converted alike; in a column of mixed values it is exact text
(sim.output.sweeps.frames.arrow_safe)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sim.output.run_folder import write_parquet
from sim.output.sweeps import sweep
from sim.output.sweeps.frames import arrow_safe

HUGE = 10**30
SPEC: dict[str, Any] = {
    "name": "big",
    "scenario": {
        "name": "big",
        "peers": {
            "count": 8,
            "classes": [{"name": "a", "fraction": 0.5}, {"name": "b", "fraction": 0.5}],
        },
        "vector": {"dim": 2},
        "protocol": {"name": "random_groups", "group_size": 4},
        "stop": {"max_rounds": 2},
    },
    "repeats": 1,
    "cases": [
        {"label": "huge", "peers.classes.0.delay": HUGE},
        {"label": "small", "peers.classes.0.delay": 1},
    ],
}


def stored(frame: pd.DataFrame, tmp_path: Path) -> pd.DataFrame:
    path = tmp_path / "t.parquet"
    write_parquet(path, arrow_safe(frame))
    return pd.read_parquet(path)


def test_a_sweep_case_with_an_integer_beyond_int64_is_written(tmp_path):
    sweep(SPEC, out=tmp_path / "out", workers=1, figure=False)
    runs = pd.read_parquet(tmp_path / "out" / "runs.parquet")
    column = runs["peers.classes.0.delay"]
    assert column.dtype == "float64"
    assert column.tolist() == [1e30, 1.0]


@pytest.mark.parametrize("huge", [HUGE, -HUGE, 2**63, -(2**63) - 1])
def test_a_column_of_numbers_becomes_float64_as_a_whole(tmp_path, huge):
    frame = pd.DataFrame({"x": [huge, 1, None, 2.5]}, dtype=object)
    back = stored(frame, tmp_path)
    assert back["x"].dtype == "float64"
    assert back["x"].tolist()[:2] == [float(huge), 1.0]
    assert back["x"].isna().tolist() == [False, False, True, False]


def test_int64_numbers_stay_integers(tmp_path):
    frame = pd.DataFrame({"x": [2**63 - 1, -(2**63), 3]}, dtype=object)
    assert stored(frame, tmp_path)["x"].tolist() == [2**63 - 1, -(2**63), 3]


def test_mixed_and_nested_values_keep_the_exact_number_as_text(tmp_path):
    frame = pd.DataFrame(
        {"mixed": [HUGE, "1 s"], "nested": [[HUGE, 1], [2]], "mapping": [{"d": HUGE}, None]},
        dtype=object,
    )
    back = stored(frame, tmp_path)
    assert back["mixed"].tolist() == [str(HUGE), "1 s"]
    assert json.loads(back["nested"][0]) == [HUGE, 1]
    assert json.loads(back["mapping"][0]) == {"d": HUGE}
