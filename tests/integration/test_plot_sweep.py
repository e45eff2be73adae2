"""sweep.png from a real sweep folder, the bar charts' spread and "not reached" marks,
and ``avsim plot`` on sweep folders (with ``--out``, ``--label`` and their errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.patches as mpatches
import pandas as pd
import pytest
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from typer.testing import CliRunner

import sim
from sim.cli import app
from sim.output.plots import plot_sweep, report_bars, sweep_figure
from sim.output.plots.folders import compare_figure

SWEEP: dict[str, Any] = {
    "name": "tiny-sweep",
    "scenario": {
        "name": "tiny",
        "peers": {"count": 8},
        "churn": {"model": "bernoulli", "p": 0.2},
        "vector": {"dim": 4},
        "protocol": {"name": "random_groups", "group_size": 4},
        "stop": {"max_rounds": 12, "target_var": 1e-9},
    },
    "repeats": 2,
    "cases": [
        {"protocol": {"name": "random_groups", "group_size": 4}},
        {"protocol": {"name": "gossip", "topology": "ring"}},
    ],
    "grid": {"peers.count": [8, 16]},
    "report": ["rounds_to_target", "bytes_sent"],
}


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sweep") / "out"
    sim.sweep(SWEEP, out=folder, workers=1)
    return folder


def figure_from(folder: Path) -> Figure:
    runs = pd.read_parquet(folder / "runs.parquet")
    metrics = pd.read_parquet(folder / "metrics.parquet")
    return sweep_figure(runs, metrics, ["peers.count"], SWEEP["report"], "tiny")


def texts(figure: Figure) -> list[str]:
    found = [t.get_text() for ax in figure.axes for t in ax.texts]
    found += [t.get_text() for legend in figure.legends for t in legend.get_texts()]
    return found + [ax.get_title(loc) for ax in figure.axes for loc in ("left", "center")]


def test_a_sweep_writes_its_figure(sweep_dir):
    assert (sweep_dir / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_sweep_writes_where_asked(sweep_dir, tmp_path):
    written = plot_sweep(sweep_dir, tmp_path / "figure.png")
    assert written == tmp_path / "figure.png"
    assert written.read_bytes()[:4] == b"\x89PNG"


def test_the_sweep_figure_has_a_row_per_grid_cell_and_a_bar_chart_per_field(sweep_dir):
    figure = figure_from(sweep_dir)
    axes = [ax for ax in figure.axes if ax.get_visible()]
    assert axes[0].get_xlabel() == "rounds"
    assert axes[1].get_xlabel().startswith("bytes sent")
    assert len(axes) == 2 * 2 + 2  # 2 cells × (rounds, bytes), then 2 bar charts
    shown = texts(figure)
    assert "peers.count=8" in shown
    assert "peers.count=16" in shown
    assert {"rounds_to_target", "bytes_sent"} <= set(shown)
    assert "random_groups" in shown
    assert "var_alive (present peers)" in shown


def test_a_case_that_never_reaches_the_target_is_named_not_averaged(sweep_dir):
    runs = pd.read_parquet(sweep_dir / "runs.parquet")
    gossip = runs["case"].str.startswith("gossip")
    assert runs.loc[gossip, "rounds_to_target"].isna().all()  # the premise of this test
    figure = figure_from(sweep_dir)
    notes = [t for t in texts(figure) if t.startswith("not reached in any run")]
    assert len(notes) == 1
    assert "gossip" in notes[0]


def test_bars_show_mean_spread_partial_counts_and_hatched_not_reached():
    runs = pd.DataFrame(
        {
            "case": ["a", "a", "b", "b", "a", "a", "b", "b"],
            "n": [1, 1, 1, 1, 2, 2, 2, 2],
            "rounds_to_target": [4.0, 6.0, 10.0, None, 5.0, 5.0, None, None],
        }
    )
    figure = Figure()
    ax = figure.subplots()
    never = report_bars(ax, runs, "rounds_to_target", groups=["n"])
    assert never == []
    bars = [p for p in ax.patches if isinstance(p, mpatches.Rectangle) and p.get_fill()]
    assert sorted(round(b.get_height(), 6) for b in bars) == [5.0, 5.0, 10.0]
    hatched = [p for p in ax.patches if p.get_hatch()]
    assert len(hatched) == 1  # case b at n=2: no run reached the target
    assert "1/2" in [t.get_text() for t in ax.texts]  # case b at n=1: one of two runs
    first = next(c for c in ax.containers if isinstance(c, BarContainer))  # case a, n=1
    whiskers = first.errorbar.lines[2][0].get_segments()
    assert [round(float(s[0][1]), 6) for s in whiskers] == [4.0]
    assert [round(float(s[1][1]), 6) for s in whiskers] == [6.0]


def test_bars_leave_a_case_without_any_value_out_of_the_legend():
    runs = pd.DataFrame({"case": ["a", "b"], "rounds_to_target": [3.0, None]})
    figure = Figure()
    ax = figure.subplots()
    assert report_bars(ax, runs, "rounds_to_target") == ["b"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a"]


# -- avsim plot ---------------------------------------------------------------------------


def invoke(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line_error(result, needle: str) -> None:
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1
    assert needle in result.stderr


def test_avsim_plot_draws_a_sweep_folder(sweep_dir, tmp_path):
    (sweep_dir / "sweep.png").unlink()
    result = invoke("plot", sweep_dir)
    assert result.exit_code == 0, result.stderr
    assert (sweep_dir / "sweep.png").is_file()
    result = invoke("plot", sweep_dir, "--out", tmp_path / "s.svg")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "s.svg").read_text().lstrip().startswith("<?xml")


@pytest.fixture(scope="module")
def result_dirs(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("results")
    scenario = sim.scenario_from_mapping(SWEEP["scenario"])
    folders = []
    for seed in (0, 1):
        folder = root / f"{seed:04d}"
        sim.write_result(sim.run(scenario, seed=seed), folder)
        folders.append(folder)
    return folders


def test_labels_replace_folder_names_in_the_legend(result_dirs):
    figure = compare_figure(result_dirs, ["first", "second"])
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend[:2] == ["first", "second"]
    result = invoke("plot", *result_dirs, "--label", "first", "--label", "second",
                    "--out", result_dirs[0].parent / "cmp.png")  # fmt: skip
    assert result.exit_code == 0, result.stderr


def test_a_label_per_dir_is_required(result_dirs, tmp_path):
    result = invoke("plot", *result_dirs, "--label", "only one", "--out", tmp_path / "x.png")
    one_line_error(result, "--label")


def test_out_with_a_sweep_among_several_folders_is_refused(sweep_dir, result_dirs, tmp_path):
    result = invoke("plot", sweep_dir, result_dirs[0], "--out", tmp_path / "x.png")
    one_line_error(result, "sweep folder")


def test_a_case_with_a_long_derived_label_keeps_its_axes(sweep_dir):
    """A case's derived label lists every key it changes and can run to hundreds of
    characters (found by the input fuzzer: ``peers.classes.0.download.high=1e30``). On
    one line the legend took the figure's whole width, and constrained layout warned
    that the axes collapsed to zero; the label is wrapped instead."""
    import warnings

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    runs = pd.read_parquet(sweep_dir / "runs.parquet")
    metrics = pd.read_parquet(sweep_dir / "metrics.parquet")
    long = "peers.classes=[(fraction=1)], " + ", ".join(
        f"peers.classes.0.download.key{k}=1000000000000000000000000000000" for k in range(4)
    )
    runs["case"] = runs["case"].replace({"random_groups": long})
    metrics["case"] = metrics["case"].replace({"random_groups": long})
    figure = sweep_figure(runs, metrics, ["peers.count"], SWEEP["report"], "tiny")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FigureCanvasAgg(figure).draw()
    lines = [t.get_text() for t in figure.legends[0].get_texts()]
    wrapped = next(t for t in lines if t.startswith("peers.classes"))
    assert "".join(wrapped.split()) == "".join(long.split())  # the same text, wrapped
    assert max(len(line) for line in wrapped.splitlines()) <= 40
    assert all(ax.get_position().width > 0 for ax in figure.axes if ax.get_visible())
