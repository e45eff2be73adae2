"""``avsim info``: what a scenario resolves to, without running it.

Prints the run's setting, one table per peer class (count, then median, min and max of
each per-peer value in human units: ``Mbit/s``, ``ms``), the churn model with the mean
fraction of peers it keeps absent, and the protocol's derived constants (its
``describe()``: e.g. Moshpit's grid, A²CiD²'s chi1, chi2, eta, alpha_tilde).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from sim.cli.app import MaxMemoryOption, ScenarioArg, SetOption, app, cell, stdout, user_errors
from sim.core.numeric import median
from sim.core.units import format_bandwidth, format_duration

#: Churn keys that are durations (seconds; rounds on the rounds clock).
CHURN_DURATIONS = ("duration", "mtbf", "mttr", "period")
#: Per-peer columns shown, with their label and formatter.
PEER_VALUES: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("upload_bytes_per_s", "upload", format_bandwidth),
    ("download_bytes_per_s", "download", format_bandwidth),
    ("latency_s", "latency", format_duration),
    ("compute", "compute", lambda value: cell(value)),
    ("delay_s", "delay", format_duration),
)
KEY_WIDTH = 22


@app.command()
def info(scenario: ScenarioArg, set_: SetOption = None, max_memory: MaxMemoryOption = None) -> None:
    """Show what a scenario resolves to, without running it.

    Per-class peer tables, the churn model and its expected absent fraction, and the
    protocol's derived constants (e.g. Moshpit's grid, A²CiD²'s chi1, chi2, eta,
    alpha_tilde). These come from the run's set-up, initial state included, so a
    scenario that would not fit in memory is refused as avsim run refuses it.
    """
    from sim.engine.resources import check_memory, memory_limit
    from sim.engine.schedules import engine_for
    from sim.model.scenario import apply_overrides, load_scenario, parse_set_options, read_yaml

    with user_errors(), memory_limit(max_memory):
        overrides = parse_set_options(set_)
        sc = load_scenario(scenario, overrides)
        written = apply_overrides(read_yaml(scenario), overrides).get("churn")
        check_memory(sc)  # the set-up below draws the state
        built = engine_for(sc, sc.seed)
        absent = _expected_absent(sc, built.peers)
        constants = built.protocol.describe()
    peers = built.peers
    names = [c.name for c in sc.peers.classes or []]
    _rows({"scenario": sc.name, "clock": sc.clock, "peers": _peer_count(sc, peers),
           "vector": f"{sc.vector.dim} × {sc.vector.dtype}", "seed": sc.seed})  # fmt: skip
    for index in sorted(int(k) for k in peers["class"].unique()):
        rows = peers[peers["class"] == index]
        name = names[index] if index < len(names) else None
        _class_table(_class_title(index, name, len(names), len(rows)), rows)
    churn = sc.churn.model_dump(by_alias=True, exclude_none=True)
    expected = f"{absent:.3g} of the peers ({absent:.1%}, time average)"
    _rows({"churn": _churn_text(churn, written, sc.clock), "expected absent": expected},
          title="churn")  # fmt: skip
    _rows({"protocol": sc.protocol.name, **constants}, title="protocol")


def _expected_absent(sc: Any, peers: pd.DataFrame) -> float:
    """The churn model's mean absent fraction over the initial peers."""
    initial = peers["class"].to_numpy()[: sc.peers.count]
    names = [c.name for c in sc.peers.classes or []]
    horizon = sc.stop.max_time if sc.clock == "network" else sc.stop.max_rounds
    return float(sc.churn.expected_absent_fraction(initial, names, horizon))


def _peer_count(sc: Any, peers: pd.DataFrame) -> str:
    joining = len(peers) - sc.peers.count
    text = f"{sc.peers.count}"
    if sc.peers.classes:
        text += f" in {len(sc.peers.classes)} classes"
    return text + (f" (+{joining} joining during the run)" if joining else "")


def _class_title(index: int, name: str | None, classes: int, count: int) -> str:
    if classes == 0:
        return f"peers: {count}"
    return f"class {index}" + (f" ({name})" if name else "") + f": {count} peers"


def _class_table(title: str, rows: pd.DataFrame) -> None:
    """Median, min and max of each per-peer value of one class, in human units."""
    lines = [["", "median", "min", "max"]]
    for column, label, show in PEER_VALUES:
        values = rows[column].to_numpy(dtype=float)
        stats = (median(values), values.min(), values.max())
        lines.append([label, *(show(float(v)) for v in stats)])
    if rows["client"].any():
        lines.append(["client", "yes", "", ""])
    _print_block(title, _aligned(lines))


def _churn_text(churn: dict[str, Any], written: Any, clock: str) -> str:
    """``waves: rate=3/min (0.05/s), fraction=10% (0.1), duration=20 s, class=spot, …``:
    each value as the scenario wrote it, followed by what it resolves to in seconds (in
    rounds on the rounds clock) when that reads differently."""
    model = churn.pop("model", "none")
    churn["rejoin"] = churn.pop("rejoin", "keep")  # last
    if model == "none" and list(churn) == ["rejoin"] and churn["rejoin"] == "keep":
        return "none"
    written = written if isinstance(written, dict) else {}
    shown = [f"{key}={_churn_value(key, value, written.get(key), clock)}"
             for key, value in churn.items()]  # fmt: skip
    return f"{model}: " + ", ".join(shown)


def _churn_value(key: str, value: Any, written: Any, clock: str) -> str:
    """``value`` as ``written`` in the scenario, then resolved in parentheses when that
    reads differently: ``5 min (300 s)``, ``5 min (300 rounds)``, ``3/min (0.05/s)``;
    a number written alone gets its unit: ``300 s``."""
    if isinstance(value, dict):
        inner = written if isinstance(written, dict) else {}
        parts = [f"{k}={_churn_value(k, v, inner.get(k), clock)}" for k, v in value.items()]
        return "{" + ", ".join(parts) + "}"
    resolved = _resolved(key, value, clock)
    if not isinstance(written, str) or "".join(written.split()) == "".join(resolved.split()):
        return resolved
    return f"{written.strip()} ({resolved})"


def _resolved(key: str, value: Any, clock: str) -> str:
    """Durations and rates in seconds on the network clock, else in rounds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if key in CHURN_DURATIONS:
        return f"{value:g} s" if clock == "network" else f"{value:g} rounds"
    if key == "rate":
        return f"{value:g}/s" if clock == "network" else f"{value:g}/round"
    return cell(value)


def _rows(rows: dict[str, Any], title: str | None = None) -> None:
    lines = [[key, cell(value)] for key, value in rows.items()]
    _print_block(title, _aligned(lines, width=KEY_WIDTH))


def _aligned(lines: Sequence[Sequence[str]], width: int | None = None) -> list[str]:
    """Columns padded to their widest cell (the first to at least ``width``)."""
    widths = [max(len(str(line[k])) for line in lines) for k in range(len(lines[0]))]
    if width is not None:
        widths[0] = max(widths[0], width)
    return ["  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
            for line in lines]  # fmt: skip


def _print_block(title: str | None, lines: Sequence[str]) -> None:
    if title:
        stdout.print(f"\n{title}", soft_wrap=True, markup=False)
    for line in lines:
        stdout.print(f"  {line}" if title else line, soft_wrap=True, markup=False)
