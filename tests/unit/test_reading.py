"""Reading YAML files a user wrote: every unreadable file is one line naming the file
(line and column when known), what was found and what was expected."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.core.errors import ScenarioError
from sim.model.scenario import Replace, load_scenario, read_yaml, reading
from sim.output.sweeps import load_sweep

TINY = "name: tiny\npeers: {count: 8}\nprotocol: {name: random_groups, group_size: 4}\n"


def bomb(levels: int = 9, fan: int = 9) -> str:
    """The "billion laughs" document: fan**levels strings once aliases are expanded."""
    lines = ['a0: &a0 ["lol"]']
    for k in range(1, levels + 1):
        lines.append(f"a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


BAD_FILES: list[tuple[str, bytes, list[str]]] = [
    ("not utf-8", b"name: x\n\xff\xfe: 1\n", ["line 2, column 1", "UTF-8", "0xff"]),
    ("binary", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", ["line 3, column 1", "binary data"]),
    ("utf-16", "name: x\n".encode("utf-16"), ["UTF-16", "save the file as UTF-8"]),
    ("empty", b"", ["mapping", "empty document"]),
    ("comments only", b"# nothing\n", ["mapping", "empty document"]),
    ("a list", b"- 1\n- 2\n", ["mapping", "a list"]),
    ("a scalar", b"hello\n", ["mapping", "'hello'"]),
    ("alias bomb", bomb().encode(), ["line", "100000 values", "alias"]),
    ("recursive alias", b"a: &a [*a]\n", ["line 1, column 4", "recursive alias"]),
    ("deep", b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n", ["column 35", "nested at most 32"]),
    ("python tag", b"a: !!python/object/apply:os.system [ls]\n", ["line 1", "constructor"]),
    ("two documents", b"a: 1\n---\nb: 2\n", ["line 2", "single document"]),
    ("duplicate key", b"peers: {count: 4, count: 5}\n", ["line 1, column 19", "'count' twice"]),
    ("control character", b"name: a\x07b\n", ["line 1, column 8", "#x0007"]),
    ("syntax", b"name: [unclosed\n", ["line 2", "valid YAML"]),
]


@pytest.mark.parametrize(("what", "data", "fragments"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_an_unreadable_file_is_one_line_naming_the_file(tmp_path, what, data, fragments):
    path = tmp_path / "s.yaml"
    path.write_bytes(data)
    with pytest.raises(ScenarioError) as info:
        read_yaml(path)
    message = str(info.value)
    assert message.startswith(f"{path}"), message
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_an_alias_bomb_inside_a_scenario_is_refused_before_it_is_expanded(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(TINY + "x:\n" + "".join(f"  {line}\n" for line in bomb(12).splitlines()))
    with pytest.raises(ScenarioError, match="alias bomb"):
        load_scenario(path)


def test_shared_aliases_are_read_and_an_override_changes_only_its_key(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\npeers:\n  count: 8\n"
        "  upload: &up {dist: lognormal, median: 20 Mbps, sigma: 0.5}\n"
        "  download: *up\nprotocol: {name: gossip}\n"
    )
    sc = load_scenario(path, {"peers.upload.median": "1 Mbps"})
    assert sc.peers.upload.get("median") == pytest.approx(125e3)
    assert sc.peers.download.get("median") == pytest.approx(2.5e6)


def test_merge_keys_may_override_what_they_merge(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("x: &x {a: 1, b: 2}\ny:\n  <<: *x\n  a: 3\n")
    assert read_yaml(path)["y"] == {"a": 3, "b": 2}


def test_a_utf8_bom_is_fine(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_bytes(codecs.BOM_UTF8 + TINY.encode())
    assert load_scenario(path).peers.count == 8


def test_a_file_over_the_size_limit_is_refused_without_reading_it(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "MAX_FILE_BYTES", 100)
    path = tmp_path / "s.yaml"
    path.write_text(TINY + "# " + "x" * 200 + "\n")
    with pytest.raises(ScenarioError, match=r"at most 100 bytes, got \d+ bytes"):
        read_yaml(path)


def test_a_folder_or_a_missing_file_names_the_path(tmp_path):
    with pytest.raises(ScenarioError, match="readable file"):
        read_yaml(tmp_path)
    with pytest.raises(ScenarioError, match="No such file"):
        read_yaml(tmp_path / "nope.yaml")


def test_the_replace_tag_wraps_its_value(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("a: !replace {model: none}\nb: !replace [1, 2]\nc: !replace 3\n")
    assert read_yaml(path) == {
        "a": Replace({"model": "none"}),
        "b": Replace([1, 2]),
        "c": Replace(3),
    }


def test_a_sweep_file_given_to_load_scenario_says_to_use_avsim_sweep(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("name: s\nscenario: {protocol: {name: gossip}}\ncases: [{}]\n")
    with pytest.raises(ScenarioError, match=r"this is a sweep file .*use `avsim sweep"):
        load_scenario(path)
    path.write_text("name: s\nbase: tiny.yaml\ngrid: {peers.count: [4, 8]}\n")
    with pytest.raises(ScenarioError, match=r"it has base, grid"):
        load_scenario(path)


def test_a_scenario_with_a_stray_sweep_key_is_an_unknown_key_not_a_sweep(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(TINY + "cases: []\n")
    with pytest.raises(ScenarioError, match=r"^cases: unknown key"):
        load_scenario(path)


@pytest.mark.parametrize("command", ["validate", "run", "info", "sweep"])
@pytest.mark.parametrize(
    ("what", "data", "fragments"), BAD_FILES[:8], ids=[b[0] for b in BAD_FILES[:8]]
)
def test_every_command_turns_an_unreadable_file_into_one_line(
    tmp_path, command, what, data, fragments
):
    path = tmp_path / "s.yaml"
    path.write_bytes(data)
    extra = ["--out", str(tmp_path / "out")] if command in ("run", "sweep") else []
    result = CliRunner().invoke(app, [command, str(path), *extra])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {path}"), lines[0]
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("command", ["run", "info"])
def test_run_and_info_on_a_sweep_file_say_use_avsim_sweep(tmp_path, command):
    (tmp_path / "tiny.yaml").write_text(TINY)
    path = tmp_path / "sweep.yaml"
    path.write_text("name: s\nbase: tiny.yaml\ncases: [{}, {protocol.group_size: 2}]\n")
    result = CliRunner().invoke(app, [command, str(path)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {path}: this is a sweep file (it has base, cases), not a scenario: "
        f"use `avsim sweep {path}`\n"
    )


def test_a_sweep_file_is_read_once_with_the_same_checks(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_bytes(b"name: s\n\xff\n")
    with pytest.raises(ScenarioError, match=r"line 2, column 1: expected UTF-8 text"):
        load_sweep(path)
    path.write_text("name: s\nscenario: {protocol: {name: gossip}}\ncases: " + "[" * 40 + "]" * 40)
    with pytest.raises(ScenarioError, match="nested at most 32 deep"):
        load_sweep(path)


def test_paths_are_reported_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("s.yaml").write_bytes(b"\xff")
    with pytest.raises(ScenarioError, match=r"^s\.yaml line 1, column 1: "):
        read_yaml("s.yaml")
