"""Run the benchmarks: ``python -m bench [NAME ...]`` (NAME: module suffix, e.g. ``rounds``).

Each ``bench/bench_<name>.py`` exposes ``run() -> list[(figure, value, unit, reference)]``.
One line is printed per figure and all figures are written to ``results/bench.json``.

``python -m bench report`` (``make bench-report``) runs, in one process, the benchmarks
behind issue 13's figures (:data:`REPORT`: E1, a2cid2, G1, M1, M2, K1, N1, A1, R1 (its
first two minutes and its late phase), E2, S1 and the scaling exponents), writes them as
above, and prints one table: each figure's value, its target and whether it is met
(``n/a``: not measured here, e.g. SimGrid not installed). ``results/bench.json`` then
also holds the table (``report``).
"""

from __future__ import annotations

import importlib
import json
import math
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


#: Issue 13's figures: (id, bench module, figure name, ">=" or "<=", target).
REPORT: list[tuple[str, str, str, str, float]] = [
    ("E1", "gossip", "E1 / SimPy timeouts", ">=", 0.2),
    ("E1 target", "gossip", "E1 with exact target / SimPy timeouts", ">=", 0.2),
    ("a2cid2", "gossip", "a2cid2 network / SimPy timeouts", ">=", 0.1),
    ("a2cid2 target", "gossip", "a2cid2 network with exact target / SimPy timeouts", ">=", 0.1),
    ("E2", "gossip", "E2 / SimPy timeouts", ">=", 0.6),
    ("E2 literal", "gossip", "E2 / E1 as measured", ">=", 3.0),
    ("G1", "netclock", "G1 gossip messages/s / SimPy timeouts/s", ">=", 0.3),
    ("M1", "moshpit_net", "M1 lognormal / equal (CPU time)", "<=", 1.3),
    ("M2", "moshpit_net", "M2 network / rounds clock (CPU time)", "<=", 5.0),
    ("K1", "rounds", "K1 moshpit round / numpy copy", ">=", 0.5),
    ("S1 random_groups", "rounds", "S1 random_groups 1e6 peers 10 rounds", "<=", 60.0),
    ("S1 moshpit", "rounds", "S1 moshpit 1e6 peers 10 rounds", "<=", 60.0),
    ("N1", "network", "N1 avsim / SimGrid", ">=", 10.0),
    ("A1", "async", "A1 async/barrier", "<=", 1.5),
    ("R1", "r1", "R1 simulated s per wall s", ">=", 100.0),
    ("R1 late", "r1", "R1 late phase simulated s per wall s", ">=", 100.0),
    ("scaling gossip", "scaling", "scaling gossip exponent (wall vs N)", "<=", 1.1),
    ("scaling barrier", "scaling", "scaling barrier exponent (wall vs N)", "<=", 1.1),
    ("scaling async", "scaling", "scaling async exponent (wall vs N)", "<=", 1.1),
    # performance.md's goal, "linear in the work": an async swarm's matchmaking makes more
    # messages per peer as N grows (hivemind's rule, not the simulator's cost)
    ("scaling async work", "scaling", "scaling async exponent (wall vs all messages)", "<=", 1.1),
]


def report(figures: list[dict]) -> list[dict]:
    """One row per :data:`REPORT` entry: its value in ``figures`` (NaN when missing),
    target and whether it is met (None: not measured)."""
    found = {(f["bench"], f["figure"]): f["value"] for f in figures}
    rows = []
    for key, bench, figure, sense, target in REPORT:
        value = found.get((bench, figure), math.nan)
        met = None
        if isinstance(value, int | float) and math.isfinite(value):
            met = value >= target if sense == ">=" else value <= target
        rows.append(
            {"id": key, "figure": figure, "value": value, "target": f"{sense} {target:g}",
             "met": met}
        )  # fmt: skip
    return rows


def print_report(rows: list[dict]) -> None:
    """The report as a Markdown table."""
    print("\n| id | figure | value | target | met |\n| --- | --- | ---: | --- | --- |")
    for row in rows:
        met = "n/a" if row["met"] is None else ("yes" if row["met"] else "**no**")
        print(f"| {row['id']} | {row['figure']} | {row['value']:.4g} | {row['target']} | {met} |")


def main() -> None:
    args = sys.argv[1:]
    reporting = args[:1] == ["report"]
    if reporting:
        args = sorted({bench for _, bench, *_ in REPORT})
    figures = []
    for name in modules(args):
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
    payload: dict = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "figures": figures,
    }
    if reporting:
        rows = report([f for f in figures if f["bench"] in ran])
        payload["report"] = rows
        print_report(rows)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False, suffix=".tmp") as tmp:
        json.dump(payload, tmp, indent=2)
    os.replace(tmp.name, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
