"""``avsim info``: what a scenario resolves to, without running it."""

from __future__ import annotations

from typing import Any

from sim.cli.app import ScenarioArg, SetOption, app, cell, stdout, user_errors


@app.command()
def info(scenario: ScenarioArg, set_: SetOption = None) -> None:
    """Show what a scenario resolves to: peers, protocol and its derived constants
    (e.g. A²CiD²'s chi1, chi2, eta, alpha_tilde), without running it."""
    from sim.engine import Run
    from sim.scenario import load_scenario, parse_set_options

    with user_errors():
        sc = load_scenario(scenario, parse_set_options(set_))
        built = Run(sc, sc.seed)
    peers = built.peers
    rows: dict[str, Any] = {
        "clock": sc.clock,
        "peers": sc.peers.count,
        "upload median (bytes/s)": float(peers["upload_bytes_per_s"].median()),
        "latency median (s)": float(peers["latency_s"].median()),
        "protocol": sc.protocol.name,
        **built.protocol.describe(),
    }
    for key, value in rows.items():
        stdout.print(f"{key:<28} {cell(value)}", soft_wrap=True)
