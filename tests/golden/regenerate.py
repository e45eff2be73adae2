"""Regenerate the golden summaries: ``make golden`` (an explicit, reviewed step).

Every ``scenarios/*.yaml`` scenario (not the sweeps under ``scenarios/paper/``) is run with
its own seed and a small fixed size override where it is large, and the summary fields
that do not depend on the machine are stored in ``tests/golden/<name>.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sim
from sim.model.scenario import read_yaml

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_DIR = Path(__file__).resolve().parent
MACHINE_DEPENDENT = {"wall_time_s"}


def scenario_files() -> list[Path]:
    """The scenario files (not the sweeps) of ``scenarios/``: each has a golden summary."""
    return [p for p in sorted((ROOT / "scenarios").glob("*.yaml")) if not _is_sweep(p)]


def _is_sweep(path: Path) -> bool:
    return bool({"cases", "grid", "base", "scenario"} & set(read_yaml(path)))


def golden_summary(path: Path) -> dict[str, Any]:
    """The machine-independent summary of one run of ``path`` with its own seed."""
    result = sim.run(sim.load_scenario(path))
    return {k: v for k, v in result.summary.items() if k not in MACHINE_DEPENDENT}


def main() -> None:
    for path in scenario_files():
        out = GOLDEN_DIR / f"{path.stem}.json"
        out.write_text(json.dumps(golden_summary(path), indent=2, sort_keys=True) + "\n")
        print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
