"""Two runs of one scenario compared: the summary, the final vectors and the tables,
integers and vectors bit for bit and floats to a relative tolerance (the groups-alone
tests: instants equal the network clock's to round-off)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest


def assert_runs_agree(got: Any, ref: Any, rtol: float, tables: Sequence[str] | None = None) -> None:
    """``got`` and ``ref`` agree: every summary value but the wall time (floats to
    ``rtol``), the final vectors bit for bit, and ``tables`` (``"metrics"`` and extra
    tables; None: the metrics and every extra table of ``ref``) column by column."""
    for key, value in ref.summary.items():
        if key == "wall_time_s":
            continue
        if isinstance(value, float) and not isinstance(got.summary[key], bool):
            assert got.summary[key] == pytest.approx(value, rel=rtol, abs=0.0), key
        else:
            assert got.summary[key] == value, key
    np.testing.assert_array_equal(got.state.x, ref.state.x)
    names = ["metrics", *ref.extra_tables] if tables is None else list(tables)
    for name in names:
        mine = got.metrics if name == "metrics" else got.extra_tables[name]
        theirs = ref.metrics if name == "metrics" else ref.extra_tables[name]
        assert list(mine.columns) == list(theirs.columns), name
        for column in theirs.columns:
            if theirs[column].dtype.kind == "f":
                np.testing.assert_allclose(
                    mine[column], theirs[column], rtol=rtol, atol=0.0, err_msg=name
                )
            else:
                assert mine[column].tolist() == theirs[column].tolist(), (name, column)
