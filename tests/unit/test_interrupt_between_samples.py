"""The run's interrupt is honoured between samples: a network-clock run that goes long
without a sample (here a continuous protocol sampled once per run) still ends soon after
the interrupt is set, with a complete result; an interrupt that is never set changes
nothing. And an interrupt that a library wrapped in its own error is still one line."""

from __future__ import annotations

import pickle
import signal
import threading
from typing import Any

import pandas as pd
import pytest
import simpy
import typer
from pydantic import BaseModel, field_serializer
from pydantic_core import PydanticSerializationError

import sim
from sim.cli.app import user_errors
from sim.cli.signals import Interrupted, interrupt_in
from sim.engine import run
from sim.engine.observe.observer import POLL_EVENTS

MAX_TIME_S = 2000.0
#: A continuous protocol with churn, sampled only at the start and at max_time.
RARELY_SAMPLED: dict[str, Any] = {
    "name": "rare",
    "clock": "network",
    "peers": {"count": 16},
    "vector": {"dim": 4},
    "churn": {"model": "exponential", "mtbf": "20 s", "mttr": "5 s", "rejoin": "fetch"},
    "protocol": {"name": "pairwise_gossip", "topology": "ring", "rate": 1.0},
    "stop": {"max_time": MAX_TIME_S, "max_rounds": None, "target_var": 0},
    "metrics": {"every": MAX_TIME_S},
}


class SetAfterLooks(threading.Event):
    """An interrupt that reads as set from its ``looks``-th look on: a signal arriving
    at a fixed point of the run (deterministic, unlike a timer)."""

    def __init__(self, looks: int) -> None:
        super().__init__()
        self.looks = looks

    def is_set(self) -> bool:
        self.looks -= 1
        return self.looks <= 0 or super().is_set()


def scenario() -> Any:
    return sim.scenario_from_mapping(RARELY_SAMPLED)


def test_an_interrupt_between_samples_ends_the_run_soon():
    result = run(scenario(), interrupt=SetAfterLooks(looks=2))  # the 1st look: at t = 0
    summary = result.summary
    assert summary["stop_reason"] == "interrupted"
    assert 0 < summary["sim_time_s"] < MAX_TIME_S / 10
    assert summary["messages"] < 2 * POLL_EVENTS  # two looks, POLL_EVENTS events apart
    last = result.metrics.iloc[-1]
    assert last["time_s"] == summary["sim_time_s"]  # the final state is recorded
    assert list(result.metrics["time_s"]) == [0.0, summary["sim_time_s"]]


def test_an_interrupt_at_the_same_point_gives_the_same_result():
    first = run(scenario(), interrupt=SetAfterLooks(looks=3))
    again = run(scenario(), interrupt=SetAfterLooks(looks=3))
    pd.testing.assert_frame_equal(first.metrics, again.metrics)
    assert first.summary["sim_time_s"] == again.summary["sim_time_s"]


def test_an_interrupt_never_set_changes_nothing():
    sc = sim.scenario_from_mapping({**RARELY_SAMPLED, "stop": {**RARELY_SAMPLED["stop"],
                                    "max_time": 60.0}, "metrics": {"every": 7.0}})  # fmt: skip
    plain = run(sc)
    watched = run(sc, interrupt=threading.Event())
    pd.testing.assert_frame_equal(plain.metrics, watched.metrics)
    drop = {"wall_time_s"}
    assert {k: v for k, v in plain.summary.items() if k not in drop} == {
        k: v for k, v in watched.summary.items() if k not in drop
    }
    assert watched.summary["stop_reason"] == "max_time"


class _Serialized(BaseModel):
    x: int

    @field_serializer("x")
    def _signal_arrives(self, value: int) -> int:
        raise Interrupted(signal.SIGTERM)  # as the handler would, inside the serializer


def test_an_interrupt_wrapped_by_a_library_is_found():
    with pytest.raises(PydanticSerializationError) as raised:
        _Serialized(x=1).model_dump()
    assert not isinstance(raised.value, KeyboardInterrupt)  # pydantic wrapped it
    found = interrupt_in(raised.value)
    assert isinstance(found, Interrupted)
    assert found.signum == signal.SIGTERM
    assert interrupt_in(ValueError("no signal here")) is None


def test_a_wrapped_interrupt_is_one_line_and_exit_143(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(typer.Exit) as exited, user_errors("interrupted; nothing written"):
        _Serialized(x=1).model_dump()
    assert exited.value.exit_code == 128 + signal.SIGTERM
    assert capsys.readouterr().err == "error: interrupted by SIGTERM; nothing written\n"


def test_an_interrupt_raised_in_a_simpy_process_keeps_its_signal():
    """SimPy re-raises a copy made as ``type(e)(*e.args)``: the copy still names its
    signal (no ``'SIGTERM' is not a valid Signals`` from a copy built from the name)."""

    def process(env: simpy.Environment) -> Any:
        yield env.timeout(1)
        raise Interrupted(signal.SIGTERM, reported=True)

    env = simpy.Environment()
    env.process(process(env))
    with pytest.raises(Interrupted) as raised:
        env.run()
    copy = raised.value
    assert isinstance(copy.__cause__, Interrupted)  # SimPy's copy of the original
    assert (str(copy), copy.exit_code, copy.reported) == ("SIGTERM", 143, True)
    again = pickle.loads(pickle.dumps(copy))  # sweep workers send exceptions back
    assert (str(again), again.exit_code, again.reported) == ("SIGTERM", 143, True)
