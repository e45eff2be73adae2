"""The network clock itself (:class:`NetworkClock`): it sends a round's or a group's
flows (:class:`~sim.engine.netclock.round_state.RoundState` keeps what each waits for),
streams as one flow each, in chunks where a piece's end changes nothing
(:mod:`sim.engine.netclock.chains`), and reports when they have all ended."""

from __future__ import annotations

import math
from collections import deque
from functools import partial
from typing import Any
from typing import Protocol as Interface

import numpy as np
import simpy

from protocols.contract import IDLE_ROUND_S, GroupPlan, RoundPlan
from sim.engine.netclock import alone_rounds
from sim.engine.netclock.alone_groups import AloneGroups
from sim.engine.netclock.chains import Chains
from sim.engine.netclock.round_state import ReplyChunk, RoundState
from sim.network import Flow, FlowNetwork
from sim.network.flows import BANDWIDTH


class PresenceListener(Interface):
    """Told when peers go down (:meth:`NetworkClock.preempt`) and come back
    (:meth:`NetworkClock.arrive`): the async schedule's peer loops."""

    def down(self, peers: np.ndarray) -> None: ...

    def up(self, peers: np.ndarray) -> None: ...


class NetworkClock:
    """Sends a round's flows and reports when they have all ended.

    A stream (``streamed`` flows each after the previous one, ``previous`` or else
    ``after``, on one connection) runs as one flow in the network: each piece completes
    and the next one resumes it (:meth:`~sim.network.FlowNetwork.resume`) without
    leaving the bandwidth phase, so a piece costs no new flow and no re-rating; its end
    is still an event (gates, replies and timeouts observe it). A piece that also waits
    for a gate (a reply) follows back to back only if it starts at the instant the piece
    before it completed; otherwise it is sent afresh, with the route latency, when its
    gate opens. Such a piece's predecessor is sent kept (its flow stays for the next
    piece) only once the next piece waits for nothing else, and
    :meth:`~sim.network.FlowNetwork.keep_stream` keeps it if that happens while it is in
    flight; until then it may end quietly, as any reply. The results are those of the
    piece-by-piece model (:attr:`streams` False) to round-off.

    Parameters
    ----------
    env, net
        The run's environment and flow network.
    present
        (n_peers,) bool, shared with the churn callbacks (True = present now).
    delay_s
        (n_peers,) straggler delay of each peer before it starts a round, seconds.
    """

    #: Run streams as one flow (True) or piece by piece, a flow per piece (False: the
    #: reference the equivalence tests compare with).
    streams = True
    #: With :attr:`streams`, send a stream's pieces in chunks, an event only where a
    #: piece's end is seen (:mod:`sim.engine.netclock.chains`; False: an event per piece).
    chunks = True
    #: Count each round's flows on latches (:meth:`~sim.network.FlowNetwork.join_latch`)
    #: so that a completion that releases nothing is recorded without an event of its
    #: own (False: every completion settles its flow's ``done``).
    quiet = True
    #: Let ``schedule: async`` and barrier rounds of group protocols run their groups
    #: alone where nothing else can use their links
    #: (:class:`~sim.engine.netclock.alone_groups.AloneGroups`; False: every group on
    #: this clock's events, the reference the equivalence tests compare with).
    groups_alone = True

    def __init__(
        self, env: simpy.Environment, net: FlowNetwork, present: np.ndarray, delay_s: np.ndarray
    ) -> None:
        self.env, self.net, self.present, self.delay_s = env, net, present, delay_s
        self.lost = np.zeros(present.size, dtype=bool)
        #: (n_peers,) int: how many times each peer has been preempted (a rejoin that is
        #: still downloading gives up when its peer goes down again).
        self.preemptions = np.zeros(present.size, dtype=np.int64)
        self.messages = 0
        self.failed_messages = 0
        #: Told about every preemption and return, after the clock's own book-keeping
        #: (none on barrier rounds and in continuous time).
        self.listeners: list[PresenceListener] = []
        #: Rounds and groups in flight whose streams run in chunks (:meth:`settle`).
        self._chunked: dict[int, RoundState] = {}
        #: Runs the groups of :meth:`run_group` and of :meth:`transmit` alone, where nothing
        #: else can use their links (set by the engine; None: every flow on this clock's
        #: events).
        self.alone: AloneGroups | None = None

    def preempt(self, peers: np.ndarray) -> None:
        """Churn callback: ``peers`` go down now; their flows fail, they are lost."""
        self.present[peers] = False
        self.lost[peers] = True
        self.preemptions[peers] += 1
        self.net.fail_peers(peers.tolist())
        if self.alone is not None:
            self.alone.changed(peers, up=False)
        for listener in self.listeners:
            listener.down(peers)

    def arrive(self, peers: np.ndarray) -> None:
        """Rejoin callback: ``peers`` are present again (after a ``fetch``: with the
        downloaded vector)."""
        self.present[peers] = True
        if self.alone is not None:
            self.alone.changed(peers, up=True)
        for listener in self.listeners:
            listener.up(peers)

    def transmit(self, plan: RoundPlan) -> Any:
        """A SimPy process body: start the plan's flows, return when all have ended.

        Builds the flows (``plan.flows()``) and fills ``plan.delivered`` and
        ``plan.timed_out`` on the way; ``lost`` marks the peers preempted meanwhile.
        Where :attr:`alone` is set (barrier rounds of a group protocol), the round's small
        components run alone (:func:`~sim.engine.netclock.alone_rounds.transmit`).
        """
        self.lost[:] = False
        if self.alone is None:
            yield from self.run(plan, IDLE_ROUND_S)
        else:  # its groups alone (barrier rounds of a group protocol)
            n_peers = self.present.size
            yield from alone_rounds.transmit(
                self.env, self.alone, plan, self.run, n_peers, IDLE_ROUND_S
            )

    def run(self, plan: RoundPlan | GroupPlan, idle_s: float = 0.0) -> Any:
        """:meth:`transmit` without touching ``lost`` (the groups of ``schedule: async``
        run side by side, each keeping its own losses); a plan without flows waits
        ``idle_s`` seconds (0: returns at once)."""
        flows = plan.flows()
        n_flows = flows.src.size
        plan.delivered = np.zeros(n_flows, dtype=bool)
        plan.timed_out = np.zeros(n_flows, dtype=bool)
        if n_flows == 0:
            if idle_s > 0:
                yield self.env.timeout(idle_s)
            return
        done = self.env.event()
        watched = self.net.sends_watched
        chunks = self.chunks and not watched
        state = RoundState(plan, flows, done, self.streams, chunks, self.net.keep_stream)
        state.loud = partial(self._on_loud, state)
        if self.quiet and not watched:
            state.take_latches(self.net, partial(self._on_quiet, state), state.loud)
        roots = state.roots()
        start_s = self.delay_s[flows.src[roots]] if flows.start_s is None else flows.start_s[roots]
        for at in np.unique(start_s).tolist():
            batch = roots[start_s == at]
            if at <= 0:
                self._release(batch.tolist(), state)
            else:
                timer = self.env.timeout(at)
                timer.callbacks.append(partial(self._release_batch, batch.tolist(), state))
        self._release(state.ready_at_start(), state)
        if state.chains is None and state.reply_chunks is None:
            yield done
        else:
            self._chunked[id(state)] = state
            try:
                yield done
            finally:
                del self._chunked[id(state)]
        state.give_back_latches(self.net)  # every flow has ended

    def run_group(self, plan: GroupPlan) -> Any:
        """A SimPy process body: an async group's :meth:`run`, alone
        (:class:`~sim.engine.netclock.alone_groups.AloneGroups`) where :attr:`alone` is
        set and takes the group (:meth:`~sim.engine.netclock.alone_groups.AloneGroups.takes`)."""
        alone = self.alone
        if alone is None:
            yield from self.run(plan)
        elif alone.takes(plan):
            yield from alone.run(plan)
        else:
            yield from alone.on_events(plan, self.run(plan))

    def settle(self) -> None:
        """Count the pieces that have ended inside chunks in flight (messages, flows,
        delivered), as piece by piece would have by now, and what the groups running alone
        did: before the counters are read."""
        if self.alone is not None:
            self.alone.settle()
        for state in list(self._chunked.values()):
            chains = state.chains
            ready: list[int] = []
            if chains is not None:
                for c in range(len(chains.lengths)):
                    self._catch_up(c, state, chains, ready)
            if state.reply_chunks:
                for chunk in list(state.reply_chunks.values()):
                    self._catch_up_replies(chunk, state, ready)
            self._release(ready, state)

    def _release(self, flows: list[int], state: RoundState) -> None:
        """Start ``flows`` (their conditions are met); broken ones fail at once, which may
        release more flows in turn."""
        if len(flows) == 1 and not state.broken[flows[0]]:  # most ends release one flow
            self._send(flows[0], state)
        elif flows:
            queue = deque(flows)
            while queue:
                i = queue.popleft()
                if state.broken[i]:
                    queue.extend(state.ended(i, False))
                else:
                    self._send(i, state)
        chains = state.chains
        if chains is not None and chains.touched:
            self._move_frontiers(state, chains)

    def _move_frontiers(self, state: RoundState, chains: Chains) -> None:
        """Move the frontiers of the families whose gates opened, and cut back the chunks
        in flight that must end at a new frontier piece."""
        ready: list[int] = []
        while chains.touched:
            f = next(iter(chains.touched))
            del chains.touched[f]
            for c in chains.members[f]:  # what has passed the new frontier is counted
                self._catch_up(c, state, chains, ready)
            for c in chains.frontier_cuts(f, state.gate_left):
                self._cut(c, chains.frontier[f], state, chains)
        if ready:  # nothing waits on a piece inside a chunk but its gate: none expected
            self._release(ready, state)

    def _release_batch(self, flows: list[int], state: RoundState, _event: Any) -> None:
        self._release(flows, state)

    def _send(self, i: int, state: RoundState) -> None:
        src, dst = state.src.item(i), state.dst.item(i)
        self.messages += 1
        stream = state.open.pop(i, None) if state.open else None  # i continues it
        if not (self.present[src] and self.present[dst]):
            self.failed_messages += 1
            if stream is not None:
                self.net.close_stream(stream)
            refused = self.env.timeout(self.net.routes.route(src, dst)[0])
            refused.callbacks.append(partial(self._on_refused, i, state))
            return
        chains = state.chains
        c = -1 if chains is None else chains.chain_of[i]
        if chains is not None and c >= 0:  # a chunk: piece i and the next ones, one flow
            t = chains.pos_of[i]
            last = chains.chunk(c, t)
            nbytes = state.nbytes.item(i) if last == t else chains.chunk_bytes(c, t, last)
            cont = chains.piece(c, last + 1)
        else:
            nbytes = state.nbytes.item(i)
            cont = -1 if state.cont is None else state.cont.item(i)  # continuing i's stream
        # a continuation waiting for more than i (its gate) is kept for only once i is
        # all it waits for (RoundState.ended): else i's end may leave the stream idle
        keep = cont >= 0 and state.need[cont] == 1
        run: ReplyChunk | None = None
        last = i
        if keep and state.reply_chunks is not None and state.lazy[cont]:  # type: ignore[index]
            pieces = state.ready_run(i)
            if len(pieces) > 1:  # i and the next replies, all ready: one flow
                run = ReplyChunk(pieces, state.nbytes)
                last = pieces[-1]
                nbytes = run.cum[-1]
                cont = state.cont.item(last)  # type: ignore[union-attr]
                keep = cont >= 0 and state.need[cont] == 1
        if stream is not None and stream.parked:
            flow = self.net.resume(stream, nbytes, keep)
            flow.tag = last  # the stream's flow carries piece i (to last) now
            if state.pred_end:  # back to back by construction: the note is not needed
                state.pred_end.pop(state.pred.item(i), None)  # type: ignore[union-attr]
        else:
            back = state.pred is not None and state.back_to_back(i, self.env.now)
            flow = self.net.send(src, dst, nbytes, last, latency=not back, keep=keep)
        if cont >= 0:
            state.open[cont] = flow
        if chains is not None and c >= 0:
            chains.flow[c] = flow
            self.net.notify(flow, partial(self._on_chunk, c, state))
        elif run is not None:
            run.flow = flow
            state.reply_chunks[id(run)] = run  # type: ignore[index]
            self.net.notify(flow, partial(self._on_replies, run, state))
        else:  # counted on its latch, else told when it ends (FlowNetwork.notify)
            ends = state.ends
            latch = -1 if ends is None else state.latch.item(i)
            if latch < 0 or not self.net.join_latch(flow, latch, *ends):  # type: ignore[misc]
                self.net.notify(flow, state.loud)  # type: ignore[arg-type]
        if state.timeout_s is not None:  # none on a chunk's pieces (Chains.build)
            limit = state.timeout_s.item(i)
            if limit < math.inf:
                timer = self.env.timeout(limit)
                timer.callbacks.append(partial(self._on_timeout, i, flow, flow.id, state))

    def _on_chunk(self, c: int, state: RoundState, flow: Flow, ok: bool) -> None:
        """Stream c's chunk ended (its last piece went through, or it failed): count its
        family's pieces that ended meanwhile, then its own, move the family's frontier
        and release what may start."""
        chains = state.chains
        assert chains is not None
        ready: list[int] = []
        self._catch_up_family(c, state, chains, ready)
        last = chains.last[c]
        if ok:
            self._continued(c, chains.done[c], last, state, chains, ready)
            ready.extend(state.ended(chains.piece(c, last), True))
            chains.done[c] = last + 1
        else:
            following = chains.piece(c, last + 1)
            if following >= 0:
                state.open.pop(following, None)
            stop = chains.ended_by(c, flow.bytes_sent, failed=True)
            self._continued(c, chains.done[c], stop, state, chains, ready)
            ready.extend(state.ended(chains.piece(c, stop), False))  # the rest are broken
            chains.done[c] = chains.lengths[c]
        chains.last[c], chains.flow[c] = -1, None
        if ok:
            state.mark_end(chains.piece(c, last), self.env.now)
        self._release(ready, state)

    def _on_replies(self, run: ReplyChunk, state: RoundState, flow: Flow, ok: bool) -> None:
        """A chunk of replies ended (its last piece went through, or it failed): count
        its pieces, as piece by piece would have, and release what may start."""
        ready: list[int] = []
        pieces, last = run.pieces, run.pieces[-1]
        cont = state.cont
        assert cont is not None
        if ok:
            self._count_replies(run, len(pieces) - 1, state, ready)
            state.mark_end(last, self.env.now)
            ready.extend(state.ended(last, True))
        else:
            state.open.pop(cont.item(last), None)
            stop = run.through(flow.bytes_sent, failed=True)
            self._count_replies(run, stop, state, ready)
            ready.extend(state.ended(pieces[stop], False))  # the rest are broken
        del state.reply_chunks[id(run)]  # type: ignore[union-attr]
        run.flow = None
        self._release(ready, state)
        if ok:
            self._close_unsent(cont.item(last), state)

    def _close_unsent(self, j: int, state: RoundState) -> None:
        """After the piece before j ended and released what it could: if j was not sent
        (broken meanwhile), its parked stream leaves the network."""
        if j >= 0:
            stream = state.open.pop(j, None)
            if stream is not None:
                self.net.close_stream(stream)

    def _catch_up_replies(self, run: ReplyChunk, state: RoundState, ready: list[int]) -> None:
        """Count the pieces of a chunk of replies in flight that have ended by now."""
        flow = run.flow
        if flow is None or flow.phase is not BANDWIDTH or flow.parked:
            return  # its end, if any, is an event of this instant
        self._count_replies(run, run.through(self.net.moved(flow)), state, ready)

    def _count_replies(
        self, run: ReplyChunk, stop: int, state: RoundState, ready: list[int]
    ) -> None:
        """Pieces ``run.done`` .. stop − 1 of a chunk of replies ended, each followed by
        the next piece in the same flow: counted as sent, ended and delivered."""
        if stop > run.done:
            state.ended_inside(run.pieces[run.done : stop], ready)
            self._inside(stop - run.done)
            run.done = stop

    def _catch_up_family(self, c: int, state: RoundState, chains: Chains, ready: list[int]) -> None:
        """Before stream c's pieces are counted at an event of its own: count the pieces
        the other streams of its family ended inside their chunks, unless the frontier
        gate waits for another chunk's end anyway (then it cannot open now, and the
        counting waits for the event that may open it)."""
        if chains.gated_elsewhere(c):
            return
        for other in chains.members[chains.family[c]]:
            if other != c:
                self._catch_up(other, state, chains, ready)

    def _catch_up(self, c: int, state: RoundState, chains: Chains, ready: list[int]) -> None:
        """Count the pieces of stream c's chunk in flight that have ended by now."""
        flow = chains.flow[c]
        if flow is None or flow.phase is not BANDWIDTH or flow.parked:
            return  # no chunk moving (its end, if any, is an event of this instant)
        stop = chains.ended_by(c, self.net.moved(flow))
        if stop > chains.done[c]:
            self._continued(c, chains.done[c], stop, state, chains, ready)
            chains.done[c] = stop

    def _continued(
        self, c: int, start: int, stop: int, state: RoundState, chains: Chains, ready: list[int]
    ) -> None:
        """Pieces start..stop-1 of stream c ended inside its chunk, each followed by the
        next piece in the same flow: counted as sent, ended and delivered."""
        if stop > start:
            at = chains.offset[c]
            state.ended_run(chains.flat, at + start, at + stop, ready)
            self._inside(stop - start)

    def _inside(self, n: int) -> None:
        """``n`` pieces of a stream ended inside a chunk (counted as ended by the round's
        state), each followed by the next piece in the same flow: counted as messages,
        and as flows sent and completed."""
        self.messages += n
        self.net.count_continued(n)

    def _cut(self, c: int, last: int, state: RoundState, chains: Chains) -> None:
        """Cut stream c's chunk back to end at piece ``last``; a chunk whose bytes are all
        through already (its end is an event of this instant) is left whole."""
        old_last, flow = chains.last[c], chains.flow[c]
        if flow.phase is not BANDWIDTH or flow.parked:
            return
        chains.last[c] = last
        following = chains.piece(c, old_last + 1)
        if following >= 0:
            state.open.pop(following, None)
        self.net.shorten(flow, chains.chunk_bytes(c, chains.first[c], last), keep=True)
        state.open[chains.piece(c, last + 1)] = flow  # last is before the old last

    def _on_refused(self, i: int, state: RoundState, _event: Any) -> None:
        chains = state.chains
        if chains is not None and chains.chain_of[i] >= 0:  # a stream ends here, broken
            ready: list[int] = []
            self._catch_up_family(chains.chain_of[i], state, chains, ready)
            ready.extend(state.ended(i, False))
            self._release(ready, state)
            return
        self._release(state.ended(i, False), state)

    def _ended(self, i: int, state: RoundState, ok: bool) -> None:
        """The round's flow i ended (``ok``: delivered): release what may start."""
        cont = state.cont
        if not ok and cont is not None:
            state.open.pop(cont.item(i), None)
        elif state.gated_pred is not None:
            state.mark_end(i, self.env.now)
        self._release(state.ended(i, ok), state)
        if cont is not None and state.open:  # else no stream to close
            self._close_unsent(cont.item(i), state)

    def _on_loud(self, state: RoundState, flow: Flow, ok: bool) -> None:
        """A flow of the round ended, other than quietly (the last of its latch, failed,
        or on no latch; :meth:`~sim.network.FlowNetwork.notify`): :meth:`_ended` of the
        round's flow ``flow.tag``."""
        self._ended(flow.tag, state, ok)

    def _on_quiet(self, state: RoundState, flow: Flow) -> None:
        """The round's flow ``flow.tag`` completed quietly: others of its latch are in
        flight, so its end opens no gate, starts no flow and does not end the round
        (``RoundState.take_latches``)."""
        if state.gated_pred is not None:
            state.mark_end(flow.tag, flow.end_s)
        if state.ended(flow.tag, True):
            raise RuntimeError(f"flow {flow.tag} ended quietly but released flows")

    def _on_timeout(self, i: int, flow: Any, key: int, state: RoundState, _event: Any) -> None:
        if flow.id != key or flow.phase in ("done", "failed") or self.net.due(flow):
            # ended (a stream's flow carries a later piece under a new id), or ends at
            # this very instant: the last byte is in time, whichever event comes first
            return
        assert state.plan.timed_out is not None
        state.plan.timed_out[i] = True
        self.net.cancel(flow)
