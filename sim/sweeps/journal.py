"""The partial file of a sweep: one JSON line per finished run, for ``--resume``.

The journal is append-only: each line is written, flushed and synced as its run ends,
so a sweep killed half-way keeps every run that finished. A line cut short by the kill
is ignored when reading. The journal is removed once ``runs.parquet`` is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FILE_NAME = "runs.partial.jsonl"


class Journal:
    """Finished runs of one sweep folder, keyed by run key (scenario + seed digest)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE_NAME

    def exists(self) -> bool:
        """True when a partial sweep was left in the folder."""
        return self.path.is_file()

    def read(self) -> dict[str, dict[str, Any]]:
        """Summaries recorded so far, by run key (later lines win; torn lines skipped)."""
        if not self.exists():
            return {}
        done: dict[str, dict[str, Any]] = {}
        for line in self.path.read_text(encoding="utf-8").splitlines():
            entry = _parse(line)
            if entry is not None:
                done[entry["key"]] = entry["summary"]
        return done

    def append(self, key: str, index: int, summary: dict[str, Any]) -> None:
        """Record one finished run durably."""
        line = json.dumps({"key": key, "run": index, "summary": summary}) + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def clear(self) -> None:
        """Forget every recorded run."""
        self.path.unlink(missing_ok=True)


def _parse(line: str) -> dict[str, Any] | None:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError:
        return None
    ok = isinstance(entry, dict) and isinstance(entry.get("summary"), dict) and "key" in entry
    return entry if ok else None
