"""Broken side files: edge lists (``protocol.file``), initial vectors (``vector.file``) and
churn traces (``churn.file``) give one line naming the key, the file, the line and what
is wrong."""

from __future__ import annotations

import io

import numpy as np
import pytest
from typer.testing import CliRunner

from protocols.gossip import GossipParams
from protocols.graphs import EdgeListError, build_graph, read_edge_list
from sim.cli import app
from sim.core.errors import ScenarioError
from sim.model.churn import load_trace
from sim.model.scenario.models import Vector
from sim.model.vectors import initial_vectors


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (b"0 1\n5\n", ["line 2", "an edge 'u v' (two peers)", "'5'"]),
        (b"0 1\n1 4\n", ["line 2", "peers in 0 \u2026 3", "'4'"]),
        (b"# c\n\n0 -1\n", ["line 3", "'-1'"]),
        (b"0 x\n", ["line 1", "'x'"]),
        (b"1.5 2\n", ["line 1", "'1.5'"]),
        (b"0 \xd9\xa3\n", ["line 1", "'\u0663'"]),
        (b"0 1\n\xff\xfe\n", ["UTF-8 text", "not UTF-8"]),
    ],
)
def test_a_bad_edge_list_names_protocol_file_and_the_line(tmp_path, text, fragments):
    path = tmp_path / "edges.txt"
    path.write_bytes(text)
    with pytest.raises(EdgeListError) as info:
        read_edge_list(path, 4)
    message = str(info.value)
    assert message.startswith(f"protocol.file: {path}"), message
    for fragment in fragments:
        assert fragment in message, message


def test_edge_lists_keep_their_order_comments_and_extra_columns(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("# ring\n2 3 {'w': 1}\n0 1  # first\n\n1 2\n3 3\n")
    assert read_edge_list(path, 4) == [(2, 3), (0, 1), (1, 2), (3, 3)]
    graph = build_graph(GossipParams(topology="file", file=str(path)), 4, np.random.default_rng(0))
    assert sorted(tuple(sorted(edge)) for edge in graph.edges) == [(0, 1), (1, 2), (2, 3)]


def test_a_missing_edge_list_says_it_cannot_be_read(tmp_path):
    with pytest.raises(ScenarioError, match=r"^protocol\.file: .*: expected a readable"):
        read_edge_list(tmp_path / "nope.txt", 4)


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=array.dtype == object)
    return buffer.getvalue()


def npz() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, x=np.ones((4, 2)))
    return buffer.getvalue()


ONES = np.ones((4, 2))
WITH_NAN = ONES.copy()
WITH_NAN[2, 1] = np.nan


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        (npy(np.ones((3, 2))), ["shape (4, 2)", "got shape (3, 2) of float64"]),
        (npy(np.ones(8)), ["got shape (8,) of float64"]),
        (npy(WITH_NAN), ["finite numbers only", "nan at row 2, column 1"]),
        (npy(ONES.astype(complex)), ["real numbers", "complex128"]),
        (npy(ONES.astype(bool)), ["real numbers", "of bool"]),
        (npy(ONES * 1e300), ["within \u00b13.40282e+38 (vector.dtype float32)", "1e+300 at row 0"]),
        (npy(np.array([[None, None]] * 4, dtype=object)), ["not a .npy array"]),
        (npz(), ["a .npz archive"]),
        (b"0 1\n2 3\n", ["not a .npy array"]),
        (b"", ["not a .npy array"]),
        (npy(ONES)[:-5], ["not a .npy array"]),
    ],
)
def test_a_bad_vector_file_names_vector_file_and_what_is_wrong(tmp_path, data, fragments):
    path = tmp_path / "init.npy"
    path.write_bytes(data)
    vector = Vector(dim=2, dtype="float32", init="file", file=str(path))
    with pytest.raises(ScenarioError) as info:
        initial_vectors(vector, 4, np.random.default_rng(0))
    message = str(info.value)
    assert message.startswith(f"vector.file: {path}: expected "), message
    for fragment in fragments:
        assert fragment in message, message


def test_integer_vector_files_are_read_as_numbers(tmp_path):
    path = tmp_path / "init.npy"
    path.write_bytes(npy(np.arange(8).reshape(4, 2)))
    x = initial_vectors(Vector(dim=2, init="file", file=str(path)), 4, np.random.default_rng(0))
    assert x.dtype == np.float64
    assert x.tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_a_trace_row_longer_than_the_header_is_an_error_not_a_warning(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("peer,down_s,up_s\n0,1,2,3\n")
    with pytest.raises(ScenarioError, match="a row longer than the header"):
        load_trace(path, 4)
    path.write_bytes(b"peer,down_s,up_s\n0,1,\xe9\n")
    with pytest.raises(ScenarioError, match="expected UTF-8 text, got a byte 0xe9"):
        load_trace(path, 4)


SIDE_FILES = [
    ("vector: {dim: 2, init: file, file: init.npy}", "init.npy", npy(np.ones((3, 2)))),
    ("protocol: {name: gossip, topology: file, file: edges.txt}", "edges.txt", b"0 9\n"),
    ("churn: {model: trace, file: trace.csv}", "trace.csv", b"peer,down_s,up_s\n0,2,1\n"),
]


@pytest.mark.parametrize(("section", "file", "data"), SIDE_FILES)
def test_avsim_run_on_a_broken_side_file_is_one_line(tmp_path, section, file, data):
    (tmp_path / file).write_bytes(data)
    scenario = tmp_path / "s.yaml"
    protocol = "" if "protocol" in section else "protocol: {name: random_groups, group_size: 2}\n"
    scenario.write_text(
        f"name: t\npeers: {{count: 4}}\nstop: {{max_rounds: 2}}\n{protocol}{section}\n"
    )
    result = CliRunner().invoke(app, ["run", str(scenario), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert len(result.stderr.splitlines()) == 1
    key = section.split(":")[0]
    assert result.stderr.startswith(f"error: {key}.file: {tmp_path / file}"), result.stderr
