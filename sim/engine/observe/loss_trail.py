"""Times to loss targets on the network clock, at the instant F(x̄) first falls below.

x̄, the mean of the existing peers' estimates, changes only at discrete events: a batch
of gradient steps (:class:`~sim.engine.training_net.GradientSlots`), churn (a join, a
leave, a ``reset`` or ``fetch`` rejoin), the end of a barrier round, an averaging step
of the peer loops, and a continuous protocol's exchange when it does not keep the sum
of the estimates (push_sum, a lossy wire). All but the barrier rounds and the exchanges
go through the exact-target tracker (:meth:`~sim.engine.observe.tracker.Tracker.change`),
which ends each with :meth:`LossTrail.changed`; barrier rounds are followed by a sample
at their end; the exchanges of continuous protocols that do not keep the sum are shown
to the trail by :class:`FollowingWatcher` (those that keep it leave x̄ where it is).
:meth:`LossTrail.changed` forms x̄ (O(n·dim), no pass over the data) and keeps
(round, time, x̄) in a buffer when it moved. At each sample, or when the buffer holds
:data:`BUFFER_BYTES`, the buffer is flushed: F is evaluated on its snapshots in one
batched call (:meth:`~sim.model.training.Trainer.losses`: with ``logistic`` one product
per block of samples for all of them) and the loss targets are crossed, in order, at
the first snapshot below each. Flushing early only loses the batching, never a
snapshot, so the bound costs no exactness. While ``stop.target_loss`` is pending every
snapshot is evaluated at once, so that the run halts at that instant.

``resolution`` (the summary's ``loss_resolution``) says what the times are:

- ``event``: x̄ is constant between the snapshots, so a time is the first instant F(x̄)
  is below the target;
- ``step``: x̄ also drifted between events, which happens only with A²CiD² once the
  existing peers' x − x̃ no longer sum to zero (after a ``reset`` or ``fetch`` rejoin, a
  join or a leave: its lazy mixing then moves x̄ continuously); a time is then the first
  event (step, exchange, churn) or sample at which F(x̄) is below the target, an upper
  bound.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from protocols.base import Protocol
from protocols.contract import RowValues, RowWatcher, State
from sim.engine.observe.targets import Targets
from sim.model.training import Trainer

#: Bytes of snapshots kept before a flush (float64 rows of dim values).
BUFFER_BYTES = 8 * 1024 * 1024
#: x̄ drifts between events when the decaying parts of the existing peers' estimates
#: sum to more than this times the sum of their magnitudes (round-off is ~n·1e-16).
DRIFT_TOLERANCE = 1e-9

Masks = Callable[[], tuple[np.ndarray, np.ndarray]]  # (exists, present) now
Now = Callable[[], tuple[int, float]]  # (round, time_s) of a change now


class LossTrail:
    """Snapshots of x̄ after every change, evaluated in batches (see the module doc).

    Parameters
    ----------
    trainer, targets
        The run's trainer (F) and thresholds (metric ``loss``).
    protocol, state
        Where the existing peers' estimates are read
        (:meth:`~protocols.base.Protocol.estimate_rows`, at the change's time).
    masks, now
        The run's (exists, present) masks and its (round, time) of a change.
    halt
        Called when the stop target ``stop.target_loss`` is crossed between samples.
    """

    def __init__(
        self, trainer: Trainer, targets: Targets, protocol: Protocol, state: State,
        masks: Masks, now: Now, halt: Callable[[], None],
    ) -> None:  # fmt: skip
        self.trainer, self.targets = trainer, targets
        self.protocol, self.state, self.masks, self.now, self.halt = (
            protocol, state, masks, now, halt
        )  # fmt: skip
        self.rate = float(protocol.decay_rate)
        dim = int(state.x.shape[1])
        self.capacity = max(1, BUFFER_BYTES // (8 * dim))
        self.times: list[tuple[int, float]] = []
        self.means: list[np.ndarray] = []
        self.last: np.ndarray | None = None
        self.resolution = "event"
        targets.loss_resolution = self.resolution

    def changed(self) -> None:
        """A change of the state ended: keep x̄ now when it moved (and a target is pending)."""
        if self.targets.next_level("loss") is None:
            return
        rounds, time_s = self.now()
        mean = self.mean(time_s)
        if mean is None or (self.last is not None and np.array_equal(mean, self.last)):
            return
        self.last = mean
        self.times.append((int(rounds), float(time_s)))
        self.means.append(mean)
        if self.targets.loss_stop_pending or len(self.means) >= self.capacity:
            self.flush(halt=True)

    def flush(self, halt: bool = False) -> None:
        """Evaluate F on the buffered snapshots, in order, and cross the targets below;
        ``halt``: end the run when that crossed ``stop.target_loss``."""
        if not self.means:
            return
        times, means = self.times, np.stack(self.means)
        self.times, self.means = [], []
        if self.targets.next_level("loss") is None:
            return
        stopped = False
        for (rounds, time_s), value in zip(times, self.trainer.losses(means), strict=True):
            if self.targets.next_level("loss") is None:
                break
            stopped |= self.targets.below("loss", float(value), rounds, time_s)
        if stopped and halt:
            self.halt()

    def mean(self, time_s: float) -> np.ndarray | None:
        """x̄ at ``time_s`` in float64 (None without an existing peer); notes a drift of
        x̄ between events (:attr:`resolution` becomes ``step``)."""
        exists, _ = self.masks()
        rows = np.flatnonzero(exists)
        if rows.size == 0:
            return None
        values = self.protocol.estimate_rows(self.state, rows)
        a = np.asarray(values.a, dtype=np.float64)
        if values.d is None or values.since is None:
            return a.mean(axis=0)
        d = np.asarray(values.d, dtype=np.float64)
        if self.rate <= 0:  # constant rows: a − d for good
            return (a - d).mean(axis=0)
        decayed = d * np.exp(-self.rate * (time_s - np.asarray(values.since)))[:, None]
        scale = np.abs(decayed).sum(axis=0)
        if self.resolution == "event" and np.any(
            np.abs(decayed.sum(axis=0)) > DRIFT_TOLERANCE * scale
        ):
            self.resolution = self.targets.loss_resolution = "step"
        return (a - decayed).mean(axis=0)


class FollowingWatcher:
    """The :class:`~protocols.contract.RowWatcher` of a continuous protocol whose
    exchanges move x̄: each event goes to ``inner`` (the exact-target tracker, while it
    listens) and then to ``changed`` (:meth:`LossTrail.changed`). Events come one at a
    time (``batches`` false: no closed-form batches)."""

    batches = False

    def __init__(self, inner: RowWatcher | None, changed: Callable[[], None]) -> None:
        self.inner, self.changed = inner, changed
        self.needs_before = False if inner is None else inner.needs_before

    def retire(self) -> None:
        """The tracker stops listening (nothing left for it to time)."""
        self.inner, self.needs_before = None, False

    def before(self, rows: np.ndarray) -> None:
        if self.inner is not None:
            self.inner.before(rows)

    def after(self, rows: np.ndarray) -> None:
        if self.inner is not None:
            self.inner.after(rows)
        self.changed()

    def wave(self, rows: np.ndarray, before: RowValues | None, after: RowValues,
             at_s: np.ndarray) -> None:  # fmt: skip
        if self.inner is not None:  # the rounds clock's batches (no trail there)
            self.inner.wave(rows, before, after, at_s)
        self.changed()

    def room(self) -> int:
        return 1

    def take(self, rows: np.ndarray, at_s: np.ndarray, before: np.ndarray | None,
             after: np.ndarray, decay: np.ndarray | None = None) -> int:  # fmt: skip
        return 0  # never batched (``batches`` false): every event comes alone


__all__ = ["BUFFER_BYTES", "FollowingWatcher", "LossTrail"]
