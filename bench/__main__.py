"""Run the benchmarks: ``python -m bench [NAME ...]`` (NAME: module suffix, e.g. ``rounds``).

Each ``bench/bench_<name>.py`` exposes ``run() -> list[(figure, value, unit, reference)]``.
One line is printed per figure and all figures are written to ``results/bench.json``.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def modules(names: list[str]) -> list[str]:
    found = sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    unknown = set(names) - set(found)
    if unknown:
        sys.exit(f"bench: unknown benchmark(s) {sorted(unknown)}; known: {found}")
    return names or found


def main() -> None:
    figures = []
    for name in modules(sys.argv[1:]):
        module = importlib.import_module(f"bench.bench_{name}")
        for figure, value, unit, reference in module.run():
            print(f"{figure:<40} {value:>14.4g}  {unit:<16} ({reference})", flush=True)
            figures.append(
                {
                    "bench": name,
                    "figure": figure,
                    "value": value,
                    "unit": unit,
                    "reference": reference,
                }
            )
    out = Path("results") / "bench.json"
    out.parent.mkdir(exist_ok=True)
    ran = {f["bench"] for f in figures}
    if out.exists():  # keep the figures of benchmarks not run this time
        kept = json.loads(out.read_text()).get("figures", [])
        figures = [f for f in kept if f.get("bench") not in ran] + figures
    payload = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "figures": figures,
    }
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False, suffix=".tmp") as tmp:
        json.dump(payload, tmp, indent=2)
    os.replace(tmp.name, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
