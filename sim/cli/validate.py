"""``avsim validate``: check a scenario or a sweep file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sim.cli.app import SetOption, app, user_errors


@app.command()
def validate(
    scenario: Annotated[Path, typer.Argument(help="Scenario or sweep YAML file.")],
    set_: SetOption = None,
) -> None:
    """Check a scenario or a sweep file: print "ok", or one line saying what is wrong.

    A wrong file exits with code 2. A sweep file (one with base, scenario, cases or grid
    and no scenario key of its own, such as peers or protocol) is checked by expanding
    every run it describes, with --set applied to every run as avsim sweep would.
    """
    from sim.model.scenario import load_scenario, parse_set_options
    from sim.model.scenario.loader import is_sweep_mapping, read_yaml

    with user_errors():
        if is_sweep_mapping(read_yaml(scenario)):
            from sim.output.sweeps import load_sweep
            from sim.output.sweeps.plan import expand

            runs = expand(load_sweep(scenario), parse_set_options(set_))
            typer.echo(f"ok (sweep of {len(runs)} runs)")
            return
        load_scenario(scenario, parse_set_options(set_))
    typer.echo("ok")
