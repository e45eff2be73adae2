"""A sweep table cell ``mean [min–max]`` writes its three numbers in one notation with
the same significant digits (sim.output.sweeps.table.format_numbers); whole counts stay
exact."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from sim.output.sweeps.table import format_number, spread_cell

CELL = re.compile(r"^(\S+) \[(\S+)–(\S+)\]$")


def parts(cell: str) -> tuple[str, str, str]:
    match = CELL.match(cell)
    assert match, cell
    return match.group(1), match.group(2), match.group(3)


def notation(text: str) -> tuple[str, int]:
    """(``e`` or ``f``, digits after the point of the mantissa)."""
    mantissa, _, exponent = text.partition("e")
    decimals = len(mantissa.partition(".")[2])
    return ("e" if exponent else "f"), decimals


def test_the_reported_byte_counts_share_scientific_notation():
    cell = spread_cell(pd.Series([1031798784.0, 1.41e9, 2.8e9 + 1]))
    assert cell == "1.747e+09 [1.032e+09–2.800e+09]"


@pytest.mark.parametrize(
    "values",
    [
        [1031798784.0, 1.41e9, 2.8e9 + 1],  # bytes: integer ends, fractional mean
        [8388608.0, 8617984.0, 8488960.0],
        [4.0, 5.0],  # rounds: the mean 4.5 is not whole
        [24.1, 26.35, 25.2],
        [0.000182, 0.0006146, 0.0004125],
        [3.2e-9, 1.1e-10, 7e-12],
        [0.5, 0.9, 1234.5],
    ],
)
def test_mean_and_range_use_one_notation_and_precision(values):
    mean, low, high = parts(spread_cell(pd.Series(values)))
    assert notation(mean) == notation(low) == notation(high)
    for text, value in zip((low, high), (min(values), max(values)), strict=True):
        assert float(text) == pytest.approx(value, rel=1e-3, abs=10 ** -notation(text)[1])


def test_whole_counts_stay_exact():
    assert spread_cell(pd.Series([7.0, 51.0, 20.0])) == "26 [7–51]"
    assert spread_cell(pd.Series([8388608, 8388608])) == "8388608"
    assert spread_cell(pd.Series([4, 5])) == "4.5 [4.0–5.0]"


def test_a_single_number_reads_like_four_significant_digits():
    for value in (25.2, 0.000123, 12345.6, 3.2145e-9, 0.1, -3.5):
        assert format_number(value) == f"{value:.4g}"
    assert format_number(1031798784.0) == "1031798784"
    assert format_number(float("inf")) == "inf"
