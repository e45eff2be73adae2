"""The ``network`` clock: barrier rounds whose messages are flows in the network model.

Each round the protocol plans its messages (:meth:`protocols.base.Protocol.network_round`)
from the peers present when the round starts. A sender starts its first flows after its
straggler ``delay``; a flow behind a gate starts when every flow opening that gate has
ended (:class:`protocols.base.NetRound`). A flow to or from a peer that is absent when
it should start fails after the route latency (a refused connection) and moves no
bytes; a flow in progress fails the instant either end is preempted. The round ends
when every flow has ended; peers preempted at any moment of the round count as lost and
take no part in its arithmetic.
A round with no flows waits ``IDLE_ROUND_S`` so that simulated time always advances.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import simpy

from protocols.base import NetRound
from sim.network import FlowNetwork

#: Seconds an empty round (nothing to send, e.g. every peer absent) lasts.
IDLE_ROUND_S = 1.0


class NetworkClock:
    """Sends a round's flows and reports when they have all ended.

    Parameters
    ----------
    env, net
        The run's environment and flow network.
    present
        (n_peers,) bool, shared with the churn callbacks (True = present now).
    delay_s
        (n_peers,) straggler delay of each peer before it starts a round, seconds.
    """

    def __init__(
        self, env: simpy.Environment, net: FlowNetwork, present: np.ndarray, delay_s: np.ndarray
    ) -> None:
        self.env, self.net, self.present, self.delay_s = env, net, present, delay_s
        self.lost = np.zeros(present.size, dtype=bool)
        self.messages = 0
        self.failed_messages = 0

    def preempt(self, peers: np.ndarray) -> None:
        """Churn callback: ``peers`` go down now; their flows fail, they are lost."""
        self.present[peers] = False
        self.lost[peers] = True
        for peer in peers.tolist():
            self.net.fail_peer(peer)

    def transmit(self, plan: NetRound) -> Any:
        """A SimPy process body: start the plan's flows, return when all have ended."""
        self.lost[:] = False
        n_flows = plan.src.size
        if n_flows == 0:
            yield self.env.timeout(IDLE_ROUND_S)
            return
        done = self.env.event()
        state = _RoundState(plan, n_flows, done)
        first = np.arange(n_flows) if plan.waits is None else np.flatnonzero(plan.waits < 0)
        self._start_delayed(first, state)
        for gate in state.open_at_start():
            self._start(state.behind(gate), state)
        yield done

    def _start_delayed(self, flows: np.ndarray, state: _RoundState) -> None:
        delays = self.delay_s[state.plan.src[flows]]
        for delay in np.unique(delays).tolist():
            batch = flows[delays == delay]
            if delay <= 0:
                self._start(batch, state)
            else:
                timer = self.env.timeout(delay)
                timer.callbacks.append(partial(self._start_batch, batch, state))

    def _start(self, flows: np.ndarray, state: _RoundState) -> None:
        plan = state.plan
        for i in flows.tolist():
            src, dst = int(plan.src[i]), int(plan.dst[i])
            self.messages += 1
            if self.present[src] and self.present[dst]:
                event = self.net.send(src, dst, float(plan.nbytes[i])).done
            else:
                self.failed_messages += 1
                event = self.env.timeout(self.net.routes.route(src, dst)[0])
            event.callbacks.append(partial(self._on_end, i, state))

    def _start_batch(self, flows: np.ndarray, state: _RoundState, _event: Any) -> None:
        self._start(flows, state)

    def _on_end(self, flow: int, state: _RoundState, _event: Any) -> None:
        self._ended(flow, state)

    def _ended(self, flow: int, state: _RoundState) -> None:
        gate = state.ended(flow)
        if gate is not None:
            self._start(state.behind(gate), state)


class _RoundState:
    """Book-keeping of one round's flows: how many are left, in the round and per gate."""

    def __init__(self, plan: NetRound, n_flows: int, done: simpy.Event) -> None:
        self.plan, self.left, self.done = plan, n_flows, done
        self.opens = plan.opens
        if plan.opens is not None and plan.waits is not None:
            n_gates = int(max(plan.opens.max(), plan.waits.max())) + 1
            self.gate_left = np.bincount(plan.opens[plan.opens >= 0], minlength=n_gates)
            waiting = np.flatnonzero(plan.waits >= 0)
            order = np.argsort(plan.waits[waiting], kind="stable")
            self._waiting = waiting[order]
            self._bounds = np.searchsorted(plan.waits[self._waiting], np.arange(n_gates + 1))

    def ended(self, flow: int) -> int | None:
        """Count a flow as ended; the gate that opens now, if any."""
        self.left -= 1
        if self.left == 0:
            self.done.succeed()
        if self.opens is None or self.opens[flow] < 0:
            return None
        gate = int(self.opens[flow])
        self.gate_left[gate] -= 1
        return gate if self.gate_left[gate] == 0 else None

    def open_at_start(self) -> list[int]:
        """Gates that no flow opens (their waiting flows start with the round)."""
        if self.opens is None:
            return []
        return np.flatnonzero(self.gate_left == 0).tolist()

    def behind(self, gate: int) -> np.ndarray:
        """Indices of the flows waiting for ``gate``."""
        return self._waiting[self._bounds[gate] : self._bounds[gate + 1]]
