"""Churn models as schedules: statistics, exact replays, seeding, and both clocks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy

import sim
from sim.core.errors import ScenarioError
from sim.model.churn import build_round_churn, build_schedule, churn_process
from sim.model.churn.schedule import WavesSchedule
from sim.model.peers import resolve_peers
from sim.model.scenario import scenario_from_mapping
from sim.model.scenario.churn import (
    BernoulliChurn,
    ExponentialChurn,
    NoChurn,
    TraceChurn,
    WavesChurn,
)

BASE = {"name": "t", "protocol": {"name": "random_groups", "group_size": 4}}
WAVES = {"model": "waves", "rate": 1, "fraction": 1, "duration": 1}


def make(**overrides):
    return scenario_from_mapping(BASE, overrides)


def steps_until(schedule, until_s):
    """Every step of ``schedule`` up to ``until_s`` (inclusive)."""
    out = []
    for change in schedule:
        if change.time_s > until_s:
            break
        out.append(change)
    return out


def uptime_fraction(schedule, n_peers, until_s):
    """Time-average fraction of peers up over [0, until_s], replayed from the steps."""
    up, last_s, area = n_peers, 0.0, 0.0
    for change in steps_until(schedule, until_s):
        area += up * (change.time_s - last_s)
        up += change.up.size - change.down.size
        last_s = change.time_s
    return (area + up * (until_s - last_s)) / (n_peers * until_s)


# -- none and bernoulli ----------------------------------------------------------------


def test_none_never_changes_and_everyone_is_present():
    schedule = build_schedule(NoChurn(), 5, np.random.default_rng(0))
    assert list(schedule) == []
    assert schedule.present_at(1e9).all()


@pytest.mark.parametrize("p", [0.0, 0.2, 1.0])
def test_bernoulli_rounds_clock_draws_exactly_the_historical_per_round_masks(p):
    churn = BernoulliChurn(model="bernoulli", p=p)
    rounds = build_round_churn(churn, 50, np.random.default_rng(5))
    reference = np.random.default_rng(5)
    for t in range(30):
        expected = np.ones(50, bool) if p == 0 else reference.random(50) >= p
        np.testing.assert_array_equal(rounds.present(t), expected)


def test_bernoulli_period_sets_the_redraw_times_and_p_the_absent_fraction():
    churn = BernoulliChurn(model="bernoulli", p=0.1, period=0.5)
    changes = steps_until(build_schedule(churn, 1000, np.random.default_rng(1)), 100.0)
    assert [c.time_s for c in changes] == [k * 0.5 for k in range(201)]
    schedule = build_schedule(churn, 1000, np.random.default_rng(1))
    absent = np.mean([1 - schedule.present_at(t / 4).mean() for t in range(400)])
    assert absent == pytest.approx(0.1, abs=0.005)  # sd ≈ 0.0007 over 200 draws of 1000


def test_bernoulli_period_defaults_to_one_second():
    assert BernoulliChurn(model="bernoulli", p=0.5).period_s == 1.0


# -- exponential -------------------------------------------------------------------------


def test_exponential_long_run_availability_is_mtbf_over_mtbf_plus_mttr():
    churn = ExponentialChurn(model="exponential", mtbf=3.0, mttr=1.0)
    schedule = build_schedule(churn, 2000, np.random.default_rng(2))
    # ≈ 2000 × 50 independent cycles: sd of the time average ≈ 0.002
    assert uptime_fraction(schedule, 2000, 200.0) == pytest.approx(0.75, abs=0.01)


def test_exponential_starts_stationary():
    churn = ExponentialChurn(model="exponential", mtbf=3.0, mttr=1.0)
    schedule = build_schedule(churn, 4000, np.random.default_rng(3))
    assert schedule.present_at(0.0).mean() == pytest.approx(0.75, abs=0.03)  # sd 0.007


def test_exponential_up_and_down_times_have_means_mtbf_and_mttr():
    n, mtbf_s, mttr_s = 500, 5.0, 2.0
    churn = ExponentialChurn(model="exponential", mtbf=mtbf_s, mttr=mttr_s)
    last_s = np.zeros(n)
    ups, downs = [], []
    for change in steps_until(build_schedule(churn, n, np.random.default_rng(4)), 500.0):
        if change.time_s > 0:  # at 0: the initial state, not the end of an up-time
            ups.append(change.time_s - last_s[change.down])
            downs.append(change.time_s - last_s[change.up])
        last_s[change.down] = last_s[change.up] = change.time_s
    # each peer's first interval is a residual, also exponential (memoryless); ~35 000
    # intervals of each kind: relative sd of the means ≈ 0.5 %
    assert np.concatenate(ups).mean() == pytest.approx(mtbf_s, rel=0.03)
    assert np.concatenate(downs).mean() == pytest.approx(mttr_s, rel=0.03)


# -- waves -------------------------------------------------------------------------------


def test_waves_come_at_the_poisson_rate_and_last_their_duration():
    churn = WavesChurn(model="waves", rate=2.0, fraction=0.25, duration=1e-6)
    changes = steps_until(build_schedule(churn, 40, np.random.default_rng(6)), 2000.0)
    waves = [c for c in changes if c.down.size]
    assert abs(len(waves) - 4000) < 5 * math.sqrt(4000)
    assert all(c.down.size == 10 for c in waves)
    for wave, end in zip(changes[::2], changes[1::2], strict=False):
        np.testing.assert_array_equal(wave.down, end.up)
        assert end.time_s == pytest.approx(wave.time_s + 1e-6, abs=1e-9)


def test_waves_on_a_class_hit_only_that_class_and_the_right_fraction_of_it():
    sc = make(
        **{
            "peers.count": 40,
            "peers.classes": [
                {"name": "dc", "fraction": 0.75},
                {"name": "spot", "fraction": 0.25},
            ],
            "churn": {
                "model": "waves",
                "rate": 0.5,
                "fraction": 0.4,
                "duration": 0.5,
                "class": "spot",
            },
        }
    )
    table = resolve_peers(sc.peers, np.random.default_rng(0))
    classes = table["class"].to_numpy()
    spot = set(np.flatnonzero(classes == 1).tolist())
    names = [c.name for c in sc.peers.classes]
    schedule = build_schedule(
        sc.churn, 40, np.random.default_rng(7), peer_classes=classes, class_names=names
    )
    present = np.ones(40, bool)
    for change in steps_until(schedule, 500.0):
        assert set(change.down.tolist()) <= spot
        if change.down.size and present[list(spot)].all():
            assert change.down.size == 4  # round(0.4 × 10)
        present[change.down], present[change.up] = False, True


def test_waves_on_a_class_need_the_peer_classes():
    churn = WavesChurn.model_validate(
        {"model": "waves", "rate": 1, "fraction": 0.5, "duration": 1, "class": 0}
    )
    with pytest.raises(ValueError, match="peer_classes"):
        build_round_churn(churn, 4, np.random.default_rng(0))
    by_index = build_round_churn(churn, 4, np.random.default_rng(0), np.array([0, 1, 0, 1]))
    assert by_index.present(0).all()


class ScriptedRng:
    """Stands in for the generator: fixed gaps between waves and fixed victims."""

    def __init__(self, gaps, victims):
        self.gaps, self.victims = list(gaps), list(victims)

    def exponential(self, scale):
        return self.gaps.pop(0)

    def choice(self, eligible, size, replace):
        return np.array(self.victims.pop(0))


def test_a_peer_hit_while_down_stays_down_until_the_later_return():
    rng = ScriptedRng([1.0, 1.5, 100.0, 100.0], [[0, 1], [1, 2], [3]])
    schedule = WavesSchedule(4, rng, 1.0, 0.5, 2.0, np.arange(4))
    got = [(c.time_s, c.down.tolist(), c.up.tolist()) for c in steps_until(schedule, 50)]
    assert got == [(1.0, [0, 1], []), (2.5, [2], []), (3.0, [], [0]), (4.5, [], [1, 2])]


def test_a_wave_that_starts_as_another_ends_keeps_its_peers_down():
    rng = ScriptedRng([1.0, 2.0, 100.0, 100.0], [[0, 1], [1, 2], [3]])
    schedule = WavesSchedule(4, rng, 1.0, 0.5, 2.0, np.arange(4))
    got = [(c.time_s, c.down.tolist(), c.up.tolist()) for c in steps_until(schedule, 50)]
    assert got == [(1.0, [0, 1], []), (3.0, [2], [0]), (5.0, [], [1, 2])]


# -- trace -------------------------------------------------------------------------------


def test_trace_is_replayed_exactly(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("peer,down_s,up_s\n2,1.5,inf\n0,0,2\n1,1.5,3\n0,2,2.5\n0,4,5\n")
    schedule = build_schedule(TraceChurn(model="trace", file=str(path)), 3, None)
    got = [(c.time_s, c.down.tolist(), c.up.tolist()) for c in schedule]
    assert got == [
        (0.0, [0], []),
        (1.5, [1, 2], []),
        (2.5, [], [0]),  # 0–2 and 2–2.5 touch: one absence
        (3.0, [], [1]),
        (4.0, [0], []),
        (5.0, [], [0]),
    ]


# -- every model -------------------------------------------------------------------------

MODELS = [
    BernoulliChurn(model="bernoulli", p=0.3, period=0.7),
    ExponentialChurn(model="exponential", mtbf=2.0, mttr=0.5),
    WavesChurn(model="waves", rate=1.0, fraction=0.3, duration=1.5),
]


def as_tuples(changes):
    return [(c.time_s, c.down.tolist(), c.up.tolist()) for c in changes]


@pytest.mark.parametrize("churn", MODELS, ids=lambda c: c.model)
def test_same_seed_gives_the_same_schedule_and_another_seed_another(churn):
    def first(seed):
        return as_tuples(steps_until(build_schedule(churn, 30, np.random.default_rng(seed)), 40))

    assert first(11) == first(11)
    assert first(11) != first(12)


@pytest.mark.parametrize("churn", MODELS, ids=lambda c: c.model)
def test_present_at_agrees_with_replaying_the_steps(churn):
    changes = steps_until(build_schedule(churn, 30, np.random.default_rng(8)), 40)
    sampled = build_schedule(churn, 30, np.random.default_rng(8))
    state = np.ones(30, bool)
    for change, after in zip(changes, [*changes[1:], None], strict=True):
        state[change.down], state[change.up] = False, True
        np.testing.assert_array_equal(sampled.present_at(change.time_s), state)
        if after is not None:
            middle_s = (change.time_s + after.time_s) / 2
            np.testing.assert_array_equal(sampled.present_at(middle_s), state)


SLOW = [  # steps further apart than a round: steady rounds between them
    NoChurn(),
    ExponentialChurn(model="exponential", mtbf=400.0, mttr=30.0),
    WavesChurn(model="waves", rate=0.1, fraction=0.3, duration=2.5),
]


@pytest.mark.parametrize("churn", MODELS + SLOW, ids=lambda c: f"{c.model}{c in SLOW}")
def test_a_steady_round_has_the_presence_last_read(churn):
    """The rounds clock skips its churn step in a steady round: it must be one whose
    presence is the last read's, and a round after a step (an empty one too) is not."""
    rounds = build_round_churn(churn, 30, np.random.default_rng(8))
    replay = build_schedule(churn, 30, np.random.default_rng(8))
    assert not rounds.steady(0)  # nothing read yet
    last, steady_seen = rounds.present(0), 0
    np.testing.assert_array_equal(last, replay.present_at(0.0))
    for t in range(1, 60):
        step_in_round = replay.steps_due(float(t))
        replay.present_at(float(t))
        if rounds.steady(t):
            assert not step_in_round
            steady_seen += 1
            continue
        assert step_in_round
        last = rounds.present(t)
        np.testing.assert_array_equal(last, replay.present_at(float(t)))
    assert steady_seen > 0 or churn not in SLOW


def test_present_at_only_moves_forward():
    schedule = build_schedule(MODELS[1], 4, np.random.default_rng(0))
    schedule.present_at(3.0)
    with pytest.raises(ValueError, match="forward"):
        schedule.present_at(2.0)


# -- the network clock's process ---------------------------------------------------------


class Recorder:
    def __init__(self, env):
        self.env, self.calls = env, []

    def down(self, peers):
        self.calls.append((self.env.now, "down", peers.tolist()))

    def up(self, peers):
        self.calls.append((self.env.now, "up", peers.tolist()))


def test_churn_process_applies_downs_then_ups_at_each_change_time(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("peer,down_s,up_s\n0,0,2\n1,1,2.5\n2,2,3\n")
    env = simpy.Environment()
    schedule = build_schedule(TraceChurn(model="trace", file=str(path)), 3, None)
    recorder = Recorder(env)
    timeouts = []
    plain_timeout = env.timeout
    env.timeout = lambda delay: timeouts.append(delay) or plain_timeout(delay)
    env.process(churn_process(env, schedule, recorder.down, recorder.up))
    env.run()
    assert recorder.calls == [
        (0.0, "down", [0]),
        (1.0, "down", [1]),
        (2.0, "down", [2]),
        (2.0, "up", [0]),
        (2.5, "up", [1]),
        (3.0, "up", [2]),
    ]
    assert len(timeouts) == 4  # one event per distinct later change time, none per peer


def test_churn_process_runs_an_infinite_schedule_until_the_environment_stops():
    env = simpy.Environment()
    churn = ExponentialChurn(model="exponential", mtbf=1.0, mttr=1.0)
    schedule = build_schedule(churn, 100, np.random.default_rng(0))
    present = np.ones(100, bool)

    def down(peers):
        assert present[peers].all()
        present[peers] = False

    def up(peers):
        assert not present[peers].any()
        present[peers] = True

    env.process(churn_process(env, schedule, down, up))
    env.run(until=50.0)
    again = build_schedule(churn, 100, np.random.default_rng(0))
    np.testing.assert_array_equal(present, again.present_at(50.0))


# -- the scenario section ----------------------------------------------------------------


def test_every_model_parses_with_units():
    sc = make(churn={"model": "exponential", "mtbf": "2 min", "mttr": "30 s", "rejoin": "fetch"})
    assert (sc.churn.mtbf, sc.churn.mttr, sc.churn.rejoin) == (120.0, 30.0, "fetch")
    sc = make(churn={"model": "waves", "rate": 0.01, "fraction": 1, "duration": "5 min"})
    assert sc.churn.duration == 300.0
    assert sc.churn.peer_class is None
    assert make(churn={"model": "trace", "file": "x.csv"}).churn.file == "x.csv"


def test_wave_class_survives_the_resolved_dump():
    classes = [{"name": "spot", "fraction": 0.5}, {"fraction": 0.5}]
    churn = {"model": "waves", "rate": 1, "fraction": 0.5, "duration": 1, "class": "spot"}
    sc = make(**{"peers.classes": classes, "churn": churn})
    dumped = sc.model_dump(mode="json")
    assert dumped["churn"]["class"] == "spot"
    assert scenario_from_mapping(dumped) == sc


@pytest.mark.parametrize(
    ("churn", "key", "fragment"),
    [
        ({"model": "exponential", "mtbf": "-1 s", "mttr": 1}, "churn.mtbf", "duration"),
        ({"model": "exponential", "mtbf": 0, "mttr": 1}, "churn.mtbf", "> 0"),
        ({"model": "exponential", "mtbf": 1}, "churn.mttr", "required"),
        ({"model": "bernoulli", "p": 0.1, "period": 0}, "churn.period", "> 0"),
        ({"model": "waves", "rate": 0, "fraction": 0.5, "duration": 1}, "churn.rate", "greater"),
        ({"model": "waves", "rate": 1, "fraction": 0, "duration": 1}, "churn.fraction", "greater"),
        ({"model": "waves", "rate": 1, "fraction": 1.5, "duration": 1}, "churn.fraction", "1"),
        ({"model": "waves", "rate": 1, "fraction": 1, "duration": "0 s"}, "churn.duration", "> 0"),
        ({**WAVES, "class": 1.5}, "churn.class", "class name or index"),
        ({**WAVES, "class": "x"}, "churn.class", "none given"),
        ({"model": "trace", "file": ""}, "churn.file", "at least 1"),
        ({"model": "trace"}, "churn.file", "required"),
        ({"model": "weibull"}, "churn.model", "exponential"),
    ],
)  # fmt: skip
def test_bad_churn_values_name_the_dotted_key(churn, key, fragment):
    with pytest.raises(ScenarioError) as info:
        make(churn=churn)
    message = str(info.value)
    assert message.startswith(f"{key}: "), message
    assert fragment in message
    assert "\n" not in message


@pytest.mark.parametrize("selector", ["gpu", 2, -1])
def test_an_unknown_wave_class_is_refused_with_the_known_ones(selector):
    classes = [{"name": "spot", "fraction": 0.5}, {"name": "dc", "fraction": 0.5}]
    churn = {"model": "waves", "rate": 1, "fraction": 0.5, "duration": 1, "class": selector}
    with pytest.raises(ScenarioError) as info:
        make(**{"peers.classes": classes, "churn": churn})
    assert str(info.value).startswith("churn.class: ")
    assert "0 (spot), 1 (dc)" in str(info.value)


# -- the rounds clock end to end ---------------------------------------------------------


def test_exponential_churn_on_the_rounds_clock_keeps_the_availability():
    sc = make(
        **{
            "peers.count": 200,
            "churn": {"model": "exponential", "mtbf": 3, "mttr": 1},
            "stop": {"max_rounds": 60, "target_var": None},
        }
    )
    alive = sim.run(sc, seed=0).metrics["alive_fraction"].to_numpy()[1:]
    assert alive.mean() == pytest.approx(0.75, abs=0.05)


def test_waves_that_keep_everyone_down_still_yield_steps():
    churn = WavesChurn(model="waves", rate=5.0, fraction=1.0, duration=100.0)
    changes = steps_until(build_schedule(churn, 8, np.random.default_rng(0)), 50.0)
    assert changes[0].down.tolist() == list(range(8))
    assert len(changes) > 100
    assert not any(c.down.size or c.up.size for c in changes[1:])  # nobody is ever back
