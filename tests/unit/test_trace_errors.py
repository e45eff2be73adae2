"""Churn traces: every bad input is one line naming ``churn.file``, the line and the value."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from sim.core.errors import ScenarioError
from sim.model.churn import build_schedule, load_trace
from sim.model.churn.trace import TraceError
from sim.model.scenario.churn import TraceChurn

HEADER = "peer,down_s,up_s\n"


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("", ["empty file"]),
        ("peer,down,up\n0,1,2\n", ["line 1", "header peer,down_s,up_s", "peer,down,up"]),
        ("peer,down_s,up_s,extra\n0,1,2,3\n", ["line 1", "peer,down_s,up_s,extra"]),
        (HEADER + "0,1,2\n0,3,4,5\n", ["rows peer,down_s,up_s", "line 3"]),
        (HEADER + "0,1,2\n9,3,4\n", ["line 3", "peer an integer in 0..3", "'9'"]),
        (HEADER + "-1,1,2\n", ["line 2", "0..3", "'-1'"]),
        (HEADER + "1.5,1,2\n", ["line 2", "integer", "'1.5'"]),
        (HEADER + "0,1,2\nabc,1,2\n", ["line 3", "integer", "'abc'"]),
        (HEADER + "0,5,2\n", ["line 2", "down_s < up_s", "down_s=5, up_s=2"]),
        (HEADER + "0,2,2\n", ["line 2", "down_s < up_s", "down_s=2, up_s=2"]),
        (HEADER + "0,-1,2\n", ["line 2", ">= 0", "'-1'"]),
        (HEADER + "0,nan,2\n", ["line 2", "down_s", "'nan'"]),
        (HEADER + "0,inf,inf\n", ["line 2", "finite", "'inf'"]),
        (HEADER + "0,1,NaN\n", ["line 2", "up_s", "'NaN'"]),
        (HEADER + "0,1,\n", ["line 2", "up_s", "''"]),
        (HEADER + "0,1\n", ["line 2", "up_s", "''"]),
        (HEADER + "0,1,2\n\n1,1,2\n", ["line 3", "peer", "''"]),
        (HEADER + "0,1,x\n", ["line 2", "up_s", "'x'"]),
        (HEADER + "1,0,5\n0,0,1\n1,4,6\n", ["line 4", "do not overlap line 2", "down_s=4"]),
        (HEADER + "1,0,inf\n1,7,8\n", ["line 3", "overlap line 2", "up_s=inf"]),
        (HEADER + "2,1,3\n2,1,3\n", ["line 3", "overlap line 2"]),
    ],
)  # fmt: skip
def test_a_bad_trace_is_one_line_naming_churn_file_the_line_and_the_value(
    tmp_path, text, fragments
):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_trace(path, 4)
    message = str(info.value)
    assert message.startswith(f"churn.file: {path}"), message
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    assert info.value.key == "churn.file"


def test_a_missing_trace_says_it_cannot_be_read(tmp_path):
    with pytest.raises(TraceError) as info:
        load_trace(tmp_path / "nope.csv", 4)
    assert str(info.value) == (
        f"churn.file: {tmp_path / 'nope.csv'}: expected a readable CSV file, "
        "got No such file or directory"
    )


def test_a_trace_that_is_not_text_is_malformed(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_bytes(b"peer,down_s,up_s\n\xff\xfe\x00,1,2\n")
    with pytest.raises(TraceError) as info:
        load_trace(path, 4)
    assert str(info.value).startswith(f"churn.file: {path}: expected ")
    assert "\n" not in str(info.value)


def test_building_a_trace_schedule_reports_its_errors(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "7,1,2\n")
    with pytest.raises(ScenarioError, match=r"^churn\.file: .* line 2: expected peer"):
        build_schedule(TraceChurn(model="trace", file=str(path)), 4, np.random.default_rng(0))


def test_trace_errors_survive_pickling(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "0,3,1\n")
    with pytest.raises(TraceError) as info:
        load_trace(path, 4)
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value)
    assert again.key == "churn.file"


def test_good_traces_load_sorted_and_merged(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(" peer , down_s , up_s \n3, 2.5, inf\n0,1,2\n0,0,1\n0,5,6\n")
    trace = load_trace(path, 4)
    assert trace.peer.tolist() == [0, 0, 3]
    assert trace.down_s.tolist() == [0.0, 5.0, 2.5]
    assert trace.up_s.tolist() == [2.0, 6.0, float("inf")]


def test_a_header_only_trace_has_no_absences(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(HEADER)
    trace = load_trace(path, 4)
    assert trace.peer.size == 0
    assert list(build_schedule(TraceChurn(model="trace", file=str(path)), 4, None)) == []
