"""``avsim info`` shows churn values as the scenario wrote them, with what they resolve
to (seconds, or rounds on the rounds clock) in parentheses when that reads differently:
``mtbf=5 min (300 s)``, never a silently converted ``5 min`` → ``300 rounds``."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sim.cli import app

SCENARIO = """\
name: churny
clock: {clock}
peers: {{count: 8}}
churn: {churn}
protocol: {{name: gossip}}
stop: {{max_time: 1 h, max_rounds: 20}}
"""


def churn_line(tmp_path: Path, churn: str, clock: str = "network", *extra: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(clock=clock, churn=churn))
    result = CliRunner().invoke(app, ["info", str(path), *extra])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if line.strip().startswith("churn "))
    return line.split("churn", 1)[1].strip()


def test_durations_keep_the_unit_written_and_show_seconds(tmp_path):
    text = churn_line(tmp_path, "{model: exponential, mtbf: 5 min, mttr: 30 s}")
    assert text == "exponential: mtbf=5 min (300 s), mttr=30 s, rejoin=keep"


def test_on_the_rounds_clock_the_written_unit_comes_with_its_rounds(tmp_path):
    text = churn_line(tmp_path, "{model: exponential, mtbf: 5 min, mttr: 30 s}", "rounds")
    assert text == "exponential: mtbf=5 min (300 rounds), mttr=30 s (30 rounds), rejoin=keep"


def test_plain_numbers_get_their_unit_and_are_not_rescaled(tmp_path):
    text = churn_line(tmp_path, "{model: exponential, mtbf: 300, mttr: 30}")
    assert text == "exponential: mtbf=300 s, mttr=30 s, rejoin=keep"


def test_rates_and_fractions_of_waves_and_set_options_are_shown_as_written(tmp_path):
    churn = "{model: waves, rate: 0.2, fraction: 0.1, duration: 20 s}"
    text = churn_line(tmp_path, churn, "network", "--set", "churn.rate=3/min",
                      "--set", "churn.fraction=30%", "--set", "churn.duration=2 min")  # fmt: skip
    assert (
        text
        == "waves: rate=3/min (0.05/s), fraction=30% (0.3), duration=2 min (120 s), rejoin=keep"
    )
