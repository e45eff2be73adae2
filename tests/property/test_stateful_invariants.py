"""The invariants table of every protocol, as checks, and tests that each check bites.

Each protocol declares what it keeps (``Protocol.invariants``, names of
:data:`protocols.base.INVARIANTS`); ``invariants_in_force(clock, rejoin)`` narrows the set
for one configuration. The stateful machines (``test_stateful_rounds.py``,
``test_stateful_network.py``) keep a :class:`Ledger` per run and call its checks after
every step; this module holds the ledger and shows, on hand-made violations, that every
check can fail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import protocols
from protocols.base import INVARIANTS, Protocol
from protocols.contract import Context, RoundStats, State

#: Relative round-off allowed on conserved sums and on the hull (validation.md §1).
REL = 1e-12


def arrays(state: State) -> dict[str, np.ndarray]:
    """float64 copies of ``x`` and of every protocol array of ``state``."""
    out = {"x": np.array(state.x, dtype=np.float64, copy=True)}
    for key, value in state.extra.items():
        out[key] = np.array(value, dtype=np.float64, copy=True)
    return out


def changed_rows(before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> np.ndarray:
    """(n,) bool: rows where any array differs (bit for bit)."""
    return np.any([np.any(after[k] != before[k], axis=1) for k in before], axis=0)


def row_quantity(values: dict[str, np.ndarray]) -> np.ndarray:
    """What only an exchange may change in a row: x (A²CiD²: x + x̃, which the local
    mixing keeps per peer) beside the push-sum weight w."""
    x = values["x"] + values["x_tilde"] if "x_tilde" in values else values["x"]
    return np.hstack([x, values["w"]]) if "w" in values else x


@dataclass(frozen=True)
class RoundRecord:
    """One barrier round: who took part, the state around its arithmetic, its stats."""

    taking_part: np.ndarray  # (n,) bool: present at the start and not lost
    before: dict[str, np.ndarray]
    after: dict[str, np.ndarray]
    stats: RoundStats


class Ledger:
    """What must hold in one run: expected sums, the hull, the state at the last check.

    Parameters
    ----------
    protocol, state
        The run's protocol and state (read at every check).
    in_force
        The invariants to check (``protocol.invariants_in_force(clock, rejoin)``).
    """

    def __init__(self, protocol: Protocol, state: State, in_force: frozenset[str]) -> None:
        self.protocol, self.state, self.in_force = protocol, state, in_force
        unknown = in_force - INVARIANTS.keys()
        assert not unknown, f"{type(protocol).__name__} declares unknown invariants {unknown}"
        self.last = arrays(state)
        self.expected = {key: value.sum(axis=0) for key, value in self.last.items()}
        estimate = self.estimate()
        self.lo, self.hi = estimate.min(axis=0), estimate.max(axis=0)
        self.scale = max(1.0, *(float(np.abs(v).max()) for v in self.last.values()))
        self.touched = np.zeros(self.last["x"].shape[0], dtype=bool)
        self.checks = 0

    def estimate(self) -> np.ndarray:
        return np.array(self.protocol.estimate(self.state), dtype=np.float64)

    def external(self, change: Callable[[], Any]) -> Any:
        """Run ``change`` (a rejoin writing rows) and account for what it wrote: the
        expected sums move by its deltas and the hull widens to the rows' estimates."""
        before = arrays(self.state)
        result = change()
        after = arrays(self.state)
        for key in self.expected:
            self.expected[key] = self.expected[key] + after[key].sum(axis=0) - before[key].sum(0)
        rows = changed_rows(before, after)
        if rows.any():
            self.touched |= rows
            estimate = self.estimate()[rows]
            self.lo = np.minimum(self.lo, estimate.min(axis=0))
            self.hi = np.maximum(self.hi, estimate.max(axis=0))
            self.scale = max(self.scale, *(float(np.abs(v).max()) for v in after.values()))
        return result

    # -- checks ------------------------------------------------------------------------
    def check(self, rounds: Sequence[RoundRecord] = (), **exchanges: Any) -> None:
        """Every invariant in force, now; then remember the state for the next check."""
        now = arrays(self.state)
        n = now["x"].shape[0]
        tol = REL * n * self.scale
        if "sum" in self.in_force:
            assert_close(now["x"].sum(axis=0), self.expected["x"], tol, "Σx moved")
        if "momentum_sum" in self.in_force:
            total = now["x"].sum(axis=0) + now["x_tilde"].sum(axis=0)
            expected = self.expected["x"] + self.expected["x_tilde"]
            assert_close(total, expected, 2 * tol, "Σ(x + x̃) moved")
        if "weight_sum" in self.in_force:
            assert_close(now["w"].sum(axis=0), self.expected["w"], tol, "Σw moved")
        if "positive_weights" in self.in_force:
            assert np.all(now["w"] > 0), f"a weight is not positive: {now['w'].min()}"
        if "hull" in self.in_force:
            self.check_hull()
        for record in rounds:
            self.check_round(record)
        if exchanges:
            self.check_exchanges(now, **exchanges)
        self.last = now
        self.touched[:] = False
        self.checks += 1

    def check_hull(self) -> None:
        estimate = self.estimate()
        slack = REL * np.maximum(np.maximum(np.abs(self.lo), np.abs(self.hi)), 1.0)
        outside = (estimate < self.lo - slack) | (estimate > self.hi + slack)
        assert not outside.any(), (
            f"estimates left the hull [{self.lo}, {self.hi}]: rows "
            f"{np.flatnonzero(outside.any(axis=1))}"
        )

    def check_round(self, record: RoundRecord) -> None:
        """A barrier round: absent and lost peers unchanged; the drift it reported."""
        if "absent_unchanged" in self.in_force:
            moved = changed_rows(record.before, record.after) & ~record.taking_part
            assert not moved.any(), f"peers {np.flatnonzero(moved)} changed without taking part"
        if "drift_reported" in self.in_force:
            x0, x1 = record.before["x"], record.after["x"]
            n, dim = x0.shape
            shift = x1.sum(axis=0) - x0.sum(axis=0)
            moved = float(np.linalg.norm(shift)) / n / np.sqrt(dim)
            tol = REL * self.scale
            assert abs(record.stats.mean_drift - moved) <= tol, (
                f"mean_drift {record.stats.mean_drift!r} reported, {moved!r} happened"
            )

    def check_exchanges(
        self,
        now: dict[str, np.ndarray],
        applied: set[int],
        new: set[int],
        ends: dict[int, tuple[int, ...]],
        absent: np.ndarray,
    ) -> None:
        """Continuous time: rows change only at the ends of the exchanges applied since
        the last check (``new``, of ``applied``), or by a rejoin; peers absent since the
        last check (``absent``) not at all, but for such exchanges."""
        allowed = self.touched.copy()
        for key in new:
            allowed[list(ends[key])] = True
        quantity_before, quantity_now = row_quantity(self.last), row_quantity(now)
        exact = "x_tilde" not in now
        tol = 0.0 if exact else 4 * REL * self.scale
        moved = np.any(np.abs(quantity_now - quantity_before) > tol, axis=1)
        if "atomic_exchanges" in self.in_force:
            stray = moved & ~allowed
            assert not stray.any(), f"rows {np.flatnonzero(stray)} moved outside an exchange"
        if "absent_unchanged" in self.in_force:
            # an exchange whose flows were delivered at the instant an end went down is
            # still applied (its callbacks run as a later event of that instant)
            idle = absent & ~allowed
            assert not changed_rows(
                {k: v[idle] for k, v in self.last.items()}, {k: v[idle] for k, v in now.items()}
            ).any(), f"absent peers {np.flatnonzero(idle)} changed"


def assert_close(value: np.ndarray, expected: np.ndarray, tol: float, what: str) -> None:
    error = float(np.max(np.abs(np.asarray(value) - np.asarray(expected)), initial=0.0))
    assert error <= tol, f"{what} by {error:.3g} (tolerance {tol:.3g})"


# --- the declarations ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(protocols.REGISTRY))
def test_every_protocol_declares_known_invariants_including_an_averaging_one(name):
    cls = protocols.REGISTRY[name]
    assert cls.invariants, f"{name} declares no invariants"
    assert cls.invariants <= INVARIANTS.keys()
    assert cls.invariants & {"sum", "momentum_sum", "drift_reported"}


# --- each check can fail ---------------------------------------------------------------


def build(name: str, x: np.ndarray, **params: Any) -> tuple[Protocol, State]:
    cls = protocols.get(name)
    ctx = Context(x.shape[0], x.shape[1], 8, np.random.default_rng(0))
    protocol = cls(cls.Params(name=name, **params), ctx)
    state = State(x=x.copy())
    protocol.init_state(state)
    return protocol, state


def test_the_sum_check_catches_a_half_applied_exchange():
    protocol, state = build("pairwise_gossip", np.arange(8.0).reshape(4, 2))
    ledger = Ledger(protocol, state, frozenset({"sum"}))
    state.x[0] -= (state.x[0] - state.x[1]) / 2  # one end only
    with pytest.raises(AssertionError, match="Σx moved"):
        ledger.check()


def test_a_rejoin_accounted_for_is_no_violation_but_the_hull_check_bites_otherwise():
    protocol, state = build("gossip", np.arange(8.0).reshape(4, 2))
    ledger = Ledger(protocol, state, frozenset({"sum", "hull"}))

    def reset() -> None:
        state.x[2] = [100.0, -100.0]

    ledger.external(reset)
    ledger.check()
    state.x[1] = [200.0, 0.0]
    with pytest.raises(AssertionError):
        ledger.check()


def test_the_weight_checks_catch_lost_mass_and_a_zero_weight():
    protocol, state = build("push_sum", np.ones((4, 1)))
    ledger = Ledger(protocol, state, frozenset({"weight_sum", "positive_weights"}))
    state.extra["w"][3] = 0.0
    with pytest.raises(AssertionError, match="Σw moved"):
        ledger.check()
    ledger.expected["w"] = state.extra["w"].sum(axis=0)
    with pytest.raises(AssertionError, match="not positive"):
        ledger.check()


def test_the_momentum_check_catches_a_lost_companion_update():
    protocol, state = build("a2cid2", np.arange(4.0).reshape(4, 1), eta=1.0, alpha_tilde=0.5)
    ledger = Ledger(protocol, state, frozenset({"momentum_sum"}))
    state.extra["x_tilde"][0] += 1.0
    with pytest.raises(AssertionError, match="x̃"):
        ledger.check()


def test_the_round_checks_catch_a_changed_absent_peer_and_an_unreported_drift():
    protocol, state = build("gossip", np.arange(4.0).reshape(4, 1))
    ledger = Ledger(protocol, state, frozenset({"absent_unchanged", "drift_reported"}))
    before = arrays(state)
    after = {"x": before["x"] + np.array([[0.0], [0.0], [0.0], [1.0]])}
    part = np.array([True, True, True, False])
    with pytest.raises(AssertionError, match="without taking part"):
        ledger.check([RoundRecord(part, before, after, RoundStats(mean_drift=0.25 / 2))])
    with pytest.raises(AssertionError, match="mean_drift"):
        ledger.check([RoundRecord(np.ones(4, bool), before, after, RoundStats())])
    ledger.check([RoundRecord(np.ones(4, bool), before, after, RoundStats(mean_drift=0.25))])


def test_the_exchange_check_catches_a_row_moved_outside_an_applied_exchange():
    protocol, state = build("pairwise_gossip", np.arange(4.0).reshape(4, 1))
    ledger = Ledger(protocol, state, frozenset({"atomic_exchanges", "absent_unchanged"}))
    state.x[[0, 1]] = 0.5
    absent = np.zeros(4, bool)
    ledger.check(applied={0}, new={0}, ends={0: (0, 1)}, absent=absent)
    state.x[2] = 7.0
    with pytest.raises(AssertionError, match="outside an exchange"):
        ledger.check(applied={0}, new=set(), ends={0: (0, 1)}, absent=absent)
    state.x[3] = 9.0
    ledger.in_force = frozenset({"absent_unchanged"})
    with pytest.raises(AssertionError, match="absent peers"):
        ledger.check(applied=set(), new=set(), ends={}, absent=np.array([0, 0, 0, 1], bool))
