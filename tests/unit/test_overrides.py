"""Overrides: ``--set key=value`` merges, ``--set key:=value`` (``Replace``, ``!replace``)
replaces, dotted keys index lists; a key that cannot be followed is one line naming it."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.core.errors import ScenarioError
from sim.model.scenario import Replace, apply_overrides, parse_set_options, scenario_from_mapping
from sim.output.sweeps import load_sweep
from sim.output.sweeps.plan import expand

BASE = {
    "name": "t",
    "peers": {
        "count": 8,
        "classes": [
            {"name": "fast", "fraction": 0.5, "upload": "1 Gbit/s"},
            {"name": "slow", "fraction": 0.5},
        ],
    },
    "churn": {"model": "bernoulli", "p": 0.1, "period": 2},
    "network": {"links": [{"a": "x", "b": "y", "capacity": "1 Gbit/s"}]},
    "protocol": {"name": "random_groups", "group_size": 4},
}


def test_colon_equals_replaces_a_mapping_and_equals_merges_into_it():
    replace = parse_set_options(["churn:={model: exponential, mtbf: 60, mttr: 5}"])
    assert replace == {"churn": Replace({"model": "exponential", "mtbf": 60, "mttr": 5})}
    assert apply_overrides(BASE, replace)["churn"] == {
        "model": "exponential",
        "mtbf": 60,
        "mttr": 5,
    }
    merged = apply_overrides(BASE, parse_set_options(["churn={model: exponential, mtbf: 60}"]))
    assert merged["churn"] == {"model": "exponential", "p": 0.1, "period": 2, "mtbf": 60}
    sc = scenario_from_mapping(BASE, replace)
    assert (sc.churn.model, sc.churn.mtbf, sc.churn.mttr) == ("exponential", 60.0, 5.0)


def test_merging_another_churn_model_fails_on_the_old_models_keys():
    with pytest.raises(ScenarioError, match=r"^churn\.p: unknown key"):
        scenario_from_mapping(
            BASE, parse_set_options(["churn={model: exponential, mtbf: 1, mttr: 1}"])
        )


def test_replace_is_the_api_form_and_works_at_any_depth():
    out = apply_overrides(BASE, {"peers": {"classes": Replace([{"fraction": 1.0}])}})
    assert out["peers"] == {"count": 8, "classes": [{"fraction": 1.0}]}
    out = apply_overrides(BASE, {"peers.classes.0": Replace({"fraction": 0.5})})
    assert out["peers"]["classes"][0] == {"fraction": 0.5}
    assert BASE["peers"]["classes"][0]["upload"] == "1 Gbit/s"  # the input is not changed


def test_list_indices_in_dotted_keys():
    overrides = parse_set_options(
        ["peers.classes.1.upload=20Mbps", "network.links.0.capacity=10 Gbit/s"]
    )
    out = apply_overrides(BASE, overrides)
    assert out["peers"]["classes"][1] == {"name": "slow", "fraction": 0.5, "upload": "20Mbps"}
    assert out["network"]["links"][0]["capacity"] == "10 Gbit/s"
    sc = scenario_from_mapping({**BASE, "clock": "rounds"}, overrides)
    assert sc.peers.classes[1].upload.get("value") == pytest.approx(2.5e6)


def test_setting_a_whole_list_entry_merges_unless_replaced():
    out = apply_overrides(BASE, {"peers.classes.1": {"upload": "1 Mbps"}})
    assert out["peers"]["classes"][1] == {"name": "slow", "fraction": 0.5, "upload": "1 Mbps"}


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("peers.classes.2.upload=1",
         "peers.classes.2: expected an index in 0..1 (peers.classes is a list of 2), got 2"),
        ("peers.classes.x.upload=1", "peers.classes.x: expected an index in 0..1"),
        ("peers.classes.-1.upload=1", "peers.classes.-1: expected an index in 0..1"),
        ("peers.count.0=1", "peers.count: expected a mapping or a list to set keys in, got 8"),
        ("churn.p.x=1", "churn.p: expected a mapping or a list to set keys in, got 0.1"),
        ("vector.sizes.0=1", "vector.sizes: expected a list to index with 0 (it is not set)"),
        ("peers..count=1", "peers..count: expected a dotted key like peers.count"),
        ("=3", "--set: expected dotted.key=value (or dotted.key:=value), got '=3'"),
        (":=3", "--set: expected dotted.key=value"),
        ("peers.count", "--set: expected dotted.key=value"),
    ],
)  # fmt: skip
def test_a_key_that_cannot_be_followed_is_one_line_naming_it(option, message):
    with pytest.raises(ScenarioError) as info:
        apply_overrides(BASE, parse_set_options([option]))
    assert str(info.value).startswith(message), str(info.value)


def test_an_empty_list_cannot_be_indexed():
    with pytest.raises(
        ScenarioError,
        match=r"^network\.links\.0: expected no index \(network\.links is an empty list\)",
    ):
        apply_overrides({"network": {"links": []}}, {"network.links.0.capacity": 1})


def test_set_values_are_bounded_yaml():
    with pytest.raises(ScenarioError, match=r"^--set x line 1, column 1: .*recursive alias"):
        parse_set_options(["x=&a [*a]"])
    with pytest.raises(ScenarioError, match=r"^--set x line 1, column 3: expected valid YAML"):
        parse_set_options(["x={a"])
    assert parse_set_options(["x=!replace {a: 1}", "y="]) == {"x": Replace({"a": 1}), "y": None}


def test_the_cli_replaces_with_colon_equals(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\npeers: {count: 8}\nchurn: {model: bernoulli, p: 0.2}\n"
        "protocol: {name: random_groups, group_size: 4}\nstop: {max_rounds: 3}\n"
    )
    runner = CliRunner()
    ok = runner.invoke(
        app,
        [
            "validate",
            str(path),
            "--set",
            "churn:={model: waves, rate: 3/min, fraction: 30%, duration: 1 min}",
        ],
    )
    assert (ok.exit_code, ok.stdout) == (0, "ok\n"), ok.stderr
    merged = runner.invoke(
        app,
        ["validate", str(path), "--set", "churn={model: waves, rate: 1, fraction: 1, duration: 1}"],
    )
    assert merged.exit_code == 2
    assert merged.stderr.startswith("error: churn.p: unknown key")
    indexed = runner.invoke(app, ["validate", str(path), "--set", "peers.classes.0.upload=1"])
    assert indexed.exit_code == 2
    assert (
        indexed.stderr
        == "error: peers.classes: expected a list to index with 0 (it is not set), got None\n"
    )


def test_sweep_cases_and_grid_may_replace_with_the_replace_tag(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "name: s\n"
        "scenario:\n"
        "  name: t\n  peers: {count: 8}\n  churn: {model: bernoulli, p: 0.2}\n"
        "  protocol: {name: random_groups, group_size: 4}\n  stop: {max_rounds: 3}\n"
        "cases:\n"
        "  - {churn: !replace {model: exponential, mtbf: 10, mttr: 1}}\n"
        "  - {churn.p: 0.1}\n"
        "grid:\n"
        "  peers: [!replace {count: 4}]\n"
    )
    runs = expand(load_sweep(path))
    assert [run.case for run in runs] == [0, 1]
    models = [scenario_from_mapping(run.mapping, run.grid).churn.model for run in runs]
    assert models == ["exponential", "bernoulli"]
    assert all(scenario_from_mapping(run.mapping, run.grid).peers.count == 4 for run in runs)
