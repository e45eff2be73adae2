"""``schedule: async`` for collectives (``ring_allreduce``): barrier rounds after the
local work.

A collective needs every present peer, so asynchronous peers meet at each attempt: an
attempt starts once every present peer has done its local work, i.e. after
max(``peers.compute``) over the peers present when the wait starts (a straggler's
``delay`` still holds back its first send, as in barrier rounds). A peer that returns
during the wait joins the attempt: its local work overlaps the wait (a simplification).
With a ``workload`` the local work is every present peer's ``local_steps`` gradient steps
of ``compute`` seconds each, as in barrier rounds (:meth:`~sim.engine.barrier.
BarrierEngine.local_steps`). Everything else is :class:`~sim.engine.barrier.BarrierEngine`'s.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from protocols.base import BarrierProtocol, Protocol
from sim.engine.barrier import BarrierEngine


class CollectiveEngine(BarrierEngine):
    """Barrier rounds of a collective, each after every present peer's local work."""

    schedules = frozenset({"async"})

    @classmethod
    def serves(cls, clock: str, protocol_type: type[Protocol]) -> bool:
        """The network clock and a collective barrier protocol."""
        if not issubclass(protocol_type, BarrierProtocol):
            return False
        return protocol_type.collective and super().serves(clock, protocol_type)

    def before_round(self) -> Generator[simpy.Event, Any, None]:
        """Wait for the slowest present peer's local work (with a workload: its steps)."""
        if self.gradients is not None:
            yield from self.local_steps()
            return
        present = self.clock.present
        compute_s = self.peers["compute"].to_numpy(dtype=float)
        if self.jitter.varies:  # this step's compute of each present peer, in peer order
            draw, peers = self.jitter.compute_s, np.flatnonzero(present).tolist()
            wait_s = max((draw(p, float(compute_s[p])) for p in peers), default=0.0)
        else:
            wait_s = float(compute_s[present].max()) if present.any() else 0.0
        if wait_s > 0:
            yield self.env.timeout(wait_s)
