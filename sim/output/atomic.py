"""Folders written whole or not at all: build in a hidden folder, then rename it in place.

:func:`staged_folder` hands out a temporary folder beside the destination; when the
block ends normally the temporary folder takes the destination's name in one rename
(replacing an empty folder, or — when ``replace`` allows it — a previous result, which
is moved aside first and deleted after). When the block raises anything, a
``KeyboardInterrupt`` included, the temporary folder is deleted and the destination is
left as it was. A reader therefore sees either no folder, the old one, or the complete
new one; never a half-written one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

#: Prefix and suffix of the hidden folders :func:`staged_folder` makes beside the result.
STAGING_PREFIX = "."
STAGING_SUFFIX = ".tmp"


@contextlib.contextmanager
def staged_folder(final: str | os.PathLike[str], replace: bool = False) -> Iterator[Path]:
    """A temporary folder that becomes ``final`` when the block completes.

    Parameters
    ----------
    final
        The destination; its parent is created when missing.
    replace
        Whether a non-empty ``final`` may be replaced (it is moved aside, then deleted
        once the new folder is in place). An empty folder is always replaced.

    Raises
    ------
    FileExistsError
        When ``final`` is not empty at the end of the block and ``replace`` is false.
    """
    target = Path(final)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _fresh_folder(target, STAGING_SUFFIX)
    except OSError as exc:  # name the destination, not a hidden staging folder
        raise OSError(exc.errno, exc.strerror, str(target)) from exc
    try:
        yield tmp
        publish(tmp, target, replace)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # already gone after a successful publish


def publish(tmp: Path, final: Path, replace: bool) -> None:
    """Rename the complete folder ``tmp`` to ``final`` (see :func:`staged_folder`)."""
    if not final.exists():
        os.rename(tmp, final)
        return
    if final.is_dir() and not any(final.iterdir()):
        final.rmdir()
        os.rename(tmp, final)
        return
    if not replace:
        raise FileExistsError(f"{final} exists and is not empty")
    old = _fresh_folder(final, ".old")
    try:
        os.replace(final, old)  # the empty folder just made: replaced by the old result
        try:
            os.rename(tmp, final)
        except BaseException:
            os.rename(old, final)  # put the old result back: never leave no folder
            raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def _fresh_folder(final: Path, suffix: str) -> Path:
    """A new empty hidden folder beside ``final``, made with ``mkdir`` (so that it gets
    the umask's permissions, as any folder would, unlike ``mkdtemp``'s 0700)."""
    while True:
        folder = final.parent / f"{STAGING_PREFIX}{final.name}.{secrets.token_hex(4)}{suffix}"
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
