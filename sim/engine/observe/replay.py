"""The rounds clock's batched events, replayed in time order for the exact crossings.

On the rounds clock the continuous-time protocols apply a round's events in waves of
disjoint pairs (:func:`protocols._edge_clocks.waves`), not in time order. Every event
still has well-defined rows before and after it (the waves do the one-by-one
arithmetic), so its change of the moments is known: :class:`Replay` takes each wave's
rows after it, swaps their centred norms into the cache (:class:`~sim.engine.observe.moments.
Norms`; the cached ones are the rows before), and keeps the per-row changes. At the
round's end :func:`crossings` sorts the events by time, sums the changes cumulatively and
finds, per threshold, the first event after which the variance is below it — or, for
decaying rows, the first instant between two events (:func:`~sim.engine.observe.roots.
first_crossing`). O(dim) per event, vectorised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protocols.contract import RowValues
from sim.engine.observe.moments import Moments, Norms, rowdot
from sim.engine.observe.roots import first_crossing
from sim.engine.observe.targets import Targets

Rows = tuple[np.ndarray, np.ndarray | None]


@dataclass
class Replay:
    """One round's row changes; ``kept``: events keep Σa and Σb (no vector sums)."""

    norms: Norms
    kept: bool
    parts: list[dict[str, np.ndarray]] = field(default_factory=list)

    def add(self, rows: np.ndarray, old: Rows | None, new: Rows, at_s: np.ndarray) -> None:
        """One wave: rows (R,), their (a, b) before (None when kept) and after, and each
        row's event time."""
        d_aa, d_ab, d_bb = _swap_rows(self.norms, rows, self.norms.of(*new))
        part = {"rows": rows, "at": np.asarray(at_s, dtype=float), "aa": d_aa}
        part["bad"] = np.zeros(rows.size, dtype=bool)
        odd = ~np.isfinite(d_aa if d_ab is None else d_aa + d_ab + d_bb)
        if odd.any():  # an overflow of the norms, or a non-finite estimate: which?
            part["bad"][odd] = ~np.isfinite(new[0][odd]).all(axis=1)
            if new[1] is not None:
                part["bad"][odd] |= ~np.isfinite(new[1][odd]).all(axis=1)
        if d_ab is not None and d_bb is not None:
            part.update(ab=d_ab, bb=d_bb)
        if not self.kept and old is not None:
            part["d_a"] = new[0] - old[0]
            if new[1] is not None and old[1] is not None:
                part["d_b"] = new[1] - old[1]
        self.parts.append(part)


def _swap_rows(norms: Norms, rows: np.ndarray, new: tuple[np.ndarray, ...]) -> tuple:
    """Per-row changes of the cached norms of ``rows``, then store ``new``."""
    d_aa = new[0] - norms.aa[rows]
    norms.aa[rows] = new[0]
    if len(new) == 1 or norms.ab is None or norms.bb is None:
        return d_aa, None, None
    d_ab, d_bb = new[1] - norms.ab[rows], new[2] - norms.bb[rows]
    norms.ab[rows], norms.bb[rows] = new[1], new[2]
    return d_aa, d_ab, d_bb


class Batched:
    """The tracker's rounds-clock path (a mixin of :class:`~sim.engine.observe.tracker.Tracker`,
    whose attributes it uses): waves collected during a round, replayed at its end."""

    nan: dict[str, Any] | None
    norms: Norms | None
    kept: bool
    replay: Replay | None
    targets: Targets
    off: bool
    count: int
    last_s: float
    on_stop: Callable[[str], None]
    advance: Callable[[float], None]
    rebase: Callable[[float], None]
    values: Callable[..., Rows]
    due: Callable[[], bool]
    resync: Callable[..., None]

    def begin_round(self, start_s: float) -> None:
        """A round of the rounds clock starts at ``start_s`` (after its churn changes)."""
        if self.nan is not None or self.norms is None or not self.targets.active:
            return
        self.advance(start_s)
        self.rebase(start_s)
        self.replay = Replay(self.norms, self.kept)

    def wave(
        self, rows: np.ndarray, before: RowValues | None, after: RowValues, at_s: np.ndarray
    ) -> None:
        """One wave of a round's events (see :class:`~protocols.contract.RowWatcher`)."""
        if self.nan is None and self.replay is not None:
            old = None if before is None else self.values(rows, before)
            self.replay.add(rows, old, self.values(rows, after), at_s)

    def end_round(self, rounds: int, end_s: float) -> None:
        """The round's events are all applied: replay them in time order (crossings at
        round ``rounds``), bring the sets to ``end_s``, resync when due."""
        replay, self.replay = self.replay, None
        if replay is None or self.nan is not None:
            return
        found = crossings(replay, self, end_s)
        for metric, level, at in found.crossed:
            if self.targets.cross(metric, level, rounds, at):
                self.on_stop("target")
        self.count += found.events
        self.last_s = end_s
        if found.nan is not None:
            self.nan = {"round": int(rounds), "time_s": found.nan[0], "peer": found.nan[1]}
            self.on_stop("nan")
        elif self.due():
            self.resync(end_s)


@dataclass
class Found:
    """What a round's replay found: crossings (metric, level, time) in order, the
    number of events, and (time, peer) of the first non-finite estimate."""

    crossed: list[tuple[str, float, float]]
    events: int
    nan: tuple[float, int] | None = None


def crossings(replay: Replay, tracker: Any, end_s: float) -> Found:
    """Replay the round in time order: the tracker's sets are brought to the round's
    end and the crossings of its pending thresholds returned (not yet recorded)."""
    events = _events(replay)
    if events is None:
        tracker.advance(end_s)
        return Found([], 0)
    nan = _first_bad(events)
    times = np.r_[tracker.last_s, events["at"], end_s]
    decay = tracker.decay
    u = np.exp(-tracker.rate * (times - tracker.reference_s)) if decay else np.ones(times.size)
    found = Found([], int(events["at"].size), nan)
    centres = (replay.norms.p, replay.norms.q)
    for metric, moments in tracker.sets.items():
        coefficients = _replay_set(moments, events, centres)
        if tracker.trace is not None:
            _trace(tracker, metric, coefficients, times, u, moments.n)
        for level in tracker.targets.pending(metric):
            if not moments.n:
                break
            at = first_time(coefficients, times, u, level * moments.n * tracker.dim, decay)
            if at is None or (nan is not None and at >= nan[0]):
                break
            found.crossed.append((metric, level, at))
    return found


def _events(replay: Replay) -> dict[str, np.ndarray] | None:
    """The round's changes per event, in time order (rows of one event share a time)."""
    if not replay.parts:
        return None
    rows = {key: np.concatenate([p[key] for p in replay.parts]) for key in replay.parts[0]}
    order = np.argsort(rows["at"], kind="stable")
    rows = {key: value[order] for key, value in rows.items()}
    at = rows["at"]
    starts = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
    out = {"at": at[starts], "starts": starts, "rows": rows["rows"]}
    for key, value in rows.items():
        if key not in ("rows", "at", "bad"):
            out[key] = np.add.reduceat(value, starts, axis=0)
    out["bad_rows"] = rows["bad"]
    return out


def _first_bad(events: dict[str, np.ndarray]) -> tuple[float, int] | None:
    """(time, lowest peer) of the first event that made an estimate non-finite."""
    bad = np.flatnonzero(events["bad_rows"])
    if not bad.size:
        return None
    starts = events["starts"]
    event = int(np.searchsorted(starts, bad[0], side="right") - 1)
    end = starts[event + 1] if event + 1 < starts.size else events["rows"].size
    peers = events["rows"][starts[event] : end][events["bad_rows"][starts[event] : end]]
    return float(events["at"][event]), int(peers.min())


def _replay_set(
    moments: Moments, events: dict[str, np.ndarray], centres: tuple[Any, Any]
) -> dict[str, np.ndarray]:
    """The set's (α, β, γ) before the first event and after each ((K + 1,) arrays);
    the set's sums are left at the round's end."""
    d_aa = events["aa"]
    d_ab = events.get("ab", np.zeros_like(d_aa))
    d_bb = events.get("bb", np.zeros_like(d_aa))
    d_a, d_b = events.get("d_a"), events.get("d_b")
    n = max(moments.n, 1)
    if d_a is not None:  # the centres' shift for another set, then the vector sums
        shift_p = moments.p - centres[0]
        d_aa = d_aa - 2 * (d_a @ shift_p)
        if d_b is not None and moments.q is not None and centres[1] is not None:
            shift_q = moments.q - centres[1]
            d_bb = d_bb - 2 * (d_b @ shift_q)
            d_ab = d_ab - d_a @ shift_q - d_b @ shift_p
    saa = moments.saa + np.cumsum(d_aa)
    sab = moments.sab + np.cumsum(d_ab)
    sbb = moments.sbb + np.cumsum(d_bb)
    alpha0, beta0, gamma0 = moments.coefficients()
    aa: Any
    ab: Any
    bb: Any
    if d_a is None:
        aa, ab, bb = moments.aa, moments.ab, moments.bb
        moments.saa, moments.sab, moments.sbb = float(saa[-1]), float(sab[-1]), float(sbb[-1])
    else:
        a_sums = moments.a_sum + np.cumsum(d_a, axis=0)
        aa = rowdot(a_sums, a_sums)
        b_sums = None if d_b is None else moments.b_sum + np.cumsum(d_b, axis=0)
        ab = 0.0 if b_sums is None else rowdot(a_sums, b_sums)
        bb = 0.0 if b_sums is None else rowdot(b_sums, b_sums)
        moments.saa, moments.sab, moments.sbb = float(saa[-1]), float(sab[-1]), float(sbb[-1])
        moments.a_sum = a_sums[-1].copy()
        if b_sums is not None:
            moments.b_sum = b_sums[-1].copy()
        moments.refresh_sums()
    return {
        "alpha": np.r_[alpha0, saa - aa / n],
        "beta": np.r_[beta0, sab - ab / n],
        "gamma": np.r_[gamma0, sbb - bb / n],
    }


def first_time(coefficients: dict[str, np.ndarray], times: np.ndarray, u: np.ndarray,
               level: float, decay: bool) -> float | None:  # fmt: skip
    """The first time the set's n·dim·variance is below ``level``: right after event k
    (``times``: round start, the K events, round end; ``u`` at those times), or between
    two events with decay. None when it stays above during the round."""
    alpha, beta, gamma = coefficients["alpha"], coefficients["beta"], coefficients["gamma"]
    u_states = u[:-1]
    value = alpha - 2 * beta * u_states + gamma * u_states * u_states
    hits = np.flatnonzero(value[1:] < level)  # state k ≥ 1 starts at event k
    first_event = int(hits[0]) + 1 if hits.size else None
    if decay:
        crossing = first_crossing(alpha, beta, gamma, level, u[:-1], u[1:])
        found = np.flatnonzero(np.isfinite(crossing))
        if found.size and (first_event is None or int(found[0]) < first_event):
            state = int(found[0])
            return _time_between(float(crossing[state]), times, u, state)
    return float(times[first_event]) if first_event is not None else None


def _time_between(u_cross: float, times: np.ndarray, u: np.ndarray, state: int) -> float:
    """The time in [times[state], times[state + 1]] where u = u_cross (log u is linear
    in time)."""
    t0, t1 = float(times[state]), float(times[state + 1])
    l0, l1 = np.log(u[state]), np.log(u[state + 1])
    if l0 == l1:
        return t0
    return float(min(max(t0 + (np.log(u_cross) - l0) / (l1 - l0) * (t1 - t0), t0), t1))


def _trace(tracker: Any, metric: str, coefficients: dict, times: np.ndarray, u: np.ndarray,
           n: int) -> None:  # fmt: skip
    """Append the variance right after each of the round's events to ``tracker.trace``."""
    alpha, beta, gamma = (coefficients[k][1:] for k in ("alpha", "beta", "gamma"))
    at = u[1:-1]
    var = (alpha - 2 * beta * at + gamma * at * at) / (max(n, 1) * tracker.dim)
    tracker.trace.extend(
        (float(t), metric, float(v)) for t, v in zip(times[1:-1], var, strict=True)
    )
