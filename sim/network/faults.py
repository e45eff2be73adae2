"""The network model's exceptions: a flow that failed, and an input the model cannot take."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.core.errors import AvsimError

if TYPE_CHECKING:
    from sim.network.flow import Flow


class NetworkError(AvsimError, ValueError):
    """An input of the network model is wrong (a capacity, a latency, a peer, a route).

    Parameters
    ----------
    where
        The parameter or call at fault, e.g. ``upload_bytes_per_s`` or ``send(src)``.
    got
        The value received.
    expected
        What would have been accepted, in words.
    """

    def __init__(self, where: str, got: object, expected: str) -> None:
        # the arguments are the args: SimPy re-raises copies made as type(e)(*e.args), so
        # an error raised inside a process keeps its type and message
        super().__init__(where, got, expected)
        self.where, self.got, self.expected = where, got, expected

    def __str__(self) -> str:
        text = repr(self.got)
        text = text if len(text) <= 80 else text[:77] + "..."
        return f"{self.where}: expected {self.expected}, got {text} ({type(self.got).__name__})"


class FlowFailed(AvsimError):
    """A flow failed: one of its ends was preempted while it was in flight, or it was
    cancelled (:meth:`FlowNetwork.cancel`, ``peer = -1``).

    Nothing was delivered; the bytes already sent stay counted in ``bytes_out``/``bytes_in``.

    Parameters
    ----------
    flow
        The flow that failed (``flow.bytes_sent`` holds what had been sent, in bytes).
    peer
        The preempted peer (the flow's source or destination); -1 when cancelled.
    time_s
        Simulated time of the failure, in seconds.
    """

    def __init__(self, flow: Flow, peer: int, time_s: float) -> None:
        # the arguments are the args: SimPy re-raises copies made as type(e)(*e.args)
        super().__init__(flow, peer, time_s)
        self.flow, self.peer, self.time_s = flow, peer, time_s

    def __str__(self) -> str:
        flow = self.flow
        if self.peer < 0:
            return (
                f"flow {flow.id} ({flow.src} -> {flow.dst}, {flow.nbytes:g} bytes) was "
                f"cancelled at t = {self.time_s:g} s"
            )
        return (
            f"flow {flow.id} ({flow.src} -> {flow.dst}, {flow.nbytes:g} bytes) failed at "
            f"t = {self.time_s:g} s: peer {self.peer} was preempted"
        )
