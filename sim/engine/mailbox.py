"""``schedule: async`` for mailbox protocols (gossip, sgp): asynchronous SGP.

Each present peer runs a SimPy process, back to back: ``compute`` + ``delay`` seconds of
local work, then one step. At its step a peer sends to its out-neighbours
(:meth:`~protocols.base.MailboxProtocol.out_neighbours` of its own step count), one flow
each, then mixes its rows with its mailbox: what has arrived since its last step, the
newest payload per sender (stale values are allowed). A payload the protocol applies on
arrival (sgp's push-sum shares) changes the receiver at once and never waits; a failed
flow (an end preempted) gives the sender back what it took off. A slot naming the peer
itself, an absent out-neighbour (a refused connection) or an edge whose previous message
is still in flight sends nothing: push-sum's share stays home. Every change goes through
the exact-target tracker (event mode).

A preempted peer's loop stops at once and its mailbox is emptied; when present again it
starts a fresh loop, local work first. Rows every ``metrics.every`` seconds
(:class:`~sim.engine.sampled.SampledEngine`) with the steps and compute time of
:mod:`sim.engine.steps`; ``rounds`` are whole seconds. Nothing is drawn at random: loops
start in peer order, same-instant events in SimPy's order.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import simpy

from protocols.base import MailboxProtocol
from sim.engine.netclock import NetworkClock
from sim.engine.peer_loops import NO_MATCHMAKING, PeerLoopEngine
from sim.engine.steps import COMPUTE
from sim.model.scenario.models import Scenario


class MailboxEngine(PeerLoopEngine):
    """Per-peer loops of local work, sends to the out-neighbours and mailbox mixing."""

    protocol_type = MailboxProtocol

    def __init__(
        self, scenario: Scenario, seed: int, interrupt: threading.Event | None = None
    ) -> None:
        super().__init__(scenario, seed, interrupt)
        self.mailboxes: dict[int, dict[int, Any]] = {}
        #: (src, dst) → the payload in flight on that edge (one at a time per edge).
        self.in_flight: dict[tuple[int, int], Any] = {}

    @property
    def mailbox_protocol(self) -> MailboxProtocol:
        protocol = self.protocol
        assert isinstance(protocol, MailboxProtocol)
        return protocol

    def start(self, clock: NetworkClock) -> None:
        """Start every present peer's loop, in peer order."""
        clock.listeners.append(self)
        self.up(np.flatnonzero(clock.present))

    def _loop(self, peer: int) -> Generator[simpy.Event, Any, None]:
        try:
            while True:
                self.book.begin(peer, COMPUTE, float(self.env.now))
                try:
                    yield self.env.timeout(self.local_s[peer])
                finally:
                    self.book.end(peer, float(self.env.now))
                self._step(peer)
                self.book.steps[peer] += 1
        except simpy.Interrupt:
            pass  # preempted

    def _step(self, peer: int) -> None:
        """Send to the out-neighbours, then mix the mailbox."""
        protocol, state, present = self.mailbox_protocol, self.state, self.clock.present
        slots = protocol.out_neighbours(peer, int(self.book.steps[peer])).tolist()
        targets = [d for d in slots if d != peer and present[d] and (peer, d) not in self.in_flight]
        if targets:
            rows = np.array([peer])
            sent: list[Any] = []
            self.tracker.change(rows, lambda: sent.append(protocol.post(state, peer, len(targets))))
            payload, nbytes = sent[0], protocol.mailbox_bytes()
            for d in targets:
                self.in_flight[peer, d] = payload
                flow = self.clock.net.send(peer, d, nbytes)
                flow.done.callbacks.append(partial(self._ended, src=peer, dst=d))
        mailbox = self.mailboxes.pop(peer, None)
        if mailbox:
            self.tracker.change(np.array([peer]), lambda: protocol.mix(state, peer, mailbox))

    def _ended(self, event: simpy.Event, src: int, dst: int) -> None:
        protocol, state = self.mailbox_protocol, self.state
        payload = self.in_flight.pop((src, dst))
        if not event.ok:
            self.tracker.change(np.array([src]), lambda: protocol.returned(state, src, payload))
            return
        applied: list[bool] = []
        self.tracker.change(
            np.array([dst]), lambda: applied.append(protocol.arrive(state, dst, payload))
        )
        if not applied[0]:
            self.mailboxes.setdefault(dst, {})[src] = payload

    # -- presence (a listener of the network clock) ----------------------------------------
    def down(self, peers: np.ndarray) -> None:
        """``peers`` were preempted: their loops stop and their mailboxes are emptied."""
        for p in peers.tolist():
            self.mailboxes.pop(p, None)
            self.stop_loop(p)

    # -- summary, tables -------------------------------------------------------------------

    def summary_fields(self) -> dict[str, Any]:
        """Steps per peer and compute time (no groups, no matchmaking)."""
        return self.book.summary(float(self.env.now), self.exists, NO_MATCHMAKING)

    def tables(self) -> dict[str, pd.DataFrame]:
        """``traffic``, and ``steps`` (:class:`~sim.engine.steps.StepBook`)."""
        return {**super().tables(), "steps": self.book.tables(float(self.env.now))["steps"]}
