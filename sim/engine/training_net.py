"""Training on the ``network`` clock: gradient steps that take ``compute`` seconds (issue 14).

With a ``workload`` every gradient step of peer i takes ``peers.compute`` c_i seconds
(per peer: stragglers are real) and is applied at the end of its compute slot.
:class:`GradientSlots` runs those slots for every engine of the network clock:

- **edge-clock protocols** (pairwise_gossip, push_sum, a2cid2; both schedules): a
  gradient clock per present peer, one step every c_i seconds, endlessly, in parallel
  with the protocol's exchanges (the A²CiD² paper's set-up); it starts when the peer is
  present (the run's start, a return) and stops when it is preempted;
- **peer loops** (``schedule: async``: moshpit, random_groups, gossip, sgp): a peer's
  local work is ``local_steps`` H slots back to back, then its ``delay``, then one
  averaging step (:meth:`sim.engine.peer_loops.PeerLoopEngine.local_work`);
- **barrier rounds** (``schedule: barrier``, and collectives under ``async``): before
  each round every present peer takes its H steps, each at its own pace; the round's
  flows start once the slowest present peer is done (synchronous local SGD). A peer
  that returns during the wait joins the round without steps; its steps start with the
  next round.

**Batching.** Slots that end at the same instant (bit-equal simulated times, which
equal compute times give) are one batch: the peers step together in one
:meth:`~sim.model.training.Trainer.steps` call, one batched gradient. Before it they
are brought to now with :meth:`~protocols.base.Protocol.sync_rows` (A²CiD² integrates
its lazy continuous mixing up to the step), and the step goes through the exact-target
tracker (:meth:`~sim.engine.observe.tracker.Tracker.change`).

**Order at one instant.** A slot's timer is a SimPy timeout; events of one instant run in
the order they were scheduled (SimPy's), so a step and a flow's completion or a
preemption at the same T may come in either order, the same in every run. Samples wait
for the steps: a row recorded at T counts every step whose slot ends at T
(:class:`~sim.engine.sampled.SampledEngine`; barrier rounds record after their rounds).
The run's end at ``stop.max_time`` comes before anything else at that instant, so steps
that would end exactly then are not taken.

**Presence.** :class:`GradientSlots` listens to the clock
(:class:`~sim.engine.netclock.PresenceListener`): a preempted peer's pending slot is
cancelled (it takes no step; those it took stay), and a returning peer first gets the
workload's ``rejoin`` rule (:meth:`~sim.model.training.Trainer.returned`, inside the
return's tracker change) and then, on an edge clock, a fresh gradient clock.
"""

from __future__ import annotations

from collections.abc import Generator
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import simpy

from protocols.base import Protocol
from protocols.contract import State
from sim.engine.observe.tracker import Tracker
from sim.engine.trace import Tracer
from sim.model.jitter import Jitter, NoJitter
from sim.model.training import Trainer

#: ``left`` of a gradient clock that never ends (edge-clock protocols).
ENDLESS = -1


class _Batch:
    """The slots that end at one instant ``at``: their peers step together."""

    __slots__ = ("at", "peers")

    def __init__(self, at: float) -> None:
        self.at = at
        self.peers: set[int] = set()


class GradientSlots:
    """Every peer's gradient steps on the network clock (see the module doc).

    Parameters
    ----------
    env
        The run's environment.
    trainer, state, protocol, tracker
        The run's trainer, state, protocol (``sync_rows``) and exact-target tracker.
    compute_s
        (n,) seconds per gradient step of each peer (``peers.compute``).
    rejoin, init
        ``churn.rejoin`` and ``workload.init`` (:meth:`~sim.model.training.Trainer.returned`).
    endless
        True on an edge clock: every present peer steps every ``compute`` seconds, and a
        returning peer starts a fresh gradient clock.
    """

    def __init__(self, env: simpy.Environment, trainer: Trainer, state: State,
                 protocol: Protocol, tracker: Tracker, compute_s: np.ndarray,
                 rejoin: str, init: str, endless: bool = False,
                 tracer: Tracer | None = None, jitter: Jitter | None = None) -> None:  # fmt: skip
        self.env, self.trainer, self.state = env, trainer, state
        self.tracer = tracer
        self.jitter = NoJitter() if jitter is None else jitter
        self.protocol, self.tracker = protocol, tracker
        self.compute_s = np.asarray(compute_s, dtype=float)
        self.rejoin, self.init, self.endless = rejoin, init, endless
        n = self.compute_s.size
        #: Steps left in each peer's run of slots (ENDLESS: a gradient clock; 0: none).
        self.left = np.zeros(n, dtype=np.int64)
        self._batches: dict[float, _Batch] = {}
        self._batch_of: dict[int, _Batch] = {}
        #: When each peer's current slot started (its steps' trace slices).
        self.slot_start = np.zeros(n)
        #: Succeeds when a peer's run of slots ends (True) or is cancelled (False).
        self._finished: dict[int, simpy.Event] = {}

    # -- runs of slots -------------------------------------------------------------------
    def run(self, peer: int, k: int) -> simpy.Event:
        """Start ``peer``'s run of ``k`` slots (:data:`ENDLESS`: a gradient clock) now;
        an event that succeeds when it ends (True) or is cancelled (False). ``k`` = 0
        ends at once."""
        self.cancel(np.array([peer]))
        done = self.env.event()
        if k == 0:
            return done.succeed(True)
        self.left[peer] = k
        self._finished[peer] = done
        self._slot(peer)
        return done

    def start(self, peers: np.ndarray) -> None:
        """A gradient clock for each of ``peers`` (edge-clock protocols), in peer order."""
        for peer in peers.tolist():
            self.run(peer, ENDLESS)

    def steps(self, peers: np.ndarray, k: int) -> Generator[simpy.Event, Any, None]:
        """Every peer of ``peers`` takes ``k`` steps at its own pace; returns when the
        slowest is done (or cancelled): barrier rounds' local work."""
        if k == 0 or peers.size == 0:
            return
        events = [self.run(p, k) for p in peers.tolist()]
        yield self.env.all_of(events)

    def cancel(self, peers: np.ndarray) -> None:
        """``peers`` take no more steps in their current run (its event succeeds, False)."""
        for peer in peers.tolist():
            batch = self._batch_of.pop(peer, None)
            if batch is not None:
                batch.peers.discard(peer)
            self.left[peer] = 0
            done = self._finished.pop(peer, None)
            if done is not None and not done.triggered:
                done.succeed(False)

    def _slot(self, peer: int) -> None:
        """``peer``'s next slot: a step ``compute`` seconds from now."""
        delay = self.jitter.compute_s(peer, float(self.compute_s[peer]))
        self.slot_start[peer] = now = float(self.env.now)
        at = now + delay
        batch = self._batches.get(at)
        if batch is None:
            batch = self._batches[at] = _Batch(at)
            timer = self.env.timeout(delay)
            timer.callbacks.append(partial(self._fire, batch))
        batch.peers.add(peer)
        self._batch_of[peer] = batch

    def _fire(self, batch: _Batch, _event: simpy.Event | None = None) -> None:
        """The slots of ``batch`` end: its peers take one step together, then each starts
        its next slot or ends its run."""
        del self._batches[batch.at]
        rows = np.array(sorted(batch.peers), dtype=np.intp)
        if rows.size == 0:
            return
        for peer in rows.tolist():
            del self._batch_of[peer]
        now = float(self.env.now)
        self.protocol.sync_rows(self.state, rows, now)
        self.tracker.change(rows, lambda: self.trainer.steps(self.state, rows, 1))
        if self.tracer is not None:
            self._trace(rows, now)
        for peer in rows.tolist():
            left = int(self.left[peer])
            if left == ENDLESS or left > 1:
                self.left[peer] = left if left == ENDLESS else left - 1
                self._slot(peer)
                continue
            self.left[peer] = 0
            done = self._finished.pop(peer, None)
            if done is not None:
                done.succeed(True)

    def _trace(self, rows: np.ndarray, now: float) -> None:
        """A ``step`` slice per peer of ``rows``: its slot, up to ``now``, with its step count."""
        assert self.tracer is not None
        taken = self.trainer.sgd.steps
        for peer in rows.tolist():
            start = float(self.slot_start[peer])
            args = {"step": int(taken[peer])}
            self.tracer.slice(peer, "gradient step", "step", start, now, args)

    # -- presence (a listener of the network clock) --------------------------------------
    def down(self, peers: np.ndarray) -> None:
        """``peers`` were preempted: their pending slots are cancelled."""
        self.cancel(peers)

    def up(self, peers: np.ndarray) -> None:
        """``peers`` are present again: the workload's rejoin rule, then (edge clocks) a
        fresh gradient clock each."""
        self.trainer.returned(self.state, np.sort(peers), self.rejoin, self.init)
        if self.endless:
            self.start(np.sort(peers))


def training_table(trainer: Trainer) -> pd.DataFrame:
    """One row per peer: its gradient steps (the ``training`` table)."""
    steps = trainer.sgd.steps
    return pd.DataFrame({"peer": np.arange(steps.size), "grad_steps": steps.copy()})


def gradient_slots(engine: Any, clock: Any, endless: bool = False) -> GradientSlots | None:
    """The run's :class:`GradientSlots` (None without a workload), listening to ``clock``:
    ``engine`` is a network-clock engine whose clock was just built. Its loss targets
    are then timed at every change of x̄ (:meth:`~sim.engine.observe.training.
    TrainingProbe.follow`)."""
    trainer: Trainer | None = engine.trainer
    if trainer is None:
        return None
    scenario = engine.scenario
    compute = engine.peers["compute"].to_numpy(float)
    slots = GradientSlots(
        engine.env, trainer, engine.state, engine.protocol, engine.tracker, compute,
        scenario.churn.rejoin, scenario.workload.init, endless, engine.tracer, engine.jitter,
    )  # fmt: skip
    clock.listeners.append(slots)
    observer = engine.observer
    if observer.training is not None:  # loss targets timed at every change of x̄
        observer.training.follow(
            engine.protocol, engine.state, engine.tracker, lambda: observer.stop_now("target")
        )
    return slots


__all__ = ["ENDLESS", "GradientSlots", "gradient_slots", "training_table"]
