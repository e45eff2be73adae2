"""``schedule: async`` for mailbox protocols (gossip, sgp): asynchronous SGP.

Each present peer runs a SimPy process, back to back: ``compute`` + ``delay`` seconds of
local work (with a ``workload``: ``local_steps`` gradient steps of ``compute`` seconds
each, then ``delay``; :mod:`sim.engine.peer_loops`), then one step. At its step a peer
sends to its out-neighbours (:meth:`~protocols.base.MailboxProtocol.out_neighbours` of
its own step count), one flow each, then mixes its rows with its mailbox: what has
arrived since its last step, the newest payload per sender (stale values are allowed). A
payload the protocol applies on arrival (sgp's push-sum shares) changes the receiver at
once and never waits; a failed flow (an end preempted) gives the sender back what it
took off. A slot naming the peer itself, an absent out-neighbour (a refused connection)
or an edge whose previous message is still in flight sends nothing: push-sum's share
stays home. Every change goes through the exact-target tracker (event mode). A step
takes no simulated time, so a peer without local work (``compute`` + ``delay`` = 0)
waits after each step until one of its messages has ended or one has reached it: it
steps at the pace of its messages, never endlessly at one instant.

A preempted peer's loop stops at once and its mailbox is emptied. Its messages are
settled as it goes down, within the preemption: a message it sent whose flow the
preemption failed gives its payload back to it (push-sum: the share is home again), and a
message delivered to it at that instant whose callbacks have not run yet is applied to it
(a plain value lands in the mailbox the preemption empties). So an absent peer's rows
never change, and no share of an old incarnation reaches the rows a rejoin rewrote. The
other end of such a message, present, is settled by the flow's callbacks as usual. When
present again the peer starts a fresh loop, local work first. Rows every
``metrics.every`` seconds (:class:`~sim.engine.sampled.SampledEngine`) with the steps and
compute time of :mod:`sim.engine.steps`; ``rounds`` are whole seconds. Nothing is drawn at
random: loops start in peer order, same-instant events in SimPy's order.

With a tracer (``avsim run --trace``) each followed peer's track gets a ``compute`` slice
per local work (cut at a preemption) and a ``step`` slice (category ``step``, no
duration: a step is one instant) with its step index, the peers it sent to and the
senders it mixed; the flows and absences are the network's and the clock's slices.
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
from sim.network.flows import DONE, FAILED, Flow


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
        #: (src, dst) → the flow carrying that payload.
        self.flows: dict[tuple[int, int], Flow] = {}
        #: Peers without local work, waiting for one of their messages to end or for one
        #: to reach them before their next step.
        self.idle: dict[int, simpy.Event] = {}

    @property
    def mailbox_protocol(self) -> MailboxProtocol:
        protocol = self.protocol
        assert isinstance(protocol, MailboxProtocol)
        return protocol

    def start(self, clock: NetworkClock) -> None:
        """Start every present peer's loop, in peer order."""
        clock.listeners.append(self)
        if self.tracer is not None:
            self.tracer.on_close(self._close_trace)
        self.up(np.flatnonzero(clock.present))

    def _loop(self, peer: int) -> Generator[simpy.Event, Any, None]:
        try:
            while True:
                self.book.begin(peer, COMPUTE, float(self.env.now))
                try:
                    yield from self.local_work(peer)
                finally:
                    self._computed(peer)
                self._step(peer)
                self.book.steps[peer] += 1
                if self.local_s[peer] == 0:  # no local work: wait for something to do
                    self.idle[peer] = self.env.event()
                    yield self.idle[peer]
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
                flow = self.clock.net.send(peer, d, nbytes)
                self.in_flight[peer, d], self.flows[peer, d] = payload, flow
                flow.done.callbacks.append(partial(self._ended, src=peer, dst=d, flow=flow))
        mailbox = self.mailboxes.pop(peer, None)
        if mailbox:
            self.tracker.change(np.array([peer]), lambda: protocol.mix(state, peer, mailbox))
        if self.tracer is not None and self.tracer.follows(peer):
            now = float(self.env.now)
            args = {"step": int(self.book.steps[peer]), "sent_to": targets,
                    "mixed_from": sorted(mailbox or ())}  # fmt: skip
            self.tracer.slice(peer, "step", "step", now, now, args)

    def _ended(self, event: simpy.Event, src: int, dst: int, flow: Flow) -> None:
        """The flow of the message on (src, dst) ended: settle it, unless the preemption
        of the end it concerns settled it already (:meth:`down`)."""
        if self.flows.get((src, dst)) is not flow:
            self._wake(src)  # settled as its receiver went down: it has ended all the same
            return
        protocol, state = self.mailbox_protocol, self.state
        payload = self._settled(src, dst)
        self._wake(src)
        if not event.ok:
            self.tracker.change(np.array([src]), lambda: protocol.returned(state, src, payload))
            return
        applied: list[bool] = []
        self.tracker.change(
            np.array([dst]), lambda: applied.append(protocol.arrive(state, dst, payload))
        )
        if not applied[0]:
            self.mailboxes.setdefault(dst, {})[src] = payload
        self._wake(dst)

    def _wake(self, peer: int) -> None:
        """End ``peer``'s wait for something to do, if it waits."""
        event = self.idle.pop(peer, None)
        if event is not None:
            event.succeed()

    def _settled(self, src: int, dst: int) -> Any:
        """Forget the message on (src, dst); its payload."""
        del self.flows[src, dst]
        return self.in_flight.pop((src, dst))

    # -- presence (a listener of the network clock) ----------------------------------------
    def down(self, peers: np.ndarray) -> None:
        """``peers`` were preempted: their messages are settled, their loops stop and their
        mailboxes are emptied.

        The clock has failed their flows in flight already. A message whose flow failed
        goes back to its sender now if the sender is among ``peers``; one whose flow
        completed at this instant (its callbacks not run yet) is applied to its receiver
        now if the receiver is among ``peers``. Only rows of ``peers`` are written here,
        directly: the churn runs the whole preemption through the exact-target tracker
        over those rows (:func:`sim.engine.observe.wiring.watched`). The other end, present,
        is left to the flow's callbacks (a share back with a present sender, a delivery
        to a present receiver)."""
        protocol, state = self.mailbox_protocol, self.state
        gone = set(peers.tolist())
        for src, dst in [e for e in self.flows if e[0] in gone or e[1] in gone]:
            phase = self.flows[src, dst].phase
            assert phase is DONE or phase is FAILED, "a preempted peer's flow still in flight"
            if phase is FAILED and src in gone:
                protocol.returned(state, src, self._settled(src, dst))
            elif phase is DONE and dst in gone:
                protocol.arrive(state, dst, self._settled(src, dst))  # else: mailbox, emptied
        for p in peers.tolist():
            self.mailboxes.pop(p, None)
            self.idle.pop(p, None)
            self.stop_loop(p)

    # -- trace -----------------------------------------------------------------------------
    def _computed(self, peer: int) -> None:
        """``peer``'s local work ended (or was cut by a preemption): count it, trace it."""
        now = float(self.env.now)
        phase, since = self.book.end(peer, now)
        if self.tracer is not None and phase >= 0 and self.tracer.follows(peer):
            self.tracer.slice(peer, "compute", "compute", since, now)

    def _close_trace(self, end_s: float) -> None:
        """The run ended: close the local work under way."""
        for peer in np.flatnonzero(self.book.phase_of >= 0).tolist():
            self._computed(peer)

    # -- summary, tables -------------------------------------------------------------------

    def summary_fields(self) -> dict[str, Any]:
        """Steps per peer and compute time (no groups, no matchmaking)."""
        return self.book.summary(float(self.env.now), self.exists, NO_MATCHMAKING)

    def tables(self) -> dict[str, pd.DataFrame]:
        """``traffic``, and ``steps`` (:class:`~sim.engine.steps.StepBook`)."""
        return {**super().tables(), "steps": self.book.tables(float(self.env.now))["steps"]}
