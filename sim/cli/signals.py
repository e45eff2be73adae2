"""SIGINT and SIGTERM in long commands: stop cleanly once, abort on the second signal.

``avsim run`` (:func:`interruptible` with ``graceful=True``): the first SIGINT or SIGTERM
sets :attr:`Stop.event`, which :func:`sim.engine.run` watches (``interrupt=``): the run
in progress ends at its next observation with ``stop_reason: interrupted`` and no new
repeat starts, so the command can still write a complete result folder. A second
signal raises :class:`Interrupted` at once (a ``KeyboardInterrupt``): nothing more is
written, and a folder being written is discarded (:mod:`sim.output.atomic`).

``avsim sweep`` (``graceful=False``): the first signal raises :class:`Interrupted`;
with ``stop_children`` the command's worker processes get SIGTERM too, so that the pool
shuts down at once instead of finishing the runs in flight. A pool worker does not die
of it: it ends its run in flight and runs nothing more
(:func:`sim.output.sweeps.executors.init_worker`), since a worker killed while it sends
a result leaves half a message in the pool's pipe and hangs the pool's shutdown.
Finished runs are already in the sweep's journal, which ``--resume`` reads. The handler
writes the one-line message (``abort_message``) itself, and, as a last resort against
a shutdown that hangs anyway, a watchdog ends the process :data:`ABORT_GRACE_S` seconds
later with the same exit code if it is still alive.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType

from sim.core.errors import Interrupted

#: The signals handled: Ctrl-C and a polite kill (``kill``, a batch scheduler's timeout).
SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Seconds an aborting command may take to shut its workers down before it is ended.
ABORT_GRACE_S = 10.0


@dataclass
class Stop:
    """What the handler saw: the first signal's number, and the event it set."""

    graceful: bool
    event: threading.Event = field(default_factory=threading.Event)
    signum: int | None = None

    @property
    def requested(self) -> bool:
        """True once a first signal asked the command to stop."""
        return self.event.is_set()

    @property
    def name(self) -> str:
        """The first signal's name (``SIGTERM``), or ``""``."""
        return "" if self.signum is None else signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the first signal's number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + (self.signum or signal.SIGINT)


def interrupt_in(exc: BaseException) -> KeyboardInterrupt | None:
    """The interrupt ``exc`` was raised from (or while handling), if any.

    A signal's :class:`Interrupted` is raised wherever the process happens to be; a
    library that wraps what its callbacks raise (pydantic's serializers, for one) turns
    it into an error of its own, with the interrupt as its ``__cause__``.
    """
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, KeyboardInterrupt):
            return found
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return None


def engine_supports_interrupt() -> bool:
    """Whether :func:`sim.engine.run` takes ``interrupt`` (a ``threading.Event``)."""
    from sim import engine

    return "interrupt" in inspect.signature(engine.run).parameters


@contextlib.contextmanager
def interruptible(
    graceful: bool, stop_children: bool = False, abort_message: str = "interrupted"
) -> Iterator[Stop]:
    """Handle SIGINT and SIGTERM inside the block (see the module docstring).

    Outside the main thread (no handlers can be installed there) the block runs with the
    default behaviour.
    """
    stop = Stop(graceful)

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.graceful and not stop.requested:
            stop.signum = signum
            stop.event.set()
            return
        if stop.signum is None:
            stop.signum = signum
        if not stop_children:
            raise Interrupted(signum)
        terminate_children()
        message = abort_message.replace("interrupted", f"interrupted by {stop.name}", 1)
        os.write(2, f"error: {message}\n".encode())
        exit_later(128 + signum)
        raise Interrupted(signum, reported=True)

    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {signum: signal.signal(signum, handler) for signum in SIGNALS}
    try:
        yield stop
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def exit_later(code: int, delay_s: float = ABORT_GRACE_S) -> None:
    """End the process with ``code`` after ``delay_s`` seconds unless it has ended by
    then (a daemon thread)."""

    def watchdog() -> None:
        time.sleep(delay_s)
        os._exit(code)

    threading.Thread(target=watchdog, name="avsim-abort", daemon=True).start()


def terminate_children() -> None:
    """Send SIGTERM to this process's child processes (sweep workers, their server)."""
    import psutil

    for child in psutil.Process(os.getpid()).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.terminate()
