"""The network clock and flow network used with a tracer (``avsim run --trace``): they
record flows and refused messages as trace slices, and change nothing in the run."""

from __future__ import annotations

from functools import partial
from typing import Any

from sim.engine.netclock.clock import NetworkClock
from sim.engine.netclock.round_state import RoundState
from sim.engine.trace import Tracer
from sim.network import Flow, FlowNetwork


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

    def _send(self, i: int, state: RoundState) -> None:
        refused = self.failed_messages
        super()._send(i, state)
        if self.failed_messages > refused:
            src, dst = int(state.flows.src[i]), int(state.flows.dst[i])
            now = float(self.env.now)
            end_s = now + self.net.routes.route(src, dst)[0]
            args = {"bytes": 0.0, "ok": False, "refused": True}
            self.tracer.slice(src, f"flow → {dst}", "flow", now, end_s, args)
