"""What ``--help`` shows is plain text: no reStructuredText left from docstrings
(````key````, ``:func:`…```), one line per command in ``avsim --help``, and ``--set``
documents the syntax it accepts (list indices, the ``key:=value`` replace form)."""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from sim.cli import app

COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
#: reStructuredText / Sphinx markup a reader should never see.
MARKUP = re.compile(r"``|`[^`\s][^`]*`|:(func|class|mod|meth|attr|data|ref):")


def help_text(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_has_no_restructuredtext(command):
    text = help_text(*([command] if command else []))
    assert not MARKUP.search(text), MARKUP.search(text)


def test_each_command_is_one_line_in_the_command_list():
    text = help_text()
    panel = text[text.index("Commands") :].splitlines()[1:]
    rows = [line.strip("│ ").strip() for line in panel if line.startswith("│")]
    assert [row.split()[0] for row in rows] == [
        name for name in (row.split()[0] for row in rows) if name in COMMANDS
    ]
    assert len(rows) == len(COMMANDS)


@pytest.mark.parametrize("command", ["run", "validate", "info", "sweep"])
def test_set_help_names_list_indices_and_the_replace_form(command):
    text = " ".join(help_text(command).split())
    text = re.sub(r"│\s*", "", text)
    assert "key:=value" in text
    assert "peers.classes.1.upload=" in text
    assert "YAML scalar" not in text


def test_validate_says_it_takes_sweep_files_too():
    assert "Scenario or sweep YAML file" in help_text("validate")
