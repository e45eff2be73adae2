"""Floating-point errors during a run: held until the run ends, then said or dropped.

A state that overflows turns into ``inf`` and ``NaN``, and every numpy operation on it
after that (the protocol's arithmetic, the observer's statistics, the tracker's sums)
would print its own ``RuntimeWarning``: five or more lines on stderr for one event that
the numerical-health check (:mod:`sim.engine.observe.observer`, ``stop_reason: nan``)
already reports in one line, with its round, time and peer. :func:`held_floating_errors`
collects a run's numpy floating-point errors (overflow, invalid value, division by
zero; underflow stays ignored, numpy's default) instead of printing them;
:meth:`FloatingErrors.release` drops them when the run stopped at a NaN, and otherwise
gives each distinct message once, as the ``RuntimeWarning`` numpy would have given (an
overflow that left the state finite, e.g. in a variance over huge values, is still
said).

Errors are collected through :func:`numpy.errstate` (``"log"`` mode), which is local to
the thread (and context) that runs the simulation: runs in other threads are unaffected.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

#: At most this many distinct messages are kept (the rest repeat them).
MAX_MESSAGES = 32


class FloatingErrors:
    """The distinct floating-point error messages of one run, in order of appearance."""

    def __init__(self) -> None:
        self.messages: dict[str, None] = {}

    def write(self, text: str) -> None:
        """numpy's ``"log"`` callback: ``"Warning: overflow encountered in add\\n"``."""
        message = text.strip().removeprefix("Warning: ")
        if len(self.messages) < MAX_MESSAGES:
            self.messages.setdefault(message, None)

    def release(self, stopped_at_nan: bool) -> None:
        """Drop the messages when the run stopped at a NaN (its stop message says it);
        otherwise warn each one once (``RuntimeWarning``)."""
        if not stopped_at_nan:
            for message in self.messages:
                warnings.warn(message, RuntimeWarning, stacklevel=3)
        self.messages.clear()


@contextmanager
def held_floating_errors() -> Iterator[FloatingErrors]:
    """Collect numpy's floating-point errors in the block instead of warning; the caller
    calls :meth:`FloatingErrors.release` once it knows how the run ended."""
    held = FloatingErrors()
    with np.errstate(over="log", invalid="log", divide="log", call=held):
        yield held
