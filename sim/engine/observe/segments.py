"""Events taken in batches on the network clock, with the bits of one at a time.

The closed-form fast path of the edge exchanges (:mod:`protocols._solo_exchanges`)
applies a segment's exchanges at once, in waves. :meth:`Segmented.take` is shown them
afterwards, in time order, each with its two rows before and after, and updates the
tracker's sums as :meth:`~sim.engine.observe.tracker.Tracker.after` would have, event
after event, with the same floating-point operations in the same order (element-wise
arrays, sequential ``cumsum``, and row sums that do not depend on the batch,
:func:`~sim.kernels.rownorms.rowdots`). It takes events up to, not including, the
first one that needs more than a sum: one that crosses a threshold, makes a resync due,
is not finite, has one row in a set and one outside, or shares its time with another.
The caller undoes the events from that one's time on and runs them one at a time
(``before``/``after``), so that the crossing, the resync or the NaN happen at that event
with the state of that instant, as without batches.

Rows constant between events are read directly from a numpy state. Rows that decay
between events (A²CiD², events that keep the sum: :attr:`Segmented.batches`) come as
their trajectories after each event, x(t) = a − e^(−ρ(t − t_k))·d with t_k the event's
time (``decay``): the sums of a, b = d·e^(ρ(t_k − T)) and their products move as
:meth:`~sim.engine.observe.tracker.Tracker.after` moves them, and besides the checks at
each event, a crossing of any threshold *between* two events (the root that
:meth:`~sim.engine.observe.decaying.Decaying.advance` would find before the next one) and
an event at which the reference time T must move (``REBASE``) stop the batch there too.
After the events taken, the stop target's crossing is predicted
(:meth:`~sim.engine.observe.decaying.Decaying.predict`): its timer is an event the caller
must not plan past.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from sim.engine.observe.decaying import REBASE
from sim.engine.observe.moments import Moments, Norms
from sim.engine.observe.roots import first_crossing
from sim.engine.observe.targets import Targets
from sim.kernels.rownorms import centred_norms, decaying_norms, rowdots

#: Resync after this many events per peer, or once the variance fell by this factor
#: (the tracker's rule, :mod:`sim.engine.observe.tracker`).
EVENTS_PER_PEER, DROP = 4, 16.0
#: Decaying rows: a batch stops this much (relative) before a threshold, at an event or
#: between events; the one-at-a-time path then decides, with its own round-off.
CROSSING_SLACK = 1e-9


class Segmented:
    """The tracker's batches of network-clock events (a mixin of
    :class:`~sim.engine.observe.tracker.Tracker`, whose attributes it uses)."""

    nan: dict[str, Any] | None
    norms: Norms | None
    sets: dict[str, Moments]
    members: dict[str, np.ndarray]
    targets: Targets
    kept: bool
    decay: bool
    count: int
    n: int
    dim: int
    last_s: float
    state: Any
    trace: list[tuple[float, str, float]] | None
    _plain: bool

    rate: float
    reference_s: float
    predict: Callable[[], None]

    @property
    def batches(self) -> bool:
        """True when :meth:`take` may be used: rows constant between events, the
        estimates the state's numpy rows themselves; or decaying rows of events that keep
        the sums (no rows before needed) on a numpy state."""
        numpy = type(self.state.x) is np.ndarray
        if self.decay:
            extra = getattr(self.state, "extra", {}) or {}
            plain = all(type(v) is np.ndarray for v in extra.values())
            return self.kept and numpy and plain
        return self._plain and numpy

    def room(self) -> int:
        """How many more events :meth:`take` can take before one must come alone (the
        one that makes a resync due by the count of events)."""
        if self.nan is not None or self.norms is None or not self.targets.active:
            return 1 << 62
        return max(0, EVENTS_PER_PEER * self.n - self.count - 1)

    def take(
        self, rows: np.ndarray, at_s: np.ndarray, before: np.ndarray | None, after: np.ndarray,
        decay: np.ndarray | None = None,
    ) -> int:  # fmt: skip
        """Take the leading events of a batch; return how many (m).

        Parameters
        ----------
        rows
            (K, 2) peers of each event (the two rows it changed), in time order.
        at_s
            (K,) the events' times, non-decreasing.
        before, after
            (K, 2, dim) the rows right before and right after each event (``before`` may
            be None when events keep the sum, ``needs_before`` false). Decaying rows:
            ``after`` holds each row's a and ``decay`` its d right after the event (the
            row is a − e^(−ρ(t − at_s))·d until its next event).

        Returns
        -------
        int
            m: events ``[:m]`` are taken (the sums are as after event m − 1, one at a
            time); events from ``at_s[m]`` on must be undone and shown one at a time.
            Every event before ``at_s[m]`` is among the m.
        """
        k_all = rows.shape[0]
        if self.nan is not None or self.norms is None or k_all == 0:
            return k_all
        if self.decay:
            assert decay is not None, "decaying rows come with their d"
            return self._take_decaying(rows, at_s, after, decay)
        new = after.astype(np.float64, copy=False)
        limit = _first_tie(at_s)
        if not self.targets.active:  # only the rows' health is checked
            bad = np.flatnonzero(~np.asarray(np.isfinite(new).all(axis=(1, 2)))[:limit])
            return int(bad[0]) if bad.size else limit
        norms = self.norms
        flat = rows.reshape(-1)
        fresh = centred_norms(new.reshape(2 * k_all, self.dim), norms.p)
        change = (fresh - _previous(flat, fresh, norms.aa)).reshape(k_all, 2)
        d_aa = (0.0 + change[:, 0]) + change[:, 1]  # Norms.event's sum, row by row
        limit = min(limit, _first(~np.isfinite(d_aa)))
        limit = min(limit, max(0, EVENTS_PER_PEER * self.n - self.count - 1))
        d_a = None
        if before is not None and not self.kept:
            old = before.astype(np.float64, copy=False)
            d_a = (new[:, 0] - old[:, 0]) + (new[:, 1] - old[:, 1])
        results = {}
        for metric, moments in self.sets.items():
            inside = self.members[metric][rows].sum(axis=1)
            limit = min(limit, _first(inside == 1))
            whole = inside == 2
            saa, a_sums, value = _replay(moments, d_aa, d_a, whole, norms.p)
            results[metric] = (saa, a_sums, value)
            if moments.n:
                level = self.targets.next_level(metric) or 0.0
                var = value / (moments.n * self.dim)
                trigger = (var < level) | (np.abs(value) * DROP < moments.reference)
                limit = min(limit, _first(trigger | ~np.isfinite(value)))
        m = limit
        while 0 < m < k_all and at_s[m - 1] == at_s[m]:
            m -= 1
        if m:
            self._commit(flat[: 2 * m], fresh[: 2 * m], results, m, at_s)
        return m

    def _commit(self, flat: np.ndarray, fresh: np.ndarray, results: dict, m: int,
                at_s: np.ndarray) -> None:  # fmt: skip
        """Keep the first m events: cached norms, sums, event count, trace."""
        assert self.norms is not None
        backwards = flat[::-1]
        peers, last = np.unique(backwards, return_index=True)
        self.norms.aa[peers] = fresh[::-1][last]
        for metric, moments in self.sets.items():
            saa, a_sums, _ = results[metric]
            moments.saa = float(saa[m - 1])
            if a_sums is not None:
                moments.a_sum = a_sums[m - 1].copy()
                moments.refresh_sums()
        if self.trace is not None:
            for k in range(m):
                for metric, moments in self.sets.items():
                    if moments.n:
                        value = results[metric][2][k]
                        self.trace.append(
                            (float(at_s[k]), metric, float(value / (moments.n * self.dim)))
                        )
        self.count += m
        self.last_s = float(at_s[m - 1])

    def _take_decaying(
        self, rows: np.ndarray, at_s: np.ndarray, after: np.ndarray, decay: np.ndarray
    ) -> int:
        """:meth:`take` for decaying rows of events that keep the sums (module docstring)."""
        k_all = rows.shape[0]
        a = after.astype(np.float64, copy=False)
        limit = _first_tie(at_s)
        # the reference time T moves at the first event past REBASE: one at a time
        limit = min(limit, _first(self.rate * (at_s - self.reference_s) > REBASE))
        grow = np.exp(self.rate * (at_s - self.reference_s))  # as Tracker.values
        d = decay.astype(np.float64, copy=False)
        if not self.targets.active:  # only the rows' health is checked
            b = d * grow[:, None, None]
            healthy = np.isfinite(a).all(axis=(1, 2)) & np.isfinite(b).all(axis=(1, 2))
            return min(limit, _first(~np.asarray(healthy)))
        norms = self.norms
        assert norms is not None
        assert norms.q is not None
        assert norms.ab is not None
        assert norms.bb is not None
        flat = rows.reshape(-1)
        fresh = decaying_norms(
            a.reshape(2 * k_all, self.dim), norms.p, d.reshape(2 * k_all, self.dim),
            np.repeat(grow, 2), norms.q,
        )  # fmt: skip
        steps, links = [], _links(flat)
        for new, cached in zip(fresh, (norms.aa, norms.ab, norms.bb), strict=True):
            change = (new - _previous(flat, new, cached, links)).reshape(k_all, 2)
            steps.append((0.0 + change[:, 0]) + change[:, 1])  # Norms.event's sums
        d_aa, d_ab, d_bb = steps
        limit = min(limit, _first(~np.isfinite(d_aa + d_ab + d_bb)))
        limit = min(limit, max(0, EVENTS_PER_PEER * self.n - self.count - 1))
        exponent = -self.rate * (at_s - self.reference_s)
        u = np.array([math.exp(e) for e in exponent.tolist()])  # as Decaying.u
        u_last = math.exp(-self.rate * (self.last_s - self.reference_s))
        results, variances = {}, {}  # the sums, and the variance, after each event
        for metric, moments in self.sets.items():
            inside = self.members[metric][rows].sum(axis=1)
            limit = min(limit, _first(inside == 1))
            whole = inside == 2
            sums = [
                np.cumsum(np.concatenate(([start], np.where(whole, step, 0.0))))
                for start, step in zip(
                    (moments.saa, moments.sab, moments.sbb), (d_aa, d_ab, d_bb), strict=True
                )
            ]  # the sums before event 0, then after each event
            results[metric] = [s[1:] for s in sums]
            if not moments.n:
                continue
            n = moments.n
            alpha = sums[0] - moments.aa / n
            beta = sums[1] - moments.ab / n
            gamma = sums[2] - moments.bb / n
            value = alpha[1:] - 2 * beta[1:] * u + gamma[1:] * u * u
            level = self.targets.next_level(metric)
            var = variances[metric] = value / (n * self.dim)
            trigger = (np.abs(value) * DROP < moments.reference) | ~np.isfinite(value)
            if level is not None:
                # at each event (a little early: the one-at-a-time path decides), and
                # between the previous change and each event (Decaying.advance's roots)
                trigger |= var < level * (1 + CROSSING_SLACK)
                u_hi = np.concatenate(([u_last], u[:-1]))
                later = np.concatenate(([at_s[0] > self.last_s], at_s[1:] > at_s[:-1]))
                crossing = first_crossing(
                    alpha[:-1], beta[:-1], gamma[:-1], level * n * self.dim * (1 + CROSSING_SLACK),
                    u_hi, u * (1 - CROSSING_SLACK),
                )  # fmt: skip
                trigger |= later & ~np.isnan(crossing)
            limit = min(limit, _first(trigger))
        m = limit
        while 0 < m < k_all and at_s[m - 1] == at_s[m]:
            m -= 1
        if m:
            self._commit_decaying(flat[: 2 * m], fresh, results, variances, m, at_s)
        return m

    def _commit_decaying(
        self, flat: np.ndarray, fresh: tuple[np.ndarray, ...], results: dict, variances: dict,
        m: int, at_s: np.ndarray,
    ) -> None:  # fmt: skip
        """Keep the first m events of decaying rows, then predict the stop target's
        crossing (its timer)."""
        norms = self.norms
        assert norms is not None
        assert norms.ab is not None
        assert norms.bb is not None
        peers, last = np.unique(flat[::-1], return_index=True)
        for cache, new in zip((norms.aa, norms.ab, norms.bb), fresh, strict=True):
            cache[peers] = new[: 2 * m][::-1][last]
        for metric, moments in self.sets.items():
            saa, sab, sbb = results[metric]
            moments.saa, moments.sab, moments.sbb = (
                float(saa[m - 1]), float(sab[m - 1]), float(sbb[m - 1])
            )  # fmt: skip
        if self.trace is not None:
            for k in range(m):
                for metric, var in variances.items():  # the sets with members
                    self.trace.append((float(at_s[k]), metric, float(var[k])))
        self.count += m
        self.last_s = float(at_s[m - 1])
        self.predict()


def _first(mask: np.ndarray) -> int:
    """Index of the first True of ``mask``, or its length."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else int(mask.size)


def _first_tie(at_s: np.ndarray) -> int:
    """Index of the first event that shares its time with the next one, or K."""
    hits = np.flatnonzero(at_s[1:] == at_s[:-1])
    return int(hits[0]) if hits.size else int(at_s.size)


def _previous(
    flat: np.ndarray, fresh: np.ndarray, cached: np.ndarray,
    links: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:  # fmt: skip
    """Each (event, row)'s cached norm right before the event: the norm after the row's
    previous event of the batch, else the cache's. ``links``: :func:`_links` of ``flat``
    (computed once for several norms)."""
    previous = cached[flat]
    later, earlier = _links(flat) if links is None else links
    previous[later] = fresh[earlier]
    return previous


def _links(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(later, earlier): positions in ``flat`` of each row's event and of the same row's
    previous event in the batch."""
    order = np.argsort(flat, kind="stable")
    grouped = flat[order]
    same = np.flatnonzero(grouped[1:] == grouped[:-1])
    return order[same + 1], order[same]


def _replay(
    moments: Moments, d_aa: np.ndarray, d_a: np.ndarray | None, whole: np.ndarray,
    centre: np.ndarray,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:  # fmt: skip
    """The set's saa, Σ(a − p) and n·dim·var right after each event, computed as
    :meth:`~sim.engine.observe.moments.Moments.shift` does one event at a time (events
    with no row in the set leave them as they are)."""
    a_sums = None
    if d_a is None:
        d_saa = np.where(whole, d_aa, 0.0)
        aa: Any = moments.aa
    else:
        shift = moments.p - centre
        d_saa = np.where(whole, d_aa - 2 * rowdots(d_a, shift[None, :]), 0.0)
        steps = np.where(whole[:, None], d_a, 0.0)
        a_sums = np.cumsum(np.concatenate((moments.a_sum[None, :], steps)), axis=0)[1:]
        aa = rowdots(a_sums, a_sums)
    saa = np.cumsum(np.concatenate(([moments.saa], d_saa)))[1:]
    n = max(moments.n, 1)
    alpha = saa - aa / n
    beta, gamma, u = moments.sab - moments.ab / n, moments.sbb - moments.bb / n, 1.0
    value = alpha - 2 * beta * u + gamma * u * u
    return saa, a_sums, value
