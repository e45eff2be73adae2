"""Where the cross-checks find hivemind (``make crosscheck`` installs it), and whether
it can be used: shared by the barrier and the async hivemind cross-checks."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HIVEMIND_PYTHON = ROOT / ".venv-hivemind" / "bin" / "python"


def hivemind_available() -> str | None:
    """None when hivemind can be used, else why not."""
    try:
        probe = subprocess.run(
            [str(HIVEMIND_PYTHON), "-c", "import hivemind"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{HIVEMIND_PYTHON} cannot run ({error}); `make crosscheck` installs hivemind"
    if probe.returncode != 0:
        last = probe.stderr.strip().splitlines()[-1:] or ["no output"]
        return f"hivemind is not importable by {HIVEMIND_PYTHON}: {last[0]}"
    return None
