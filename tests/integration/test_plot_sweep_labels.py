"""sweep.png names a grid cell whose value is a mapping (or a list) the way the sweep's
table does, ``churn=(model=bernoulli,p=0.2)``, not with the JSON text ``runs.parquet``
stores it as."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib.figure import Figure

import sim
from sim.output.plots import sweep_figure
from sim.output.sweeps.labels import cell_value, from_stored, json_text

SWEEP: dict[str, Any] = {
    "name": "mapping-grid",
    "scenario": {
        "name": "tiny",
        "peers": {"count": 8},
        "vector": {"dim": 4},
        "protocol": {"name": "random_groups", "group_size": 4},
        "stop": {"max_rounds": 6},
    },
    "repeats": 2,
    "grid": {
        "churn": [{"model": "none"}, {"model": "bernoulli", "p": 0.2}],
        "peers.count": [8, 12],
    },
    "report": ["bytes_sent"],
}
CELLS = [
    f"churn={churn}, peers.count={count}"
    for churn in ("(model=none)", "(model=bernoulli,p=0.2)")
    for count in (8, 12)
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "out"
    sim.sweep(SWEEP, out=out, workers=1, figure=False)
    return out


@pytest.fixture(scope="module")
def figure(folder: Path) -> Figure:
    runs = pd.read_parquet(folder / "runs.parquet")
    metrics = pd.read_parquet(folder / "metrics.parquet")
    return sweep_figure(runs, metrics, list(SWEEP["grid"]), SWEEP["report"], "t")


def test_the_folder_stores_the_mapping_as_json(folder: Path):
    runs = pd.read_parquet(folder / "runs.parquet")
    assert json_text({"model": "bernoulli", "p": 0.2}) in set(runs["churn"])


def test_row_titles_read_as_the_sweep_table(figure: Figure, folder: Path):
    titles = [ax.get_title(loc="left") for ax in figure.axes if ax.get_title(loc="left")]
    assert titles == CELLS
    table = (folder / "table.md").read_text()
    assert "| model=bernoulli,p=0.2 | 8 |" in table  # the table's spelling of the same cell


def test_bar_groups_read_as_the_sweep_table(figure: Figure):
    bars = next(ax for ax in figure.axes if ax.get_title() == "bytes_sent")
    labels = [t.get_text() for t in bars.get_xticklabels()]
    assert labels == [cell.replace(", ", "\n") for cell in CELLS]


def test_no_text_of_the_figure_is_json(figure: Figure):
    texts = [t.get_text() for ax in figure.axes for t in ax.get_xticklabels() + ax.texts]
    texts += [ax.get_title(loc) for ax in figure.axes for loc in ("left", "center")]
    assert not [text for text in texts if '{"' in text or "[{" in text]


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ('{"model":"exponential","mtbf":"10 min"}', "(model=exponential,mtbf=10 min)"),
        ("[1,2]", "[1,2]"),
        ("{not json", "{not json"),
        ("10 min", "10 min"),
    ],
)
def test_stored_values_read_back(stored: str, shown: str):
    value = from_stored(stored)
    assert (cell_value(value) if isinstance(value, dict | list) else value) == shown
