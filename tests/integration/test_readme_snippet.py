"""The README's Python snippet runs as a script (``python snippet.py``) in a fresh folder.

The snippet is read from README.md when the test runs: the first ```python block under
the "The Python API" heading. A sweep with worker processes in a script needs the
``if __name__ == "__main__":`` guard; this test is what keeps the README honest about it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADING = re.compile(r"^#+ .*Python API.*$", re.MULTILINE)
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_snippet(readme: str) -> str:
    """The first ```python block after the "Python API" heading of ``readme``."""
    heading = HEADING.search(readme)
    assert heading is not None, "README.md has no 'Python API' heading"
    block = BLOCK.search(readme, heading.end())
    assert block is not None, "README.md has no ```python block after its 'Python API' heading"
    return block.group(1)


def run_as_script(code: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as ``python snippet.py`` in ``folder``, with the repository's
    ``scenarios/`` beside it."""
    (folder / "scenarios").symlink_to(ROOT / "scenarios", target_is_directory=True)
    (folder / "snippet.py").write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "snippet.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_readme_python_snippet_runs_as_a_script(tmp_path: Path):
    code = python_snippet((ROOT / "README.md").read_text(encoding="utf-8"))
    done = run_as_script(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
