"""The notebooks run top to bottom on small settings (their parameters cell is replaced)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SMALL = {
    "a2cid2_training.ipynb": (
        'SWEEP = "{root}/scenarios/paper/a2cid2_training.yaml"\n'
        "PEER_COUNTS = [8, 16]\nREPEATS = 1\nMAX_TIME = 30\nWORKERS = 1\n"
        "OUT = None\nRESULTS = None\n"
    ),
    "async_swarm.ipynb": (
        'SWEEP = "{root}/scenarios/async_vs_barrier.yaml"\nPEERS = 16\nDIM = 1024\nMAX_TIME = 20\n'
        "CELL = 1\n"
    ),
    "moshpit_averaging.ipynb": (
        'SWEEP = "{root}/scenarios/paper/moshpit_averaging.yaml"\n'
        "REPEATS = 1\nPEER_COUNTS = [64, 128]\nWORKERS = 1\n"
        'OUT = "{tmp}/out"\n'
    ),
    "moshpit_sgd.ipynb": (
        'SWEEP = "{root}/scenarios/paper/moshpit_sgd_preemptible.yaml"\n'
        'PEERS = 16\nREPEATS = 1\nMAX_TIME = 30\nRATES = ["1/min", "4/min"]\nWORKERS = 1\n'
        "OUT = None\n"
    ),
    "moshpit_vs_ring.ipynb": (
        'SWEEP = "{root}/scenarios/moshpit_vs_ring.yaml"\nPEERS = 16\nDIM = 4096\nMAX_TIME = 60\n'
    ),
    "training.ipynb": (
        'SWEEP = "{root}/scenarios/training_network.yaml"\nPEERS = 8\nMAX_TIME = 10\nREPEATS = 1\n'
        "EXTRA = True\nWORKERS = 1\n"
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL))
def test_notebook_runs_on_small_settings(name, tmp_path):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    params = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "a notebook has exactly one cell tagged 'parameters'"
    params[0].source = SMALL[name].format(root=NOTEBOOKS.parent, tmp=tmp_path)
    NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors


def test_committed_notebooks_have_no_outputs():
    for path in NOTEBOOKS.glob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            assert not cell.get("outputs"), f"{path.name}: strip outputs before committing"
