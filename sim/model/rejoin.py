"""What a peer brings back when it returns from an absence (``churn.rejoin``).

``keep``: its stale vector. ``reset``: a fresh draw from ``vector.init`` (like a new
node). ``fetch``: a copy of a random present peer's vector (on the rounds clock the
download is instant; on the network clock it is a real flow). Protocol arrays follow:
``reset`` restarts them (push-sum ``w`` = 1, A²CiD²'s ``x_tilde`` = the new x), ``fetch``
copies the source's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from array_api_compat import array_namespace

from protocols.contract import State
from sim.model.scenario.models import Scenario
from sim.model.vectors import fresh_rows


def reset_rows(state: State, rows: np.ndarray, fresh: np.ndarray) -> None:
    """Peers ``rows`` start afresh: x from ``fresh``; protocol arrays as at a run's start
    (push-sum weights ``w`` = 1, A²CiD²'s ``x_tilde`` = the new x)."""
    xp = array_namespace(state.x)
    state.x[rows] = xp.asarray(fresh)
    for key, array in state.extra.items():
        array[rows] = 1.0 if key == "w" else state.x[rows]


def copy_rows(state: State, rows: np.ndarray, sources: np.ndarray) -> None:
    """Peers ``rows`` take over the full state (x and every protocol array) of ``sources``."""
    state.x[rows] = state.x[sources]
    for array in state.extra.values():
        array[rows] = array[sources]


class Rejoin:
    """Applies the rejoin rule to peers present now that were absent the round before."""

    def __init__(self, scenario: Scenario, rng: np.random.Generator) -> None:
        self.mode = scenario.churn.rejoin
        self.vector = scenario.vector
        self.rng = rng
        self.previous = np.ones(scenario.peers.count, dtype=bool)

    def apply(self, state: State, present: np.ndarray) -> None:
        """Update ``state.x`` rows of returning peers in place of their stale values."""
        returning = np.flatnonzero(present & ~self.previous)
        self.previous = present
        if self.mode == "keep" or returning.size == 0:
            return
        if self.mode == "reset":
            rows = fresh_rows(self.vector, returning.size, self.rng)
            reset_rows(state, returning, rows)
            return
        stayed = np.flatnonzero(present & ~np.isin(np.arange(present.size), returning))
        if stayed.size:
            picked = stayed[self.rng.integers(0, stayed.size, returning.size)]
            copy_rows(state, returning, picked)


class NetworkRejoin:
    """Rejoin on the network clock: ``fetch`` downloads a vector as a real flow.

    A returning peer is marked present at once with ``keep`` and ``reset``; with
    ``fetch`` it first downloads the full vector (its size on the wire,
    ``vector.wire_bytes``) from a random present peer and becomes
    present (with that vector, as it was when the download completed) only then. If the
    source is preempted mid-download, it retries at once from another present peer.
    With nobody present to fetch from (at its return, or when its source fails), the
    peer joins at once with its own vector, as with ``keep``: hivemind's
    ``load_state_from_peers`` finds no peer and the averager goes on with its local
    state, and the rounds clock's :class:`Rejoin` does the same. If the peer itself is
    preempted again before its download completed, the download is abandoned: it stays
    absent until its next restore, which fetches anew.

    :meth:`restore` is called at a later instant than the peer's preemption (churn
    schedules never bring a peer back within the instant it went down), so every
    exchange delivered to or from the peer before it went down has been applied to its
    old rows (:mod:`protocols._async_net`) before ``reset`` rewrites them.
    """

    def __init__(self, scenario: Scenario, rng: np.random.Generator, clock: Any, state: State):
        self.mode, self.vector, self.rng = scenario.churn.rejoin, scenario.vector, rng
        self.clock, self.state = clock, state
        #: A fetch downloads one whole vector as it travels (``vector.wire_bytes``).
        self.vector_bytes = float(scenario.vector.wire_size)

    def restore(self, peers: np.ndarray) -> None:
        """Churn callback: ``peers`` are back now."""
        if self.mode == "reset":
            reset_rows(self.state, peers, fresh_rows(self.vector, peers.size, self.rng))
        if self.mode != "fetch":
            self.clock.arrive(peers)
            return
        if not self.clock.present.any():  # nobody to fetch from: they all keep theirs
            self.clock.arrive(peers)
            return
        for peer in peers.tolist():
            self._fetch(peer, int(self.clock.preemptions[peer]))

    def _fetch(self, peer: int, since: int) -> None:
        """Download a vector for ``peer``, restored when it had been preempted ``since``
        times (a later preemption ends the attempt)."""
        if self.clock.preemptions[peer] != since:
            return
        sources = np.flatnonzero(self.clock.present)
        if sources.size == 0:  # nobody to fetch from (its source failed): keep its own
            self.clock.arrive(np.array([peer]))
            return
        source = int(sources[self.rng.integers(sources.size)])
        flow = self.clock.net.send(source, peer, self.vector_bytes)
        flow.done.callbacks.append(lambda event: self._arrived(event, source, peer, since))

    def _arrived(self, event: Any, source: int, peer: int, since: int) -> None:
        if not event.ok:
            self._fetch(peer, since)
            return
        if self.clock.preemptions[peer] != since:
            return  # preempted at the instant the download completed
        copy_rows(self.state, np.array([peer]), np.array([source]))
        self.clock.arrive(np.array([peer]))
