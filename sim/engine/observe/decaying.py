"""Rows that decay between events (A²CiD²): crossings in closed form, and predictions.

Between two changes every kept set's variance is a quadratic in u = e^(−ρ(t − T))
(:mod:`sim.engine.observe.moments`), so the first crossing of a threshold between changes is a
root (:func:`~sim.engine.observe.roots.first_crossing_at`): :meth:`Decaying.advance` records
those up to a time, before the tracker applies the next change or a sample is taken.
On the network clock :meth:`Decaying.predict` sets a timer at the predicted crossing of
the stop target, so that a run ends at that instant even when no event happens then.
The reference time T moves forward (every sum rescaled, O(dim)) before u gets small.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from sim.engine.observe.moments import Moments, Norms
from sim.engine.observe.roots import first_crossing_at, time_of
from sim.engine.observe.targets import Targets

#: ρ·(now − T) beyond which the reference time T of u moves to now (u stays ≥ e^−4).
REBASE = 4.0


class Decaying:
    """The tracker's handling of decaying rows (a mixin of
    :class:`~sim.engine.observe.tracker.Tracker`, whose attributes it uses)."""

    rate: float
    decay: bool
    reference_s: float
    last_s: float
    sets: dict[str, Moments]
    norms: Norms | None
    nan: dict[str, Any] | None
    off: bool
    targets: Targets
    dim: int
    schedule: Callable[[float, Callable[[], None]], None] | None
    _armed_s: float
    now: Callable[[], tuple[int, float]]
    on_stop: Callable[[str], None]

    def u(self, time_s: float) -> float:
        """u = e^(−ρ(t − T)) at ``time_s`` (1 without decay)."""
        return math.exp(-self.rate * (time_s - self.reference_s)) if self.decay else 1.0

    def advance(self, time_s: float) -> None:
        """Decaying rows: record the crossings between the last change and ``time_s``."""
        if not self.decay or self.nan is not None or time_s <= self.last_s or self.off:
            return
        rounds, _ = self.now()
        u_hi, u_lo = self.u(self.last_s), self.u(time_s)
        for metric, moments in self.sets.items():
            while (level := self.targets.next_level(metric)) is not None and moments.n:
                alpha, beta, gamma = moments.coefficients()
                level_sum = level * moments.n * self.dim
                u_cross = first_crossing_at(alpha, beta, gamma, level_sum, u_hi, u_lo)
                if math.isnan(u_cross):
                    break
                at = min(max(time_of(u_cross, self.reference_s, self.rate), self.last_s), time_s)
                if self.targets.cross(metric, level, rounds, at):
                    self.on_stop("target")
        self.last_s = time_s
        if self.rate * (time_s - self.reference_s) > REBASE:
            self.rebase(time_s)

    def rebase(self, time_s: float) -> None:
        """Move the reference time T of u to ``time_s`` (b scaled, sums kept)."""
        if not self.decay or time_s == self.reference_s:
            return
        factor = self.u(time_s)
        for moments in self.sets.values():
            moments.rescale(factor)
        if self.norms is not None:
            self.norms.rescale(factor)
        self.reference_s = time_s

    def predict(self) -> None:
        """Set a timer at the predicted crossing of the stop target (decay, network)."""
        key = self.targets.stop_key
        if not self.decay or self.schedule is None or key is None or self.targets.stop_reached:
            return
        moments = self.sets.get(key[0])
        if moments is None or not moments.n:
            return
        alpha, beta, gamma = moments.coefficients()
        level_sum = key[1] * moments.n * self.dim
        u_cross = first_crossing_at(alpha, beta, gamma, level_sum, self.u(self.last_s), 0.0)
        at = time_of(u_cross, self.reference_s, self.rate) if u_cross > 0 else math.inf
        if at < self._armed_s:
            self._armed_s = at
            self.schedule(max(at, self.last_s), self._wake)

    def _wake(self) -> None:
        """A prediction timer fired: check up to now, then predict again."""
        self._armed_s = math.inf
        if self.nan is None and not self.targets.stop_reached:
            self.advance(self.now()[1])
            self.predict()
