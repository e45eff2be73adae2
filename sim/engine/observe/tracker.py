"""The exact-target tracker: var and var_alive after every change of the state.

Samples (``metrics.every``) see the state now and then; the tracker sees every change.
It keeps float64 :class:`~sim.engine.observe.moments.Moments` of the existing peers (``var``)
and, while ``var_alive`` has a threshold left, of the present ones, updated at:

- the protocol's own events (continuous-time protocols, through
  :class:`~protocols.contract.RowWatcher`): ``before``/``after`` one at a time on the network
  clock; ``wave`` in batches on the rounds clock, replayed in time order at the round's
  end (:mod:`sim.engine.observe.replay`); ``take`` for a batch of them in time order on
  the network clock (:mod:`sim.engine.observe.segments`: the closed-form exchanges).
  O(dim) per event: the rows after the change, their centred norms against the cached
  ones (:class:`~sim.engine.observe.moments.Norms`), and the rows before it only when
  events do not keep the sum of the estimates;
- churn (:meth:`Tracker.change`): peers preempted, restored, joining or leaving, and
  rows a rejoin rewrites (any protocol).

After each change the thresholds are checked at its simulated time. For rows that decay
between events (A²CiD²) the first crossing between events is solved in closed form
(:mod:`sim.engine.observe.roots`), and on the network clock a timer is set at the predicted
crossing of the stop target, so that the run ends at that instant.

The sums are recomputed from the state (:meth:`Tracker.resync`, two passes over blocks
of rows) after 4·N events, or once the variance has fallen below 1/16 of its value at
the last resync (their absolute round-off is that of the older variance); barrier-round
protocols, whose rounds change every row, take them from each sample instead. The
tracker only reads the state.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from protocols.base import Protocol
from protocols.contract import RowValues, State
from sim.core.backend import to_numpy
from sim.core.sets import unique_ints
from sim.engine.observe.decaying import Decaying
from sim.engine.observe.moments import Moments, Norms, moments_of
from sim.engine.observe.replay import Batched, Replay
from sim.engine.observe.segments import DROP, EVENTS_PER_PEER, Segmented
from sim.engine.observe.targets import Targets

#: Float64 elements read at a time by a resync.
BLOCK_ELEMENTS = 4 * 1024 * 1024
#: Resync after EVENTS_PER_PEER events per peer, or once the variance fell by DROP
#: (defined with the batches, :mod:`sim.engine.observe.segments`, which follow the rule).

Masks = Callable[[], tuple[np.ndarray, np.ndarray]]  # (exists, present) now
Now = Callable[[], tuple[int, float]]  # (round, time_s) of a change now
Rows = tuple[np.ndarray, np.ndarray | None]  # (a, b) float64 rows


class Tracker(Decaying, Batched, Segmented):
    """Moments of the existing and present peers' estimates, current at every change.

    Parameters
    ----------
    protocol, state
        The run's protocol (``estimate_rows``, ``decay_rate``, ``events_keep_sum``) and
        state; the tracker never writes to either.
    targets
        The run's thresholds; crossings are recorded there.
    masks, now
        Where the run's (exists, present) masks and its (round, time) are read.
    on_stop
        Called with ``"target"`` when the stop target is crossed, or with ``"nan"``
        (after :attr:`nan` is filled) when a non-finite estimate appears.
    events
        True for protocols that report their events (continuous time); False: the sums
        come from each sample and only churn is tracked in between.
    """

    def __init__(self, protocol: Protocol, state: State, targets: Targets, masks: Masks,
                 now: Now, on_stop: Callable[[str], None], events: bool) -> None:  # fmt: skip
        self.protocol, self.state, self.targets = protocol, state, targets
        self.masks, self.now, self.on_stop, self.events = masks, now, on_stop, events
        self.rate = float(protocol.decay_rate)
        self.decay = self.rate > 0
        self.kept = events and bool(protocol.events_keep_sum)
        #: No threshold to time at all: the tracker does nothing (NaNs are found by the
        #: samples, :class:`~sim.engine.observe.observer.Observer`).
        self.off = not targets.active
        self.needs_before = not self.kept
        self.n, self.dim = state.x.shape[0], state.x.shape[1]
        self.reference_s = self.last_s = 0.0  # T of u = e^(−ρ(t − T)); the last change
        self.sets: dict[str, Moments] = {}
        self.members: dict[str, np.ndarray] = {}
        self.norms: Norms | None = None
        self.nan: dict[str, Any] | None = None
        self.count = 0  # events since the last resync
        self.schedule: Callable[[float, Callable[[], None]], None] | None = None
        self.replay: Replay | None = None
        self.trace: list[tuple[float, str, float]] | None = None  # (time, metric, var)
        self._armed_s = math.inf
        #: Called after every :meth:`change` (the loss trail, :mod:`sim.engine.observe.loss_trail`).
        self.on_change: Callable[[], None] | None = None
        self._old: Rows | None = None
        base = type(protocol).estimate_rows is Protocol.estimate_rows
        #: The estimate is x itself, a numpy array: rows are read directly.
        self._plain = base and type(protocol).estimate is Protocol.estimate

    # -- reading rows, resyncing -----------------------------------------------------------

    def watched(self) -> list[str]:
        """``var`` always (it also watches for NaN), ``var_alive`` while it has a target."""
        return ["var"] + (["var_alive"] if self.targets.next_level("var_alive") else [])

    def values(self, rows: np.ndarray, values: RowValues | None = None) -> Rows:
        """(a, b) of peers ``rows``: b = d·e^(ρ(since − T)) (None without decay)."""
        if values is None:
            x = self.state.x
            if self._plain and type(x) is np.ndarray:
                return x.take(rows, axis=0).astype(np.float64, copy=False), None
            values = self.protocol.estimate_rows(self.state, rows)
        if values.d is None or values.since is None:
            return values.a, None
        if not self.decay:  # ρ = 0: the rows are a − d for good
            return values.a - values.d, None
        return values.a, values.d * np.exp(self.rate * (values.since - self.reference_s))[:, None]

    def resync(self, time_s: float | None = None) -> None:
        """Recompute the kept sets (and the norms) from the state."""
        if time_s is not None and self.decay:
            self.reference_s = self.last_s = time_s
        exists, present = self.masks()
        masks = {"var": exists.copy(), "var_alive": present & exists}
        self.members = {m: masks[m] for m in self.watched()}
        step = max(1, BLOCK_ELEMENTS // max(1, self.dim))
        blocks = [np.arange(k, min(k + step, self.n)) for k in range(0, self.n, step)]
        self.sets, self.norms = moments_of(
            self.values, blocks, self.members, self.dim, self.decay, self.events
        )
        self.count = 0
        if not all(math.isfinite(m.saa + m.sab + m.sbb) for m in self.sets.values()):
            self._check_finite(np.arange(self.n))

    def observed(self, sample: Any, time_s: float) -> None:
        """A sample was taken at ``time_s``: barrier protocols resync from its sums;
        event protocols resync from the state when due (see the module docstring)."""
        if self.nan is not None or self.off:
            return
        if self.events:
            self.advance(time_s)
            if not self.sets or self.due():
                self.resync(time_s)
            return
        exists, present = self.masks()
        self.sets = {"var": _from_sample(sample.n, sample.mean, sample.squares, self.dim)}
        self.members = {"var": exists.copy()}
        if "var_alive" in self.watched():
            alive = _from_sample(sample.n_alive, sample.mean_alive, sample.alive_squares, self.dim)
            self.sets["var_alive"], self.members["var_alive"] = alive, present & exists

    def due(self) -> bool:
        """True when the sums should be recomputed from the state."""
        if self.count >= EVENTS_PER_PEER * self.n:
            return True
        u = self.u(self.last_s)
        for moments in self.sets.values():
            alpha, beta, gamma = moments.coefficients()
            if abs(alpha - 2 * beta * u + gamma * u * u) * DROP < moments.reference:
                return True
        return False

    # -- changes one at a time (network clock) ---------------------------------------------

    def before(self, rows: np.ndarray) -> None:
        """Rows ``rows`` are about to change (the values they have now are read when
        events do not keep the sum)."""
        if self.nan is not None:
            return
        if self.decay:
            self.advance(self.now()[1])
        self._old = self.values(rows) if self.needs_before else None

    def after(self, rows: np.ndarray) -> None:
        """Rows ``rows`` (as given to :meth:`before`) have changed. Once no threshold is
        left to time, only their health is checked."""
        if self.nan is not None or self.norms is None:
            return
        new = self.values(rows)
        if not self.targets.active:
            self._old = None
            if not (np.isfinite(new[0]).all() and (new[1] is None or np.isfinite(new[1]).all())):
                self._check_finite(rows)
            return
        old, self._old = self._old, None
        listed = rows.tolist()
        d_aa, d_ab, d_bb = self.norms.event(listed, *new)
        d_a = d_b = None
        if old is not None:
            d_a = (new[0] - old[0]).sum(axis=0)
            if new[1] is not None and old[1] is not None:
                d_b = (new[1] - old[1]).sum(axis=0)
        centres = (self.norms.p, self.norms.q)
        for metric, moments in self.sets.items():
            inside = _count(self.members[metric], listed)
            if inside == len(listed):
                moments.shift(d_aa, d_a, d_ab, d_bb, d_b, centres)
            elif not inside:
                continue
            elif old is not None:
                inside = self.members[metric][rows]
                moments.add_rows(old[0][inside], _pick(old[1], inside), -1)
                moments.add_rows(new[0][inside], _pick(new[1], inside), 1)
            else:  # a kept-sum event partly outside a set (not seen): recompute
                self.count = EVENTS_PER_PEER * self.n
        self.count += 1
        self.settled(rows, math.isfinite(d_aa + d_ab + d_bb))

    def change(self, rows: np.ndarray, apply: Callable[[], Any]) -> None:
        """Run ``apply()``, which may rewrite rows ``rows`` and their membership (churn,
        rejoin), and update the sets (and norms) by the difference."""
        if self.nan is not None or self.off or rows.size == 0 or not self.sets:
            apply()
            if self.on_change is not None:
                self.on_change()
            return
        self.advance(self.now()[1])
        rows = unique_ints(rows)
        old = self.values(rows)
        apply()
        new = self.values(rows)
        exists, present = self.masks()
        now_in = {"var": exists[rows], "var_alive": (present & exists)[rows]}
        for metric, moments in self.sets.items():
            was, is_ = self.members[metric][rows], now_in[metric]
            moments.add_rows(old[0][was], _pick(old[1], was), -1)
            moments.add_rows(new[0][is_], _pick(new[1], is_), 1)
            self.members[metric][rows] = is_
        if self.norms is not None:
            self.norms.swap(rows, self.norms.of(*new))
        self.count += 1
        self.settled(rows, bool(np.isfinite(self.sets["var"].saa)))
        if self.on_change is not None:
            self.on_change()

    def settled(self, rows: np.ndarray, finite: bool) -> None:
        """After a change of ``rows``: NaN check, thresholds, resync, prediction."""
        if not finite and not self._check_finite(rows):
            return
        rounds, time_s = self.now()
        self.last_s = time_s
        u = self.u(time_s)
        due = self.count >= EVENTS_PER_PEER * self.n
        for metric, moments in self.sets.items():
            if not moments.n:
                continue
            alpha, beta, gamma = moments.coefficients()
            value = alpha - 2 * beta * u + gamma * u * u  # n·dim·var
            due = due or abs(value) * DROP < moments.reference
            var = value / (moments.n * self.dim)
            if self.trace is not None:
                self.trace.append((time_s, metric, var))
            if var < (self.targets.next_level(metric) or 0.0) and self.targets.below(
                metric, var, rounds, time_s
            ):
                self.on_stop("target")
        if due and self.events:
            self.resync(time_s)
        if self.decay:
            self.predict()

    def _check_finite(self, rows: np.ndarray) -> bool:
        """False (:attr:`nan` filled, ``on_stop("nan")``) when a row of ``rows`` has a
        non-finite estimate; the first such peer is named."""
        a, b = self.values(rows)
        bad = ~np.isfinite(a).all(axis=1)
        if b is not None:
            bad |= ~np.isfinite(b).all(axis=1)
        if not bad.any():
            return True
        rounds, time_s = self.now()
        self.nan = {"round": int(rounds), "time_s": float(time_s), "peer": int(rows[bad][0])}
        self.on_stop("nan")
        return False


def _count(mask: np.ndarray, rows: list[int]) -> int:
    """How many of ``rows`` the mask holds."""
    count = 0
    for r in rows:
        if mask.item(r):
            count += 1
    return count


def _pick(b: np.ndarray | None, inside: np.ndarray) -> np.ndarray | None:
    return None if b is None else b[inside]


def _from_sample(n: int, mean: Any, squares: float, dim: int) -> Moments:
    """Moments centred on a sample's mean (A = 0, saa = its Σ of squares)."""
    if not n or mean is None:
        return Moments.centred(np.zeros(dim), None)
    p = np.array(to_numpy(mean), dtype=np.float64)
    moments = Moments(n, dim, p, np.zeros(dim), float(squares))
    moments.settle()
    return moments
