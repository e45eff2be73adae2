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

from sim.engine.netclock.clock import NetworkClock, PresenceListener
from sim.engine.netclock.traced import TracedClock, TracedFlowNetwork

__all__ = ["NetworkClock", "PresenceListener", "TracedClock", "TracedFlowNetwork"]
