"""Sweep labels: derived from what a case changes, explicit `label:`, safe folder names."""

from __future__ import annotations

from typing import Any

import pytest

from sim.core.errors import ScenarioError
from sim.output.sweeps import sweep_from_mapping
from sim.output.sweeps.labels import case_label, case_labels, cell_text, run_dir_names, show
from sim.output.sweeps.plan import expand

BASE: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 8},
    "churn": {"model": "bernoulli", "p": 0.0},
    "protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 2, "load_balance": True},
    "stop": {"max_rounds": 3},
}


def test_a_case_equal_to_the_base_protocol_is_named_by_the_protocol_alone():
    same = {"protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 2, "load_balance": True}}
    other = {"protocol": {"name": "moshpit", "group_size": 4, "load_balance": False}}
    assert case_labels([same, other], BASE) == ["moshpit", "moshpit(load_balance=false)"]


def test_a_case_switching_protocol_lists_every_parameter_it_writes():
    case = {"protocol": {"name": "random_groups", "group_size": 4}}
    assert case_label(case, BASE) == "random_groups(group_size=4)"


def test_dotted_protocol_keys_and_other_keys_show_only_what_differs():
    assert case_label({"protocol.group_size": 2}, BASE) == "moshpit(group_size=2)"
    assert case_label({"churn.p": 0.0, "peers.count": 16}, BASE) == "peers.count=16"
    assert case_label({"churn.p": 0.0}, BASE) == "base"


def test_mapping_values_read_as_key_value_pairs():
    assert show({"model": "exponential", "mtbf": "10 min"}) == "model=exponential,mtbf=10 min"
    assert show([1, True, None]) == "[1,true,null]"
    assert cell_text({"peers.count": 8, "churn": {"model": "none"}}) == (
        "peers.count=8, churn=(model=none)"
    )


def test_explicit_labels_win_and_duplicate_derived_labels_get_their_index():
    cases = [{"label": "lb", "protocol.load_balance": True}, {"churn.p": 0.1}, {"churn.p": 0.1}]
    assert case_labels(cases, BASE) == ["lb", "churn.p=0.1 #1", "churn.p=0.1 #2"]


def test_a_label_is_not_passed_to_the_scenario_and_names_table_rows():
    data = {
        "name": "s",
        "scenario": BASE,
        "cases": [{"label": "equal", "protocol.load_balance": False}],
    }
    runs = expand(sweep_from_mapping(data))
    assert runs[0].label == "equal"
    assert "label" not in runs[0].mapping
    assert runs[0].columns == {"protocol.load_balance": False}


@pytest.mark.parametrize(
    ("label", "expected"),
    [("", "a non-empty string"), (3, "a non-empty string"), ("a", "no other case has")],
)
def test_bad_labels_name_the_case(label: object, expected: str):
    cases = [{"label": "a"}, {"label": label, "churn.p": 0.1}]
    with pytest.raises(ScenarioError, match=expected) as caught:
        sweep_from_mapping({"name": "s", "scenario": BASE, "cases": cases})
    assert caught.value.key == "cases[1].label"


def test_run_folder_names_are_safe_and_unique():
    names = run_dir_names(
        [
            ["moshpit(load_balance=false)", "churn=model=exponential,mtbf=10 min", "seed=0"],
            ["a/b", "seed=0"],
            ["a b", "seed=0"],
            ["x" * 200, "seed=1"],
        ]
    )
    assert names[0] == "moshpit-load_balance=false__churn=model=exponential,mtbf=10-min__seed=0"
    assert names[1] == "a-b__seed=0__run=1"
    assert names[2] == "a-b__seed=0__run=2"
    assert len(names[3]) < 80
    assert names[3].endswith("__seed=1")
    assert all("/" not in name and " " not in name for name in names)


def test_kept_run_folders_are_named_after_case_grid_values_and_seed():
    data = {
        "name": "s",
        "scenario": BASE,
        "repeats": 2,
        "cases": [{"label": "lb"}, {"label": "equal", "protocol.load_balance": False}],
        "grid": {"peers.count": [8, 16]},
    }
    names = [run.dirname for run in expand(sweep_from_mapping(data))]
    assert names[:4] == [
        "lb__peers.count=8__seed=0", "lb__peers.count=8__seed=1",
        "equal__peers.count=8__seed=0", "equal__peers.count=8__seed=1",
    ]  # fmt: skip
    assert len(set(names)) == len(names)
