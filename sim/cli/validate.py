"""``avsim validate``: check a scenario or a sweep file."""

from __future__ import annotations

import typer

from sim.cli.app import ScenarioArg, SetOption, app, user_errors
from sim.errors import ScenarioError


@app.command()
def validate(scenario: ScenarioArg, set_: SetOption = None) -> None:
    """Check a scenario or a sweep file: print "ok", or one line saying what is wrong (exit 2).

    A sweep file (one with ``cases``) is checked by expanding every run it describes.
    """
    from sim.scenario import load_scenario, parse_set_options
    from sim.scenario.loader import read_yaml

    with user_errors():
        data = read_yaml(scenario)
        if isinstance(data, dict) and "cases" in data:
            from sim.sweeps import load_sweep
            from sim.sweeps.plan import expand

            if set_:
                raise ScenarioError("--set", set_, "no --set with a sweep file (edit its cases)")
            runs = expand(load_sweep(scenario))
            typer.echo(f"ok (sweep of {len(runs)} runs)")
            return
        load_scenario(scenario, parse_set_options(set_))
    typer.echo("ok")
