"""The ``avsim`` command line: run, validate, info, sweep, list, schema, plot.

Library code raises :class:`~sim.core.errors.AvsimError`; only this package turns errors in
user input into one line on stderr and exit code 2 — never a traceback. Each command
lives in a module of its own; :mod:`sim.cli.app` holds what they share.
"""

from __future__ import annotations

import sys

import typer

from sim.cli import catalog, info, plot, run, sweep, validate  # noqa: F401  (registers commands)
from sim.cli.app import USAGE_EXIT, app, click_message, error_line
from sim.cli.signals import interrupt_in
from sim.core.errors import AvsimError


def main() -> None:
    """Console entry point: run the app; usage errors too become one line and exit 2."""
    try:
        code = app(standalone_mode=False)
    except (KeyboardInterrupt, typer.Abort):
        code = error_line("interrupted", 130)
    except typer.exceptions.TyperException as exc:  # usage errors: bad option, missing argument
        code = error_line(click_message(exc), getattr(exc, "exit_code", USAGE_EXIT))
    except AvsimError as exc:  # raised outside a command body (should not happen; be safe)
        code = error_line(str(exc))
    except Exception as exc:  # an interrupt a library wrapped, outside a command body
        cause = interrupt_in(exc)
        if cause is None:
            raise
        code = getattr(cause, "exit_code", 130)
        if not getattr(cause, "reported", False):  # else its handler wrote the line
            code = error_line("interrupted", code)
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["app", "main"]
