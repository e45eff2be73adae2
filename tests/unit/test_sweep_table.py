"""The sweep table: mean with its min–max range, compact cells, which fields get a
speed-up, and the Markdown text printed when stdout is not a terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.core.errors import ScenarioError
from sim.output.sweeps import sweep, sweep_from_mapping
from sim.output.sweeps.table import spread_cell, sweep_table

BASE: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 8},
    "vector": {"dim": 2},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 6},
}


def test_a_cell_is_the_mean_then_the_range_over_the_repeats():
    assert spread_cell(pd.Series([7.0, 51.0, 20.0])) == "26 [7–51]"
    assert spread_cell(pd.Series([3, 3])) == "3"
    assert spread_cell(pd.Series([2.0, None, 4.0])) == "3 [2–4] (2/3)"
    assert spread_cell(pd.Series([None, None])) == "never (0/2)"


def test_mapping_grid_values_read_compactly_and_rows_stay_apart():
    churn = [{"model": "none"}, {"model": "exponential", "mtbf": "10 min"}]
    runs = pd.DataFrame(
        {"churn": [churn[0], churn[0], churn[1]], "case": ["a", "a", "a"], "x": [1, 3, 5]},
        dtype=object,
    )
    headers, rows = sweep_table(runs, ["churn", "case"], ["x"])
    assert headers == ["churn", "case", "x"]
    assert rows == [["model=none", "a", "2 [1–3]"], ["model=exponential,mtbf=10 min", "a", "5"]]


def runs_of_two_cases() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "case": ["base", "base", "fast", "fast"],
            "time_to_target_s": [10.0, 14.0, 4.0, 8.0],
            "bytes_sent": [100, 100, 300, 300],
        }
    )


def test_speed_up_columns_only_for_the_fields_asked():
    report = ["time_to_target_s", "bytes_sent"]
    headers, rows = sweep_table(runs_of_two_cases(), ["case"], report, "base", ["time_to_target_s"])
    assert headers == ["case", *report, "time_to_target_s speed-up"]
    assert rows[1] == ["fast", "6 [4–8]", "300", "2"]


def spec(**changes: Any) -> dict[str, Any]:
    cases = [{"label": "rg4"}, {"label": "ar", "protocol": {"name": "all_reduce"}}]
    data = {"name": "s", "scenario": BASE, "cases": cases, "baseline": 0}
    data["report"] = ["rounds_to_target", "time_to_target_s", "bytes_sent", "rounds"]
    return data | changes


def test_by_default_only_round_and_time_to_target_fields_get_a_speed_up():
    assert sweep_from_mapping(spec()).spec.speedup_fields() == [
        "rounds_to_target",
        "time_to_target_s",
    ]
    assert sweep_from_mapping(spec(speedup=["bytes_sent"])).spec.speedup_fields() == ["bytes_sent"]
    assert sweep_from_mapping(spec(speedup=[])).spec.speedup_fields() == []
    assert sweep_from_mapping(spec(baseline=None)).spec.speedup_fields() == []


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"speedup": ["messages"]}, "speedup[0]"),
        ({"speedup": ["rounds"], "baseline": None}, "speedup"),
        ({"speedup": "rounds"}, "speedup"),
    ],
)
def test_bad_speedup_entries_name_the_key(changes: dict[str, Any], key: str):
    with pytest.raises(ScenarioError) as caught:
        sweep_from_mapping(spec(**changes))
    assert caught.value.key == key


def test_a_sweeps_table_has_speed_ups_for_time_fields_only():
    headers, rows = sweep(spec(), workers=1).table
    assert headers == [
        "case", "rounds_to_target", "time_to_target_s", "bytes_sent", "rounds",
        "rounds_to_target speed-up", "time_to_target_s speed-up",
    ]  # fmt: skip
    assert [row[0] for row in rows] == ["rg4", "ar"]


def test_without_a_terminal_the_cli_prints_table_md_as_it_is(tmp_path: Path):
    (tmp_path / "sweep.yaml").write_text(
        "name: s\nscenario: {peers: {count: 8}, protocol: {name: all_reduce}}\n"
        "cases: [{label: ar}]\ngrid:\n  churn: [{model: none}, {model: bernoulli, p: 0.1}]\n"
        "report: [final_var, rounds]\n"
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["sweep", str(tmp_path / "sweep.yaml"), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    text = (out / "table.md").read_text()
    assert result.stdout.startswith(text)
    assert "| model=bernoulli,p=0.1 | ar |" in text
