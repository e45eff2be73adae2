"""The churn schedule read ahead (:class:`sim.model.churn.lookahead.ChurnLookahead`): it
announces every change the churn process makes, at the very instant (the same float)
it makes it, and hands the process the schedule's steps unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from sim.model.churn import build_schedule, churn_process
from sim.model.churn.lookahead import ChurnLookahead
from sim.model.scenario.churn import BernoulliChurn, ExponentialChurn, WavesChurn

CHURNS = [
    ExponentialChurn(model="exponential", mtbf=30.0, mttr=5.0),
    BernoulliChurn(model="bernoulli", p=0.2, period=0.7),
    WavesChurn(model="waves", rate=0.05, fraction=0.3, duration=3.0),
]


def _applied(churn, n, seed, start_s, until_s, asked):
    """Run the churn process over a read-ahead schedule from ``start_s``; every change it
    makes as (env.now, peer, up), and what ``asked(lookahead, env)`` collected meanwhile."""
    env = simpy.Environment(initial_time=start_s)
    ahead = ChurnLookahead(build_schedule(churn, n, np.random.default_rng(seed)), start_s)
    made: list[tuple[float, int, bool]] = []

    def record(up):
        return lambda peers: made.extend((float(env.now), int(p), up) for p in peers.tolist())

    env.process(churn_process(env, ahead, record(False), record(True)))
    answers = asked(ahead, env)
    env.run(until=until_s)
    return made, answers


@pytest.mark.parametrize("churn", CHURNS, ids=lambda c: c.model)
def test_the_read_ahead_announces_each_change_at_the_instant_it_is_made(churn) -> None:
    """Over thousands of steps (``start_s + (t - start_s)`` is not ``t`` for some)."""
    members = np.array([1, 4, 5, 9, 10])
    start_s, until_s = 0.3, 4000.0

    def ask_first(ahead, env):  # all of it, before the process has run at all
        return ahead.ahead(members, -np.inf, until_s)

    made, announced = _applied(churn, 12, 2, start_s, until_s, ask_first)
    mine = [c for c in made if c[1] in members.tolist()]
    assert len(mine) > 20
    assert announced == mine  # same instants to the bit, same order


@pytest.mark.parametrize("churn", CHURNS, ids=lambda c: c.model)
def test_windows_asked_while_the_process_runs_tile_its_changes(churn) -> None:
    """Windows (after, until] asked at the instants of a timer, each from now on, give
    the changes made in them, whatever the process has drawn by then."""
    members = np.arange(0, 12, 3)
    windows: list[tuple[float, float, list]] = []

    def ask_along(ahead, env):
        def asking():
            while True:
                now = float(env.now)
                windows.append((now, now + 17.0, ahead.ahead(members, now, now + 17.0)))
                ahead.forget_before(now)
                yield env.timeout(5.0)

        env.process(asking())

    made, _ = _applied(churn, 12, 3, 0.0, 300.0, ask_along)
    for after, until, got in windows[:-4]:
        assert got == [c for c in made if after < c[0] <= until and c[1] in members.tolist()]


def test_the_process_gets_the_schedules_steps_unchanged() -> None:
    churn = CHURNS[0]
    plain = build_schedule(churn, 20, np.random.default_rng(1))
    ahead = ChurnLookahead(build_schedule(churn, 20, np.random.default_rng(1)), 0.0)
    ahead.ahead(np.arange(20), -np.inf, 50.0)  # drawn ahead meanwhile
    for _ in range(100):
        a, b = next(plain), next(ahead)
        assert a.time_s == b.time_s
        np.testing.assert_array_equal(a.down, b.down)
        np.testing.assert_array_equal(a.up, b.up)
