"""A barrier round's groups run alone (:func:`transmit`): each component of the round's
flows (:mod:`sim.engine.netclock.components`; a Moshpit or random_groups round: one per
group) that has at most :data:`MAX_MEMBERS` peers is timed in one call of the compiled
loop by the run's :class:`~sim.engine.netclock.alone_groups.AloneGroups`, as async
groups are; larger components (a ring all-reduce's) stay on the clock's events. The
round ends when every flow has ended, as on the events.

Within a round a peer is in one component, and without shared links (what
:meth:`AloneGroups.fits` requires) a component's flows use no link of another's, so
each one's times follow from its own flows, start and members' presence. The instants
are the network clock's to round-off (:mod:`sim.engine.netclock.alone`), the vectors
the same wherever the same flows are delivered (docs/design.md, stop 42).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from protocols.contract import Flows, RoundPlan
from sim.engine.netclock.alone_groups import AloneGroups
from sim.engine.netclock.components import split, subset

#: Components of more peers stay on the clock's events. Moshpit, 1024 peers, dim 2^14,
#: lognormal bandwidths, CPU a round: groups of 64 0.39–0.47 s alone against 2.73 s on
#: the events, of 128 2.0–2.2 s against 9.1 s (docs/design.md, stops 42 and 43); above
#: 128 members a group has more resources than the loop's fill keeps steps for
#: (:data:`~sim.engine.netclock._alone_fill.MAX_KEPT`), and each fill starts from scratch.
MAX_MEMBERS = 128


class RoundGroup:
    """One component of a round's flows, as :meth:`AloneGroups.run` takes a group: its
    peers, its flows (numbered from 0), and what the loop fills in."""

    __slots__ = ("_flows", "delivered", "members", "timed_out")

    def __init__(self, members: np.ndarray, flows: Flows) -> None:
        self.members, self._flows = members, flows
        self.delivered: np.ndarray | None = None
        self.timed_out: np.ndarray | None = None

    def flows(self) -> Flows:
        return self._flows


def transmit(
    env: simpy.Environment,
    alone: AloneGroups,
    plan: RoundPlan,
    on_events: Any,
    n_peers: int,
    idle_s: float,
) -> Generator[simpy.Event, Any, None]:
    """A SimPy process body: send ``plan``'s flows, its small components alone and the
    rest through ``on_events(plan, idle_s)`` (the clock's :meth:`run`); return when all
    have ended, with ``plan.delivered`` and ``plan.timed_out`` filled."""
    flows = plan.flows()
    parts = split(flows, n_peers)
    small = [(index, peers) for index, peers in parts if peers.size <= MAX_MEMBERS]
    if not small:
        yield from on_events(plan, idle_s)
        return
    sent: list[tuple[np.ndarray, Any]] = []  # each part's flows, and what sends them
    bodies = []
    for index, peers in small:
        group = RoundGroup(peers, subset(flows, index))
        sent.append((index, group))
        bodies.append(alone.run(group))
    if len(small) < len(parts):  # the large components, on the clock's events together
        left = np.sort(np.concatenate([i for i, peers in parts if peers.size > MAX_MEMBERS]))
        events = RoundPlan(plan.finish, lambda: subset(flows, left))
        sent.append((left, events))
        bodies.append(on_events(events, 0.0))
    yield env.all_of([env.process(body) for body in bodies])
    n = flows.src.size
    delivered, timed_out = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    for index, part in sent:
        assert part.delivered is not None
        assert part.timed_out is not None
        delivered[index] = part.delivered
        timed_out[index] = part.timed_out
    plan.delivered, plan.timed_out = delivered, timed_out


__all__ = ["MAX_MEMBERS", "RoundGroup", "transmit"]
