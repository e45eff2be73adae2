"""A sweep's pool workers stop on SIGTERM without dying (sim.output.sweeps.executors).

A worker killed while it writes a result into the pool's pipe leaves half a message
there, and the pool's reader thread waits for the rest forever (an interrupted sweep
then hung until its watchdog ended it, and the resource tracker warned of leaked
semaphores). So a signal ends the run in flight with :class:`Interrupted`, or,
outside a run, only marks the worker stopped: it stays alive, and runs nothing more.
"""

from __future__ import annotations

import copy
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psutil
import pytest

from sim.core.errors import Interrupted
from sim.output.sweeps import executors
from sim.output.sweeps.executors import Task, init_worker, run_task

#: A run far longer than any test waits.
ENDLESS = {
    "name": "endless",
    "peers": {"count": 64},
    "vector": {"dim": 2048},
    "protocol": {"name": "gossip", "topology": "ring"},
    "stop": {"max_rounds": 10_000_000, "target_var": 0},
}
WAIT_S = 60.0


def task(index: int = 0) -> Task:
    return Task(index, copy.deepcopy(ENDLESS), {}, Path.cwd(), index)


def pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(1, mp_context=executors._context(), initializer=init_worker)


def busy(pid: int) -> bool:
    """True once the worker has used a second of CPU in a run."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system > 1.0


def test_a_signal_ends_the_run_in_flight_and_the_worker_runs_nothing_more():
    with pool() as workers:
        pid = workers.submit(os.getpid).result(timeout=WAIT_S)
        running = workers.submit(run_task, task())
        deadline = time.monotonic() + WAIT_S
        while not busy(pid):
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.05)
        os.kill(pid, signal.SIGTERM)
        with pytest.raises(Interrupted) as raised:
            running.result(timeout=WAIT_S)
        assert raised.value.signum == signal.SIGTERM
        assert raised.value.exit_code == 128 + signal.SIGTERM
        assert str(raised.value) == "SIGTERM"
        assert psutil.pid_exists(pid)  # stopped, not killed
        with pytest.raises(Interrupted):
            workers.submit(run_task, task(1)).result(timeout=WAIT_S)


def test_a_signal_between_runs_only_marks_the_worker_stopped():
    with pool() as workers:
        pid = workers.submit(os.getpid).result(timeout=WAIT_S)
        os.kill(pid, signal.SIGINT)  # idle: waiting for its next task
        assert workers.submit(os.getpid).result(timeout=WAIT_S) == pid  # alive, working
        start = time.monotonic()
        with pytest.raises(Interrupted) as raised:
            workers.submit(run_task, task()).result(timeout=WAIT_S)
        assert raised.value.signum == signal.SIGINT
        assert time.monotonic() - start < WAIT_S / 2  # raised at the start, not run


def test_the_handler_raises_only_inside_a_run(monkeypatch: pytest.MonkeyPatch):
    state = executors._WorkerState()
    monkeypatch.setattr(executors, "_WORKER", state)
    executors._stop_worker(signal.SIGTERM, None)
    assert state.stopped == signal.SIGTERM
    state.running = True
    with pytest.raises(Interrupted):
        executors._stop_worker(signal.SIGTERM, None)
    assert not state.running  # raised once; a second signal while unwinding only marks
    executors._stop_worker(signal.SIGTERM, None)
