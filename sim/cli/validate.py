"""``avsim validate``: check a scenario or a sweep file."""

from __future__ import annotations

import typer

from sim.cli.app import ScenarioArg, SetOption, app, user_errors


@app.command()
def validate(scenario: ScenarioArg, set_: SetOption = None) -> None:
    """Check a scenario or a sweep file: print "ok", or one line saying what is wrong (exit 2).

    A sweep file (one with ``base``, ``scenario``, ``cases`` or ``grid`` and no scenario
    section) is checked by expanding every run it describes, with ``--set`` applied to
    every run as ``avsim sweep`` would.
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
