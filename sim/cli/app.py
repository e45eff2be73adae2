"""The CLI's shared parts: the Typer app, consoles, option types, one-line errors,
the delayed progress bar and table printing. Each command lives in its own module."""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from sim.cli.signals import interrupt_in
from sim.core.errors import AvsimError

USAGE_EXIT = 2
#: A progress bar appears once a run has lasted this long (shorter runs stay quiet).
PROGRESS_DELAY_S = 2.0
#: Up to this many repeats the summary table shows one column per seed.
app = typer.Typer(
    name="avsim",
    help="Discrete-event simulator for averaging protocols on unreliable networks.",
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    add_completion=False,
)
stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False)

ScenarioArg = Annotated[Path, typer.Argument(help="Scenario YAML file.")]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help=(
            "Override a scenario key; repeatable. dotted.key=value sets it (the value is "
            "YAML; a mapping merges into the mapping there), and a number in the key "
            "indexes a list: peers.classes.1.upload=20Mbps. dotted.key:=value replaces "
            "the whole value instead: 'churn:={model: none}'."
        ),
    ),
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Overwrite an existing, non-empty folder.")
]
MaxMemoryOption = Annotated[
    str | None,
    typer.Option(
        "--max-memory",
        help="Refuse runs estimated to need more (e.g. 32GiB; 'none': no limit).",
        show_default="the memory available",
    ),
]


@contextlib.contextmanager
def user_errors(interrupted: str = "interrupted") -> Iterator[None]:
    """Turn errors in user input (AvsimError, unreadable files, bad YAML) into exit 2,
    an interrupt into ``interrupted`` and exit 128 + the signal (130 for Ctrl-C), an out
    of memory into ``out of memory while …`` and exit 2 (see :func:`doing`), and
    warnings into one ``warning:`` line each."""
    try:
        with one_line_warnings():
            yield
    except KeyboardInterrupt as exc:
        report_interrupt(exc, interrupted)
    except MemoryError as exc:
        fail(f"out of memory while {out_of_memory_while(exc)}")
    except AvsimError as exc:
        fail(str(exc))
    except yaml.YAMLError as exc:
        fail(f"malformed YAML: {exc}")
    except OSError as exc:
        fail(os_message(exc))
    except Exception as exc:
        cause = interrupt_in(exc)  # a library wrapped the interrupt in its own error
        if cause is None:
            raise
        report_interrupt(cause, interrupted)


def report_interrupt(exc: KeyboardInterrupt, interrupted: str = "interrupted") -> None:
    """Exit with ``interrupted`` (``interrupted by SIGTERM; …`` for a signal) and code
    128 + the signal (130 for Ctrl-C), unless the signal's handler wrote it already."""
    code = getattr(exc, "exit_code", 130)  # sim.core.errors.Interrupted: 128 + signal
    if getattr(exc, "reported", False):  # its handler wrote the line already
        raise typer.Exit(code) from None
    if hasattr(exc, "signum"):  # name the signal: "interrupted by SIGTERM; …"
        interrupted = interrupted.replace("interrupted", f"interrupted by {exc}", 1)
    fail(interrupted, code)


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """Inside the block every warning is one ``warning: <message>`` line on stderr."""
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        yield


def _show_warning(message: Warning | str, *args: Any, **kwargs: Any) -> None:
    line = " ".join(str(message).split())
    sys.stderr.write(f"warning: {line}\n")
    sys.stderr.flush()


@contextlib.contextmanager
def doing(what: str) -> Iterator[None]:
    """Label a ``MemoryError`` raised in the block with ``what`` (``writing results``)."""
    try:
        yield
    except MemoryError as exc:
        if not getattr(exc, "doing", None):
            exc.doing = what  # type: ignore[attr-defined]
        raise


def out_of_memory_while(exc: MemoryError) -> str:
    """What the command was doing when memory ran out: the :func:`doing` label, else
    the run's phase from the traceback (:func:`sim.engine.resources.out_of_memory_while`)."""
    from sim.engine.resources import out_of_memory_while as phase

    return getattr(exc, "doing", None) or phase(exc)


class DelayedProgress:
    """A rich progress bar on stderr that appears only after ``delay_s`` and on a terminal."""

    def __init__(self, description: str, total: float, delay_s: float = PROGRESS_DELAY_S) -> None:
        self.description, self.total, self.delay_s = description, total, delay_s
        self.started = time.perf_counter()
        self.bar: Progress | None = None
        self.task: Any = None

    def __enter__(self) -> DelayedProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def update(self, completed: float, offset: float = 0.0) -> None:
        """Show ``offset + completed`` out of ``total`` (starting the bar when it is due)."""
        completed += offset
        if self.bar is None and self._due():
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
                                TimeElapsedColumn(), console=stderr, transient=True)  # fmt: skip
            self.task = self.bar.add_task(self.description, total=self.total)
            self.bar.start()
        if self.bar is not None:
            self.bar.update(self.task, completed=completed)

    def count(self, done: int, total: int) -> None:
        """Sweep-style progress: ``done`` of ``total`` runs."""
        self.total = total
        if self.bar is not None:
            self.bar.update(self.task, total=total)
        self.update(done)

    def _due(self) -> bool:
        return stderr.is_terminal and time.perf_counter() - self.started >= self.delay_s


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None
) -> None:
    table = Table(title=title)
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*row)
    stdout.print(table)


def cell(value: Any) -> str:
    from sim.output.sweeps.table import format_number

    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return format_number(float(value))


def fail(message: str, code: int = USAGE_EXIT) -> None:
    """Inside a command: print one line on stderr and exit with ``code``."""
    raise typer.Exit(error_line(message, code))


def error_line(message: str, code: int = USAGE_EXIT) -> int:
    """Write ``error: <message>`` as one line on stderr; return ``code``."""
    line = " ".join(str(message).split())
    sys.stderr.write(f"error: {line}\n")
    sys.stderr.flush()
    return code


def click_message(exc: Exception) -> str:
    format_message = getattr(exc, "format_message", None)
    return format_message() if callable(format_message) else str(exc)


def os_message(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"
