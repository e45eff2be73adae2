"""Every ``--help``: no help text left dangling ("Result folder ."), and every option
that takes a value shows its default ("[default: results/<name>/]")."""

from __future__ import annotations

import re

import click
import pytest
import typer.main
from typer.testing import CliRunner

from sim.cli import app

COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
#: A space before a final punctuation mark: what is left when a default is dropped.
DANGLING = re.compile(r"\s[.,;:]$")
#: An empty default shown.
EMPTY_DEFAULT = re.compile(r"\[default:\s*(\(\s*\))?\s*\]")


def help_text(command: str) -> str:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.stdout


def option_blocks(text: str) -> dict[str, str]:
    """``--name`` → its row (and continuation rows) of the options panel, box drawn off."""
    blocks: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        cells = line.strip().strip("│").strip()
        match = re.match(r"(--[\w-]+)", cells) if line.startswith("│") else None
        if match:
            current = match.group(1)
            blocks[current] = cells
        elif current and line.startswith("│") and cells:
            blocks[current] += " " + cells
        elif not line.startswith("│"):
            current = None
    return blocks


def value_options(command: str) -> list[click.Option]:
    group = typer.main.get_command(app)
    cmd = group.commands[command]  # type: ignore[attr-defined]
    return [
        p for p in cmd.params if isinstance(p, click.Option) and not p.is_flag and p.name != "help"
    ]


def test_every_command_is_covered():
    assert {"run", "sweep", "plot", "info", "validate", "schema", "list"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_no_help_line_dangles(command):
    text = help_text(command)
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("  ") if c.strip()]
        for cell in cells:
            assert not DANGLING.search(cell), (command, line)
    assert not EMPTY_DEFAULT.search(text), command


@pytest.mark.parametrize("command", COMMANDS)
def test_options_that_take_a_value_show_their_default(command):
    blocks = option_blocks(help_text(command))
    for option in value_options(command):
        if option.multiple and option.show_default in (None, False, True):
            continue  # repeatable (--set): nothing unless given
        name = max(option.opts, key=len)
        assert name in blocks, (command, name, sorted(blocks))
        assert "[default: " in blocks[name], (command, blocks[name])


def test_the_result_folder_default_is_spelled_out():
    blocks = option_blocks(help_text("run"))
    assert "[default: (results/<name>/)]" in blocks["--out"]
