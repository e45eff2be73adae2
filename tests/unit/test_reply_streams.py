"""A reducer's replies to one sender are a stream on one connection (``Flows.previous``).

The butterfly planner makes each reply the next piece after the reducer's previous reply
to the same sender. On the network clock a reply that is ready while the one before it
is still moving queues behind it on the same flow (no route latency, no flow of its
own); one whose gate opens after the connection went idle pays the route latency, and
the idle stream holds no share of the link meanwhile. A reply that fails breaks the
rest of its stream. The closed forms below hold piece by piece and with streams as one
flow (with and without chunks), on both network paths.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import simpy

from protocols._butterfly import ButterflySetup, ShareCache
from protocols._moshpit_net import Matched, plan_groups
from protocols.contract import Flows, RoundPlan
from sim.engine.netclock import NetworkClock
from sim.kernels.compression import IDENTITY
from sim.network import Flow, FlowNetwork, compiled

PATHS = ["general", "compiled"] if compiled.available() else ["general"]
#: (streams, chunks): piece by piece, one flow per stream, streams in chunks
MODES = [(False, False), (True, False), (True, True)]
L_REQ = L_REP = 0.04  # route latencies 0 → 1 and 1 → 0 (the sum of both ends')


class Ends(NetworkClock):
    """Records when each flow of the round ended (events and quiet ends alike; of a
    chunk of replies, its last piece: the pieces inside it end without an event, and
    are listed in ``inside``)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.ends: dict[int, float] = {}
        self.inside: set[int] = set()

    def _on_replies(self, run: Any, state: Any, flow: Any, ok: bool) -> None:
        if ok:
            self.ends[run.pieces[-1]] = float(self.env.now)
            self.inside.update(run.pieces[:-1])
        super()._on_replies(run, state, flow, ok)

    def _ended(self, i: int, state: Any, ok: bool) -> None:
        self.ends[i] = float(self.env.now)
        super()._ended(i, state, ok)

    def _on_quiet(self, state: Any, flow: Flow) -> None:
        self.ends[flow.tag] = float(flow.end_s)
        super()._on_quiet(state, flow)


class CountingEntries(FlowNetwork):
    """Counts the flows entering their bandwidth phase (a resumed piece does not)."""

    entered = 0

    def _enter(self, *flows: Flow) -> None:
        self.entered += len(flows)
        super()._enter(*flows)


def one_pair(
    reply_up: float, pieces: int, solver: str, streams: bool, chunks: bool,
    reply_timeout: float = math.inf, probe_at: float | None = None,
) -> tuple[Ends, RoundPlan, CountingEntries, list[bool]]:  # fmt: skip
    """Sender 0 streams ``pieces`` request pieces of 4 bytes to reducer 1 at 4 B/s, each
    opening its gate; reducer 1 replies each piece behind its gate at ``reply_up`` B/s,
    the replies a stream (each after its request and its previous reply). With
    ``probe_at``, whether a parked flow holds its place in the network then."""
    env = simpy.Environment()
    net = CountingEntries(
        env, np.array([4.0, reply_up]), np.array([100.0, 100.0]), np.array([0.01, 0.03]),
        solver=solver,
    )  # fmt: skip
    clock = Ends(env, net, np.ones(2, dtype=bool), np.zeros(2))
    clock.streams, clock.chunks = streams, chunks
    k = np.arange(pieces)
    prev = np.where(k > 0, k - 1, -1)
    flows = Flows(
        src=np.r_[np.zeros(pieces, int), np.ones(pieces, int)],
        dst=np.r_[np.ones(pieces, int), np.zeros(pieces, int)],
        nbytes=np.full(2 * pieces, 4.0),
        opens=np.r_[k, np.full(pieces, -1)],
        waits=np.r_[np.full(pieces, -1), k],
        after=np.r_[prev, k],
        timeout_s=np.r_[np.full(pieces, math.inf), np.full(pieces, reply_timeout)],
        streamed=np.r_[k > 0, k > 0],
        previous=np.r_[np.full(pieces, -1), np.where(k > 0, prev + pieces, -1)],
    )

    def finish(_state: Any, _lost: np.ndarray) -> Any:
        raise AssertionError("not called")

    plan = RoundPlan(finish=finish, flows=lambda: flows)
    env.process(clock.run(plan))
    parked: list[bool] = []
    if probe_at is not None:
        env.run(probe_at)
        parked.append(any(f.parked for f in net._core.flows()))
    env.run()
    return clock, plan, net, parked


@pytest.mark.parametrize("solver", PATHS)
@pytest.mark.parametrize(("streams", "chunks"), MODES)
def test_replies_ready_early_queue_behind_the_previous_one(solver, streams, chunks):
    """Reducer uplink 1 B/s, requests at 4 B/s: gate p opens at L + p + 1, long before
    reply p − 1 is through. Reply 0 pays its latency, the next ones follow back to back:
    one piece at a time at the full 1 B/s, ending 4 s apart (as separate flows they
    would share the link and end together at the last moment). In chunks, replies 1 and
    2 (both ready when reply 0 ends) are one flow, and only the last end is an event."""
    clock, plan, net, _ = one_pair(1.0, 3, solver, streams, chunks)
    first = L_REQ + 1.0 + L_REP + 4.0
    expected = dict(zip((3, 4, 5), (first, first + 4.0, first + 8.0), strict=True))
    assert clock.inside == ({4} if chunks else set())
    assert clock.ends.keys() | clock.inside >= expected.keys()
    for i, end in clock.ends.items():
        if i in expected:
            assert end == pytest.approx(expected[i], rel=1e-12), i
    assert plan.delivered is not None
    assert plan.delivered.all()
    if streams:  # one flow carries the requests, one the replies
        assert net.entered == 2
    if chunks:  # replies 1 and 2 in one flow: counted as two flows and two messages
        assert clock.messages == 6
    assert (net.flows_started, net.flows_completed) == (6, 6)


@pytest.mark.parametrize("solver", PATHS)
@pytest.mark.parametrize(("streams", "chunks"), MODES)
def test_a_reply_whose_gate_opens_after_an_idle_gap_pays_the_latency(solver, streams, chunks):
    """Reducer uplink 100 B/s (downlink 100): reply p is through 0.04 s after its start,
    long before gate p + 1 opens; so each reply starts at its gate with the route
    latency, and the idle stream holds no place in the network in between."""
    clock, _plan, net, parked = one_pair(100.0, 3, solver, streams, chunks, probe_at=1.5)
    gates = L_REQ + np.arange(1, 4)
    assert [clock.ends[i] for i in (3, 4, 5)] == pytest.approx(gates + L_REP + 0.04, rel=1e-12)
    assert parked == [False]
    if streams:  # the requests' flow, then each reply afresh
        assert net.entered == 4


@pytest.mark.parametrize("solver", PATHS)
@pytest.mark.parametrize(("streams", "chunks"), MODES)
def test_a_failed_reply_breaks_the_rest_of_its_stream(solver, streams, chunks):
    """Reply 0 times out (reducer timeout 3 s, it needs 4 s at 1 B/s): replies 1 and 2
    are not sent, although their requests were delivered."""
    clock, plan, net, _ = one_pair(1.0, 3, solver, streams, chunks, reply_timeout=3.0)
    assert plan.delivered is not None
    assert plan.timed_out is not None
    assert plan.delivered.tolist() == [True, True, True, False, False, False]
    assert plan.timed_out.tolist() == [False, False, False, True, False, False]
    assert net.flows_started == 4  # the broken replies never left
    assert clock.ends[3] == pytest.approx(L_REQ + 1.0 + 3.0, rel=1e-12)
    assert not {4, 5} & clock.ends.keys()  # broken with reply 0, never sent


def test_the_planner_chains_each_reducers_replies_to_each_sender():
    """Three members, parts of three pieces: every reply's ``previous`` is the reply of
    the piece before, from the same reducer to the same sender; the first piece's have
    none; requests have none; every reply after its own request and behind its gate."""
    n, dim = 3, 27
    shares = ShareCache(np.ones(n), np.ones(n, bool), dim, balance=False)
    setup = ButterflySetup(dim, 8, 8 * 3, IDENTITY)  # pieces of 3 coordinates
    (plan,), flows = plan_groups(Matched([np.arange(n)], np.zeros(1), 0.0), shares, setup)
    k = plan.n_requests
    assert flows.previous is not None
    assert flows.after is not None
    assert flows.streamed is not None
    assert flows.waits is not None
    assert flows.opens is not None
    assert (flows.previous[:k] == -1).all()
    replies = np.arange(k, 2 * k)
    assert (flows.after[replies] == replies - k).all()
    assert (flows.waits[replies] == flows.opens[replies - k]).all()
    chained = replies[flows.previous[replies] >= 0]
    before = flows.previous[chained]
    assert chained.size == k - n * (n - 1)  # all but each stream's first piece
    assert (flows.src[before] == flows.src[chained]).all()
    assert (flows.dst[before] == flows.dst[chained]).all()
    assert (plan.piece[before - k] == plan.piece[chained - k] - 1).all()
    assert flows.streamed[chained].all()
    assert not flows.streamed[replies[flows.previous[replies] < 0]].any()
