"""The exceptions avsim raises; only the CLI turns them into one line and an exit code."""

from __future__ import annotations

import signal
from typing import Any


class AvsimError(Exception):
    """Base class of every error avsim raises on purpose."""


class ScenarioError(AvsimError):
    """A scenario (or sweep, or override) value is wrong.

    Parameters
    ----------
    key
        Dotted key of the offending value, e.g. ``peers.upload``.
    got
        The value received (shown with ``repr``), or ``None`` when missing.
    expected
        What would have been accepted, in words.
    """

    def __init__(self, key: str, got: Any, expected: str) -> None:
        self.key, self.got, self.expected = key, got, expected
        super().__init__(f"{key or '<top>'}: expected {expected}, got {_show(got)}")

    def __reduce__(self) -> tuple:
        # rebuild from the message-making arguments (workers send errors across processes)
        return (_rebuild, (type(self), self.args, self.__dict__))


class InnerKeyError(ValueError):
    """Raised by a field validator about a key *inside* the value it validates (e.g.
    ``median`` of a distribution), so that the error names that innermost key.

    Parameters
    ----------
    key
        Dotted key relative to the field, e.g. ``median`` or ``values.2``.
    got, expected
        As for :class:`ScenarioError`; ``known`` (the keys allowed there) makes it an
        unknown-key error.
    """

    def __init__(self, key: str, got: Any, expected: str, known: list[str] | None = None) -> None:
        self.key, self.got, self.expected, self.known = key, got, expected, known
        text = "unknown key" if known is not None else f"expected {expected}, got {got!r}"
        super().__init__(f"{key}: {text}")


class ResultExistsError(AvsimError):
    """A result folder exists and ``force`` was not given."""


class SimulationError(AvsimError):
    """The simulation reached a state it cannot continue from (a bug or an impossible input)."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _rebuild(cls: type, args: tuple, state: dict) -> Exception:
    error: Exception = Exception.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class Interrupted(KeyboardInterrupt):
    """A signal (SIGINT, SIGTERM) stopped the command, or a sweep worker's run
    (:func:`sim.output.sweeps.executors.init_worker`); ``exit_code`` is 128 + the
    signal's number. ``reported``: the one-line message is already on stderr."""

    def __init__(self, signum: int, reported: bool = False) -> None:
        # args are the constructor's: SimPy re-creates an exception from its args, and a
        # worker's pickles back to the sweep
        super().__init__(signum, reported)
        self.signum = int(signum)
        self.reported = reported

    def __str__(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's convention for a command killed by a signal."""
        return 128 + self.signum
