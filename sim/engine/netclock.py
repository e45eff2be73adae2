"""The ``network`` clock: barrier rounds whose messages are flows in the network model.

Each round the protocol plans its messages (:meth:`protocols.base.BarrierProtocol.plan`)
from the peers present when the round starts. A sender starts its first flows after its
straggler ``delay`` (or at the plan's ``start_s``); a flow behind a gate starts when
every flow opening that gate has ended, a flow ``after`` another once that one has ended
(and fails at once if it failed), see :class:`protocols.contract.Flows`. A flow to or
from a peer that is absent when it should start fails after the route latency (a
refused connection) and moves no bytes; a flow in progress fails the instant either end
is preempted, or when its ``timeout_s`` runs out (one whose last byte arrives at that
very instant is delivered, whichever SimPy event comes first). The round ends when every
flow has ended; peers preempted at any moment of the round count as lost and take no part
in its arithmetic.
A round with no flows waits :data:`~protocols.contract.IDLE_ROUND_S` so that simulated
time always advances.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any
from typing import Protocol as Interface

import numpy as np
import simpy

from protocols.contract import IDLE_ROUND_S, Flows, GroupPlan, RoundPlan
from sim.engine.chains import Chains, pieces_through
from sim.engine.trace import Tracer
from sim.network import Flow, FlowNetwork
from sim.network.flows import BANDWIDTH, DONE, FAILED


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
    #: piece's end is seen (:mod:`sim.engine.chains`; False: an event per piece).
    chunks = True
    #: Count each round's flows on latches (:meth:`~sim.network.FlowNetwork.join_latch`)
    #: so that a completion that releases nothing is recorded without an event of its
    #: own (False: every completion settles its flow's ``done``).
    quiet = True

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
        self._chunked: dict[int, _RoundState] = {}

    def preempt(self, peers: np.ndarray) -> None:
        """Churn callback: ``peers`` go down now; their flows fail, they are lost."""
        self.present[peers] = False
        self.lost[peers] = True
        self.preemptions[peers] += 1
        for peer in peers.tolist():
            self.net.fail_peer(peer)
        for listener in self.listeners:
            listener.down(peers)

    def arrive(self, peers: np.ndarray) -> None:
        """Rejoin callback: ``peers`` are present again (after a ``fetch``: with the
        downloaded vector)."""
        self.present[peers] = True
        for listener in self.listeners:
            listener.up(peers)

    def transmit(self, plan: RoundPlan) -> Any:
        """A SimPy process body: start the plan's flows, return when all have ended.

        Builds the flows (``plan.flows()``) and fills ``plan.delivered`` and
        ``plan.timed_out`` on the way; ``lost`` marks the peers preempted meanwhile.
        """
        self.lost[:] = False
        yield from self.run(plan, IDLE_ROUND_S)

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
        state = _RoundState(plan, flows, done, self.streams, chunks, self.net.keep_stream)
        if self.quiet and not watched:
            state.take_latches(
                self.net, partial(self._on_quiet, state), partial(self._on_loud, state)
            )
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

    def settle(self) -> None:
        """Count the pieces that have ended inside chunks in flight (messages, flows,
        delivered), as piece by piece would have by now: before the counters are read."""
        for state in list(self._chunked.values()):
            chains = state.chains
            ready: list[int] = []
            if chains is not None:
                for c in range(len(chains.pieces)):
                    self._catch_up(c, state, chains, ready)
            if state.reply_chunks:
                for chunk in list(state.reply_chunks.values()):
                    self._catch_up_replies(chunk, state, ready)
            self._release(ready, state)

    def _release(self, flows: list[int], state: _RoundState) -> None:
        """Start ``flows`` (their conditions are met); broken ones fail at once, which may
        release more flows in turn."""
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

    def _move_frontiers(self, state: _RoundState, chains: Chains) -> None:
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

    def _release_batch(self, flows: list[int], state: _RoundState, _event: Any) -> None:
        self._release(flows, state)

    def _send(self, i: int, state: _RoundState) -> None:
        src, dst = state.src[i], state.dst[i]
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
            pieces = chains.pieces[c]
            nbytes = state.nbytes[i] if last == t else chains.chunk_bytes(c, t, last)
            cont = pieces[last + 1] if last + 1 < len(pieces) else -1
        else:
            nbytes = state.nbytes[i]
            cont = -1 if state.cont is None else state.cont[i]  # the flow continuing i's stream
        # a continuation waiting for more than i (its gate) is kept for only once i is
        # all it waits for (_RoundState.ended): else i's end may leave the stream idle
        keep = cont >= 0 and state.need[cont] == 1
        run: _ReplyChunk | None = None
        last = i
        if keep and state.reply_chunks is not None and state.lazy[cont]:  # type: ignore[index]
            pieces = state.ready_run(i)
            if len(pieces) > 1:  # i and the next replies, all ready: one flow
                run = _ReplyChunk(pieces, state.nbytes)
                last = pieces[-1]
                nbytes = run.cum[-1]
                cont = state.cont[last]  # type: ignore[index]
                keep = cont >= 0 and state.need[cont] == 1
        if stream is not None and stream.parked:
            flow = self.net.resume(stream, nbytes, keep)
            flow.tag = last  # the stream's flow carries piece i (to last) now
            if state.pred_end:  # back to back by construction: the note is not needed
                state.pred_end.pop(int(state.pred[i]), None)  # type: ignore[index]
        else:
            back = state.pred is not None and state.back_to_back(i, self.env.now)
            flow = self.net.send(src, dst, nbytes, last, latency=not back, keep=keep)
        if cont >= 0:
            state.open[cont] = flow
        if chains is not None and c >= 0:
            chains.flow[c] = flow
            flow.done.callbacks.append(partial(self._on_chunk, c, state))
        elif run is not None:
            run.flow = flow
            state.reply_chunks[id(run)] = run  # type: ignore[index]
            flow.done.callbacks.append(partial(self._on_replies, run, state))
        elif not (
            state.ends is not None
            and state.latch[i] >= 0
            and self.net.join_latch(flow, state.latch[i], *state.ends)
        ):
            flow.done.callbacks.append(partial(self._on_end, i, state))
        if state.timeout_s is not None:  # none on a chunk's pieces (Chains.build)
            limit = state.timeout_s[i]
            if limit < math.inf:
                timer = self.env.timeout(limit)
                timer.callbacks.append(partial(self._on_timeout, i, flow, flow.id, state))

    def _on_chunk(self, c: int, state: _RoundState, event: Any) -> None:
        """Stream c's chunk ended (its last piece went through, or it failed): count its
        family's pieces that ended meanwhile, then its own, move the family's frontier
        and release what may start."""
        chains = state.chains
        assert chains is not None
        ready: list[int] = []
        self._catch_up_family(c, state, chains, ready)
        pieces, flow, last = chains.pieces[c], chains.flow[c], chains.last[c]
        if event.ok:
            self._continued(c, chains.done[c], last, state, chains, ready)
            ready.extend(state.ended(pieces[last], True))
            chains.done[c] = last + 1
        else:
            if last + 1 < len(pieces):
                state.open.pop(pieces[last + 1], None)
            stop = chains.ended_by(c, flow.bytes_sent, failed=True)
            self._continued(c, chains.done[c], stop, state, chains, ready)
            ready.extend(state.ended(pieces[stop], False))  # the rest are broken
            chains.done[c] = len(pieces)
        chains.last[c], chains.flow[c] = -1, None
        if event.ok:
            state.mark_end(pieces[last], self.env.now)
        self._release(ready, state)

    def _on_replies(self, run: _ReplyChunk, state: _RoundState, event: Any) -> None:
        """A chunk of replies ended (its last piece went through, or it failed): count
        its pieces, as piece by piece would have, and release what may start."""
        ready: list[int] = []
        pieces, last = run.pieces, run.pieces[-1]
        cont = state.cont
        assert cont is not None
        if event.ok:
            self._count_replies(run, len(pieces) - 1, state, ready)
            state.mark_end(last, self.env.now)
            ready.extend(state.ended(last, True))
        else:
            state.open.pop(cont[last], None)
            stop = run.through(run.flow.bytes_sent, failed=True)
            self._count_replies(run, stop, state, ready)
            ready.extend(state.ended(pieces[stop], False))  # the rest are broken
        del state.reply_chunks[id(run)]  # type: ignore[union-attr]
        run.flow = None
        self._release(ready, state)
        if event.ok:
            self._close_unsent(cont[last], state)

    def _close_unsent(self, j: int, state: _RoundState) -> None:
        """After the piece before j ended and released what it could: if j was not sent
        (broken meanwhile), its parked stream leaves the network."""
        if j >= 0:
            stream = state.open.pop(j, None)
            if stream is not None:
                self.net.close_stream(stream)

    def _catch_up_replies(self, run: _ReplyChunk, state: _RoundState, ready: list[int]) -> None:
        """Count the pieces of a chunk of replies in flight that have ended by now."""
        flow = run.flow
        if flow is None or flow.phase is not BANDWIDTH or flow.parked:
            return  # its end, if any, is an event of this instant
        self._count_replies(run, run.through(self.net.moved(flow)), state, ready)

    def _count_replies(
        self, run: _ReplyChunk, stop: int, state: _RoundState, ready: list[int]
    ) -> None:
        """Pieces ``run.done`` .. stop − 1 of a chunk of replies ended, each followed by
        the next piece in the same flow: counted as sent, ended and delivered."""
        if stop > run.done:
            self._inside(run.pieces[run.done : stop], state, ready)
            run.done = stop

    def _catch_up_family(
        self, c: int, state: _RoundState, chains: Chains, ready: list[int]
    ) -> None:
        """Before stream c's pieces are counted at an event of its own: count the pieces
        the other streams of its family ended inside their chunks, unless the frontier
        gate waits for another chunk's end anyway (then it cannot open now, and the
        counting waits for the event that may open it)."""
        if chains.gated_elsewhere(c):
            return
        for other in chains.members[chains.family[c]]:
            if other != c:
                self._catch_up(other, state, chains, ready)

    def _catch_up(self, c: int, state: _RoundState, chains: Chains, ready: list[int]) -> None:
        """Count the pieces of stream c's chunk in flight that have ended by now."""
        flow = chains.flow[c]
        if flow is None or flow.phase is not BANDWIDTH or flow.parked:
            return  # no chunk moving (its end, if any, is an event of this instant)
        stop = chains.ended_by(c, self.net.moved(flow))
        if stop > chains.done[c]:
            self._continued(c, chains.done[c], stop, state, chains, ready)
            chains.done[c] = stop

    def _continued(
        self, c: int, start: int, stop: int, state: _RoundState, chains: Chains, ready: list[int]
    ) -> None:
        """Pieces start..stop-1 of stream c ended inside its chunk, each followed by the
        next piece in the same flow: counted as sent, ended and delivered."""
        if stop > start:
            self._inside(chains.pieces[c][start:stop], state, ready)

    def _inside(self, pieces: list[int], state: _RoundState, ready: list[int]) -> None:
        """``pieces`` of a stream ended inside a chunk, each followed by the next piece
        in the same flow: counted as sent, ended and delivered (what the next piece
        releases is the chunk's own business)."""
        cont = state.cont
        assert cont is not None
        for i in pieces:
            following = cont[i]
            ready.extend(j for j in state.ended(i, True) if j != following)
        self.messages += len(pieces)
        self.net.count_continued(len(pieces))

    def _cut(self, c: int, last: int, state: _RoundState, chains: Chains) -> None:
        """Cut stream c's chunk back to end at piece ``last``; a chunk whose bytes are all
        through already (its end is an event of this instant) is left whole."""
        pieces, old_last, flow = chains.pieces[c], chains.last[c], chains.flow[c]
        if flow.phase is not BANDWIDTH or flow.parked:
            return
        chains.last[c] = last
        if old_last + 1 < len(pieces):
            state.open.pop(pieces[old_last + 1], None)
        self.net.shorten(flow, chains.chunk_bytes(c, chains.first[c], last), keep=True)
        state.open[pieces[last + 1]] = flow

    def _on_refused(self, i: int, state: _RoundState, _event: Any) -> None:
        chains = state.chains
        if chains is not None and chains.chain_of[i] >= 0:  # a stream ends here, broken
            ready: list[int] = []
            self._catch_up_family(chains.chain_of[i], state, chains, ready)
            ready.extend(state.ended(i, False))
            self._release(ready, state)
            return
        self._release(state.ended(i, False), state)

    def _on_end(self, i: int, state: _RoundState, event: Any) -> None:
        cont = state.cont
        if not event.ok and cont is not None:
            state.open.pop(cont[i], None)
        elif state.gated_pred is not None:
            state.mark_end(i, self.env.now)
        self._release(state.ended(i, bool(event.ok)), state)
        if cont is not None:
            self._close_unsent(cont[i], state)

    def _on_loud(self, state: _RoundState, flow: Flow, event: Any) -> None:
        """A flow counted on a latch ended as an event (the last of its latch, or
        failed): :meth:`_on_end` of the round's flow ``flow.tag``."""
        self._on_end(flow.tag, state, event)

    def _on_quiet(self, state: _RoundState, flow: Flow) -> None:
        """The round's flow ``flow.tag`` completed quietly: others of its latch are in
        flight, so its end opens no gate, starts no flow and does not end the round
        (``_RoundState.take_latches``)."""
        if state.gated_pred is not None:
            state.mark_end(flow.tag, flow.end_s)
        if state.ended(flow.tag, True):
            raise RuntimeError(f"flow {flow.tag} ended quietly but released flows")

    def _on_timeout(self, i: int, flow: Any, key: int, state: _RoundState, _event: Any) -> None:
        if flow.id != key or flow.phase in ("done", "failed") or self.net.due(flow):
            # ended (a stream's flow carries a later piece under a new id), or ends at
            # this very instant: the last byte is in time, whichever event comes first
            return
        assert state.plan.timed_out is not None
        state.plan.timed_out[i] = True
        self.net.cancel(flow)


class _RoundState:
    """Book-keeping of one round's flows: what each still waits for, what has ended."""

    def __init__(
        self,
        plan: RoundPlan | GroupPlan,
        flows: Flows,
        done: simpy.Event,
        streams: bool = True,
        chunks: bool = False,
        keep_stream: Callable[[Flow], None] | None = None,
    ) -> None:
        n = flows.src.size
        self.plan, self.flows, self.left, self.done = plan, flows, n, done
        # Python scalars, read once per flow sent
        self.src, self.dst, self.nbytes = (
            flows.src.tolist(),
            flows.dst.tolist(),
            flows.nbytes.tolist(),
        )
        self.timeout_s = None if flows.timeout_s is None else flows.timeout_s.tolist()
        self.broken = [False] * n
        need = np.zeros(n, dtype=np.intp)
        self.opens = None if flows.opens is None else flows.opens.tolist()
        self.waits = np.full(n, -1, dtype=np.intp) if flows.waits is None else flows.waits
        self.after = np.full(n, -1, dtype=np.intp) if flows.after is None else flows.after
        self.gate_left: list[int] = []  # flows yet to end before each gate opens
        if flows.opens is not None and flows.waits is not None:
            n_gates = int(max(flows.opens.max(), flows.waits.max())) + 1
            gate_left = np.bincount(flows.opens[flows.opens >= 0], minlength=n_gates)
            self.gate_left = gate_left.tolist()
            self._behind = _Index(flows.waits, n_gates)
            waiting = flows.waits >= 0
            need[waiting] += gate_left[flows.waits[waiting]] > 0
        self._next = _Index(self.after, n)
        need += self.after >= 0
        self.previous = np.full(n, -1, dtype=np.intp) if flows.previous is None else flows.previous
        #: next_piece[i]: the flow whose ``previous`` is i (-1: none; at most one each)
        self.next_piece: np.ndarray | None = None
        if flows.previous is not None:
            self.next_piece = _single_follower(flows.previous, n)
        need += self.previous >= 0
        self.need = need.tolist()
        #: pred[i]: the piece before streamed flow i on its connection (-1: none; an
        #: array, read once per flow sent: no per-flow Python list to build)
        self.pred: np.ndarray | None = None
        #: gated_pred[i]: i is the predecessor of a gated streamed flow (None: no such
        #: flow); pred_end: when each of those completed
        self.gated_pred: np.ndarray | None = None
        self.pred_end: dict[int, float] = {}
        pred = np.full(n, -1, dtype=np.intp)
        if flows.streamed is not None:
            pred = np.where(flows.streamed, _predecessors(self.after, self.previous), -1)
            self.pred = pred
            gated_stream = (pred >= 0) & (self.waits >= 0)
            if gated_stream.any():
                self.gated_pred = np.zeros(n, dtype=bool)
                self.gated_pred[pred[gated_stream]] = True
        self._need0 = need == 0
        #: cont[i]: the flow continuing flow i's stream (-1: none); open: the network
        #: flow of each stream whose next piece ``j`` is due, by ``j``
        self.cont: list[int] | None = None
        self.open: dict[int, Any] = {}
        #: The streams run in chunks (None: each piece is an event).
        self.chains: Chains | None = None
        #: latch[i]: the latch flow i counts on in the network, -1: none
        #: (:meth:`take_latches`; set with ``ends``)
        self.latch: list[int] = []
        self._latches: tuple[int, int] | None = None
        #: what a flow on a latch calls when it ends quietly and otherwise
        #: (:meth:`take_latches`; None: no latches)
        self.ends: tuple[Callable[[Flow], None], Callable[[Flow, simpy.Event], None]] | None = None
        #: lazy[j]: continuation j waits for more than the piece before it (a gate): that
        #: piece is sent kept only once j waits for it alone, and ``keep_stream`` keeps
        #: it when that happens in flight (None: no such continuation)
        self.lazy: np.ndarray | None = None
        self.keep_stream = keep_stream
        #: chunks of replies in flight (:meth:`ready_run`; None: not chunked); which
        #: pieces may end inside one
        self.reply_chunks: dict[int, _ReplyChunk] | None = None
        self._inner = np.zeros(0, dtype=bool)
        if streams and flows.streamed is not None:
            cont = _continuations(flows, pred)
            if cont is not None:
                self.cont = cont.tolist()
                gated = (cont >= 0) & (self.waits[np.maximum(cont, 0)] >= 0)
                if gated.any() and keep_stream is not None:
                    self.lazy = np.zeros(n, dtype=bool)
                    self.lazy[cont[gated]] = True
                    if chunks:
                        self.reply_chunks = {}
                        # a piece whose end only starts its continuation: opens no gate,
                        # followed by no other flow (``after`` it)
                        opens = flows.opens if flows.opens is not None else np.full(n, -1)
                        self._inner = (opens < 0) & (np.bincount(
                            self.after[self.after >= 0], minlength=n
                        ) == 0)  # fmt: skip
                if chunks:  # chunks carry the streams that wait for no gate
                    ungated = np.where(gated, -1, cont).tolist()
                    self.chains = Chains.build(flows, ungated, self.gate_left)

    def take_latches(
        self,
        net: FlowNetwork,
        on_quiet: Callable[[Flow], None],
        on_loud: Callable[[Flow, simpy.Event], None],
    ) -> None:
        """Reserve the round's latches in ``net`` and say which flow counts on which
        (:attr:`latch`): a latch per gate and one for the round; ``on_quiet`` records a
        quiet end, ``on_loud`` any other end of a flow on a latch (the network flow's
        ``tag`` is the round's flow index). A flow whose end can
        release nothing while another flow of its latch is in flight counts on it:

        - a flow opening a gate, whose followers (``after`` it or the next piece on its
          connection) all wait for that gate:
          the gate stays shut while another of its flows is in flight;
        - a flow opening no gate and followed by none: the round goes on while another
          such flow is in flight.

        Streams' pieces and chunks never count (their ends move streams)."""
        n, flows = len(self.src), self.flows
        n_gates = len(self.gate_left)
        base = net.latches(n_gates + 1) if n > 0 else -1
        if base < 0:
            return
        opens = np.full(n, -1, dtype=np.intp) if flows.opens is None else flows.opens
        j = np.r_[np.flatnonzero(self.after >= 0), np.flatnonzero(self.previous >= 0)]
        i = np.r_[self.after[self.after >= 0], self.previous[self.previous >= 0]]
        followed = np.zeros(n, dtype=bool)
        followed[i] = True
        elsewhere = np.zeros(n, dtype=bool)  # a follower waits for another gate
        elsewhere[i[self.waits[j] != opens[i]]] = True
        latch = np.full(n, -1, dtype=np.int64)
        gated = (opens >= 0) & ~elsewhere
        latch[gated] = base + opens[gated]
        latch[(opens < 0) & ~followed] = base + n_gates
        if self.cont is not None:
            cont = np.asarray(self.cont)
            latch[cont >= 0] = -1
            if self.lazy is not None:
                # a piece whose continuation waits for its gate too, opening no gate and
                # followed by nothing else: counted until it is kept (FlowNetwork.keep_stream)
                only = np.bincount(i, minlength=n) == 1
                lazy = np.flatnonzero((cont >= 0) & (opens < 0) & only)
                lazy = lazy[self.lazy[cont[lazy]]]
                latch[lazy] = base + n_gates
        self.latch = latch.tolist()
        self._latches = (base, n_gates + 1)
        self.ends = (on_quiet, on_loud)

    def give_back_latches(self, net: FlowNetwork) -> None:
        """Free the latches of :meth:`take_latches` (every flow of the round has ended),
        and drop :attr:`ends`: its callbacks hold this state, a cycle that would keep the
        round's lists (~300 B per flow) alive until the garbage collector's next full
        pass, which the engine's raised thresholds make rare."""
        if self._latches is not None:
            net.free_latches(*self._latches)
            self._latches = None
        self.ends = None

    def mark_end(self, i: int, at_s: float) -> None:
        """Flow i completed at ``at_s``: noted if a gated streamed flow follows it."""
        if self.gated_pred is not None and self.gated_pred[i]:
            self.pred_end[i] = at_s

    def back_to_back(self, j: int, now: float) -> bool:
        """Whether flow j, starting now, follows the piece before it back to back (no
        route latency): a streamed flow that waits for no gate always does; one that
        waits for a gate when it starts at the instant that piece completed,
        whichever event came first at that instant."""
        assert self.pred is not None
        p = int(self.pred[j])
        if p < 0:
            return False
        return self.waits[j] < 0 or self.pred_end.pop(p, None) == now

    def ready_run(self, i: int) -> list[int]:
        """Flow i, about to be sent, and the continuations after it that wait for nothing
        but the piece before them (their gates open, their requests ended), have bytes
        and no timeout: sent back to back as one flow (a chunk of replies), as piece by
        piece each would start the instant the one before it ended."""
        run = [i]
        tl, cont, need, nbytes = self.timeout_s, self.cont, self.need, self.nbytes
        assert cont is not None
        assert self.lazy is not None
        inner = self._inner
        if not inner[i] or nbytes[i] <= 0.0 or (tl is not None and tl[i] < math.inf):
            return run
        j = cont[i]
        while (
            j >= 0
            and inner[run[-1]]
            and self.lazy[j]
            and need[j] == 1
            and not self.broken[j]
            and nbytes[j] > 0.0
            and (tl is None or tl[j] == math.inf)
        ):
            run.append(j)
            j = cont[j]
        return run

    def _keep_for(self, j: int) -> None:
        """Continuation j now waits only for the piece before it: if that piece is in
        flight unkept, keep its stream so that j follows it back to back."""
        flow = self.open.get(j)
        assert self.pred is not None
        assert self.keep_stream is not None
        if flow is not None and flow.tag == self.pred[j] and _in_flight(flow):
            self.keep_stream(flow)

    def roots(self) -> np.ndarray:
        """Flows that wait for nothing: they start with the round."""
        return np.flatnonzero((self.waits < 0) & (self.after < 0))

    def ready_at_start(self) -> list[int]:
        """Flows behind a gate that no flow opens (and after nothing): they start now."""
        return np.flatnonzero(self._need0 & (self.waits >= 0)).tolist()

    def ended(self, i: int, ok: bool) -> list[int]:
        """Count flow ``i`` as ended (``ok``: delivered); the flows that may start now."""
        assert self.plan.delivered is not None
        self.plan.delivered[i] = ok
        self.left -= 1
        if self.left == 0:
            self.done.succeed()
        ready: list[int] = []
        need, lazy = self.need, self.lazy
        if self.opens is not None and self.opens[i] >= 0:
            gate = self.opens[i]
            self.gate_left[gate] -= 1
            if self.gate_left[gate] == 0:
                if self.chains is not None:
                    self.chains.gate_opened(gate)
                for j in self._behind.of(gate):
                    need[j] -= 1
                    if need[j] == 0:
                        ready.append(j)
                    elif lazy is not None and need[j] == 1 and lazy[j]:
                        self._keep_for(j)
        for j in self._next.of(i):
            if not ok:
                self.broken[j] = True
            need[j] -= 1
            if need[j] == 0:
                ready.append(j)
            elif lazy is not None and need[j] == 1 and lazy[j]:
                self._keep_for(j)
        if self.next_piece is not None:
            j = int(self.next_piece[i])
            if j >= 0:
                if not ok:
                    self.broken[j] = True
                need[j] -= 1
                if need[j] == 0:
                    ready.append(j)
        return ready


class _ReplyChunk:
    """A chunk of replies in flight: its pieces, their cumulative bytes, how many are
    counted as ended, and its flow."""

    __slots__ = ("cum", "done", "flow", "pieces")

    def __init__(self, pieces: list[int], nbytes: list[float]) -> None:
        self.pieces = pieces
        total, cum = 0.0, []
        for i in pieces:
            total += nbytes[i]
            cum.append(total)
        self.cum = cum
        self.done = 0
        self.flow: Any = None

    def through(self, moved: float, failed: bool = False) -> int:
        """The first piece (from ``done``, before the last) whose bytes are not through
        once the chunk moved ``moved`` bytes; when it ``failed`` at that instant, a piece
        whose last byte arrives at that very instant fails with it."""
        return pieces_through(self.cum, 0.0, self.done, len(self.pieces) - 1, moved, failed)


def _single_follower(previous: np.ndarray, n: int) -> np.ndarray:
    """(n,) the flow j with ``previous[j] == i`` for each flow i, -1 for none; a flow is
    the previous piece of one flow at most (a connection is one sequence of pieces)."""
    j = np.flatnonzero(previous >= 0)
    i = previous[j]
    if np.unique(i).size != i.size:
        raise ValueError("Flows.previous: a flow is the previous piece of two flows")
    follower = np.full(n, -1, dtype=np.intp)
    follower[i] = j
    return follower


def _in_flight(flow: Flow) -> bool:
    return flow.phase is not DONE and flow.phase is not FAILED


def _predecessors(after: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """(n,) the piece before each flow on its connection: ``previous``, else ``after``."""
    return np.where(previous >= 0, previous, after)


def _continuations(flows: Flows, pred: np.ndarray) -> np.ndarray | None:
    """(n,) the flow that continues each flow's stream, -1 for none (None: no stream).

    Flow j continues flow i = ``pred[j]`` (the streamed piece before it) when it goes on
    the same connection (source and destination) and no other flow continues i that
    way: then i's place in the bandwidth phase can carry j's bytes if j starts the
    instant i completes (always, when j waits for no gate; otherwise i is sent kept
    only once j waits for it alone, :attr:`_RoundState.lazy`)."""
    assert flows.streamed is not None
    j = np.flatnonzero(pred >= 0)
    i = pred[j]
    same = (flows.src[j] == flows.src[i]) & (flows.dst[j] == flows.dst[i])
    j, i = j[same], i[same]
    if j.size == 0:
        return None
    single = np.bincount(i, minlength=pred.size)[i] == 1
    cont = np.full(pred.size, -1, dtype=np.intp)
    cont[i[single]] = j[single]
    return cont


class _Index:
    """The flows listing each key (a gate, a flow) in ``keys``, as lists (CSR)."""

    def __init__(self, keys: np.ndarray, n_keys: int) -> None:
        listed = np.flatnonzero(keys >= 0)
        order = listed[np.argsort(keys[listed], kind="stable")]
        bounds = np.searchsorted(keys[order], np.arange(n_keys + 1))
        self._order, self._bounds = order.tolist(), bounds.tolist()

    def of(self, key: int) -> list[int]:
        """Flows listing ``key``, in flow order."""
        return self._order[self._bounds[key] : self._bounds[key + 1]]


class TracedFlowNetwork(FlowNetwork):
    """A :class:`~sim.network.FlowNetwork` that records every flow from a followed peer
    as a slice ``flow → j`` (category ``flow``; args ``bytes`` moved, ``ok`` delivered)
    on the sender's track: rounds' and groups' flows, continuous-time exchanges and
    ``fetch`` downloads alike. Used only with a tracer (``avsim run --trace``); it only
    reads the flows and adds no SimPy event, so the run is the same."""

    def __init__(self, tracer: Tracer, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tracer = tracer
        self.traced: dict[int, Flow] = {}  # followed flows not yet recorded, by id
        tracer.on_close(self.close)

    def send(
        self,
        src: int,
        dst: int,
        nbytes: float,
        tag: Any = None,
        latency: bool = True,
        keep: bool = False,
    ) -> Flow:
        flow = super().send(src, dst, nbytes, tag, latency, keep)
        if self.tracer.follows(flow.src):
            self.traced[flow.id] = flow
            flow.done.callbacks.append(partial(self._ended, flow))
        return flow

    def _ended(self, flow: Flow, _event: Any) -> None:
        if self.traced.pop(flow.id, None) is not None:
            self._record(flow, flow.end_s, flow.bytes_sent, flow.phase == "done")

    def _record(self, flow: Flow, end_s: float, nbytes: float, ok: bool, **more: Any) -> None:
        args = {"bytes": nbytes, "ok": ok, **more}
        self.tracer.slice(flow.src, f"flow → {flow.dst}", "flow", flow.start_s, end_s, args)

    def close(self, end_s: float) -> None:
        """The run ended at ``end_s``: record the flows not recorded yet; those still in
        flight with the bytes they had moved (``args.in_flight``)."""
        for flow in sorted(self.traced.values(), key=lambda f: f.id):
            if flow.phase in ("done", "failed"):  # ended, its done event not processed
                self._record(flow, flow.end_s, flow.bytes_sent, flow.phase == "done")
                continue
            self._record(flow, end_s, self.moved(flow, end_s), False, in_flight=True)
        self.traced.clear()


class TracedClock(NetworkClock):
    """A :class:`NetworkClock` that also records each refused message (an end absent
    when it should start) as a slice ``flow → j`` with ``bytes`` 0 and ``refused``,
    over the route latency it takes to fail. Used only with a tracer."""

    #: piece by piece: the tracer records every piece's flow
    streams = False

    def __init__(self, tracer: Tracer, *args: Any) -> None:
        super().__init__(*args)
        self.tracer = tracer

    def _send(self, i: int, state: _RoundState) -> None:
        refused = self.failed_messages
        super()._send(i, state)
        if self.failed_messages > refused:
            src, dst = int(state.flows.src[i]), int(state.flows.dst[i])
            now = float(self.env.now)
            end_s = now + self.net.routes.route(src, dst)[0]
            args = {"bytes": 0.0, "ok": False, "refused": True}
            self.tracer.slice(src, f"flow → {dst}", "flow", now, end_s, args)
