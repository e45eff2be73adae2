"""The benchmark report (``python -m bench report``) and the scaling bench's pieces: the
log-log fit, the table of targets met, and a size that runs past its limit reported as
such (not skipped). Nothing here is timed."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load(name: str, file: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / file)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scaling() -> ModuleType:
    return load("bench_scaling_under_test", "bench_scaling.py")


@pytest.fixture(scope="module")
def main() -> ModuleType:
    return load("bench_main_under_test", "__main__.py")


@pytest.mark.parametrize("power", [0.5, 1.0, 1.7])
def test_the_exponent_is_the_slope_of_a_power_law(scaling, power):
    n = [256.0, 512.0, 1024.0, 4096.0]
    assert scaling.exponent(n, [3e-4 * x**power for x in n]) == pytest.approx(power)


def test_the_exponent_leaves_out_sizes_that_did_not_run(scaling):
    n = [1e3, 1e4, 1e5]
    assert scaling.exponent(n, [1.0, 10.0, math.nan]) == pytest.approx(1.0)
    assert math.isnan(scaling.exponent(n, [1.0, math.nan, math.nan]))


def test_a_size_past_its_limit_is_reported_not_skipped(scaling):
    series = scaling.Series("gossip", (1000,), 5.0)
    point = scaling.measure(series, 1000, limit_s=0.01)
    assert point.error == "ran past 0.01 s"
    assert math.isnan(point.wall)
    lines = scaling.figures([(series, [point])])
    assert lines[0][0] == "scaling gossip N=1000"
    assert lines[0][3] == "ran past 0.01 s"
    assert "ran past" in scaling.table([(series, [point])])


def test_async_scaling_fits_wall_against_flows_and_against_all_messages(scaling):
    # wall grows as N^1.5 and flows as N, but flows + control messages as N^1.5: the
    # exponent against all messages is 1.0, against flows 1.5
    series = scaling.Series("async", (256, 1024, 4096), 10.0)
    points = []
    for n in series.sizes:
        flows = 10.0 * n
        control = 10.0 * n**1.5 - flows
        wall = 1e-5 * n**1.5
        points.append(scaling.Point(n, wall, wall / flows, wall, flows, 1.0, 1.0, control=control))
    lines = {name: value for name, value, *_ in scaling.figures([(series, points)])}
    assert lines["scaling async exponent (wall vs work)"] == pytest.approx(1.5)
    assert lines["scaling async exponent (wall vs all messages)"] == pytest.approx(1.0)
    assert "| async | 1.500 | 1.500 | 1.500 | 1.000 |" in scaling.table([(series, points)])


def test_the_report_says_which_targets_are_met(main):
    figures = [
        {"bench": "gossip", "figure": "E1 / SimPy timeouts", "value": 0.45},
        {"bench": "gossip", "figure": "a2cid2 network / SimPy timeouts", "value": 0.05},
        {"bench": "moshpit_net", "figure": "M1 lognormal / equal (CPU time)", "value": 1.2},
        {"bench": "async", "figure": "A1 async/barrier", "value": 1.6},
        {"bench": "network", "figure": "N1 avsim / SimGrid", "value": math.nan},
    ]
    rows = {row["id"]: row for row in main.report(figures)}
    assert [row["id"] for row in main.report(figures)] == [key for key, *_ in main.REPORT]
    assert rows["E1"]["met"] is True
    assert rows["a2cid2"]["met"] is False
    assert rows["M1"]["met"] is True  # <= 1.3
    assert rows["A1"]["met"] is False  # <= 1.5
    assert rows["N1"]["met"] is None  # not measured (SimGrid missing)
    assert rows["R1"]["met"] is None
    assert math.isnan(rows["R1"]["value"])
    assert rows["M1"]["target"] == "<= 1.3"


def test_every_report_figure_names_a_benchmark_module(main):
    known = {p.stem.removeprefix("bench_") for p in (ROOT / "bench").glob("bench_*.py")}
    assert {bench for _, bench, *_ in main.REPORT} <= known
