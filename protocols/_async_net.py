"""Continuous-time protocols on the ``network`` clock: Poisson rings, every vector a flow.

The clocks ring as on the rounds clock — :class:`~protocols._edge_clocks.PoissonClocks`
draws one unit of time at a time (superposition: Poisson(Σλ) rings, uniform times, clock
∝ λ) — so for one seed the ring times and clocks are exactly the rounds clock's
(:func:`ring_loop`, shared by both kinds of process below).

Edge exchanges (:func:`exchange_process`: ``pairwise_gossip``, ``a2cid2``). At a ring on
edge (i, j):

- an end that is absent → the ring is skipped (``counters["skipped_absent"]``);
- an end already in ``max_concurrent`` exchanges → skipped (``counters["skipped_busy"]``);
- otherwise the exchange starts (``counters["exchanges"]``): the protocol's ``snapshot``
  takes what is sent from the rows **now** (pairwise gossip: m = (s_i − s_j)/2), and two
  flows of S bytes go i → j and j → i. When both have completed, the protocol's
  ``apply`` moves the pair by deltas computed from the snapshot (pairwise gossip:
  x_i ← x_i − m, x_j ← x_j + m; ``counters["completed"]``): the pair's sum changes by
  −m + m, so the global sum is preserved to round-off however exchanges overlap. If a
  flow fails (an end was preempted), the exchange is cancelled for both ends, nothing is
  applied and both ends are free again at that instant (``counters["cancelled"]``).

Pushes (:func:`push_process`: ``push_sum``). At a ring of peer i's clock a target j is
drawn uniformly among i's out-neighbours (drawn right after the window's rings, as on
the rounds clock). A ring of an isolated peer (``skipped_isolated``), with an absent end
(``skipped_absent``) or while i's previous push is still in flight (``skipped_busy``) is
skipped; otherwise (``pushes``) i sends h = (x_i, w_i)/2 **as of now** to j as one flow
of S + itemsize bytes. On delivery (``completed``) x_i −= h_x, w_i −= h_w,
x_j += h_x, w_j += h_w: the share leaves the sender only when it arrives, so Σx and Σw
are preserved to round-off. A failed flow (either end preempted) delivers nothing and
the sender keeps everything (``cancelled``). One push in flight per sender keeps w_i > 0:
between send and delivery w_i only grows (receipts), so after delivery
w_i ≥ w_i(send)/2 > 0; a receiver is never busy.

Compression (``protocol.wire``, from ``params.compression``): every vector sent is one
message of the wire's bytes (a push adds its exact weight, itemsize bytes). The snapshot
(:func:`~sim.kernels.pairwise.exchange_differences`) also takes what the other end will
decode, and each end applies its own exact value against the other's decoded one —
pairwise gossip: x_i −= (s_i − Q(s_j))/2, x_j += (Q(s_i) − s_j)/2; a push:
x_i −= h_x, x_j += Q(h_x) (w exact). Σx then moves by the wire's error; on the exact
wire Q is the identity.

Deltas and rejoins: an exchange or push is applied by its flows' ``done`` callbacks, a
later event of the delivery's instant, with deltas of its snapshot; so the rows it
changes must still be the rows the snapshot was taken from (plus what they received
since). A preemption at that instant comes before or after those callbacks (a delivered
exchange is applied to an absent end); a rejoin that rewrites rows (``reset``,
``fetch``) comes at a later instant, after them, since a churn schedule never brings a
peer back within the instant it went down (steps in strictly increasing time, ``down``
and ``up`` disjoint). A ``reset`` squeezed between a delivery and its callbacks would
have the old incarnation's share subtracted from (or added to) the fresh row.

Closed-form fast path (:mod:`protocols._solo_exchanges`): with ``max_concurrent: 1``
and no shared links the two flows of an exchange are alone on their links unless
another kind of flow (a ``fetch`` download) reaches them, and their completion is
start + route latency + S / rate. :func:`exchange_process` then runs
:class:`~protocols._solo_exchanges.SoloExchanges`: the rings up to the next event that
could change anything are planned at once, their arithmetic applied in waves
(``batch``), and only exchanges that cross such an event, or that may share a link,
are sent as flows — same ring times, same completions, same bytes, bit for bit. With
the exact-target tracker watching, a segment's exchanges are shown to it in time order
once applied (``take``); from the first one it must see one at a time (a crossing, a
resync, a NaN) on, they are undone and go out as flows.

The straggler ``delay`` of peers does not apply here (it is a per-round start delay).

Observation: when the protocol has a ``watcher`` (the engine's exact-target tracker,
:class:`protocols.contract.RowWatcher`), every applied exchange or delivered push is told to
it (``before``/``after`` around the change of its two rows), at its simulated time.
What the processes get from the run is a :class:`protocols.contract.RunEnv`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np
import simpy

from protocols._solo_exchanges import Batch, Exchange, SoloExchanges
from protocols._solo_exchanges import settings as solo_settings
from protocols.contract import RunEnv, State
from sim.kernels.compression import IDENTITY, Wire, WireLike, as_wire
from sim.kernels.pairwise import average_waves, compiled_average, exchange_differences, move_pairs

#: Simulated time drawn from the clocks at once (the rounds clock's round).
WINDOW = 1.0

#: ``snapshot(i, j)``: what an exchange sends, taken at its start.
Snapshot = Callable[[int, int], Any]
#: ``apply(i, j, sent, now=None)``: applies a completed exchange from its snapshot, at
#: ``now`` (default: the environment's now; a segment applies adopted exchanges ahead).
Apply = Callable[..., None]


def ring_loop(
    env: simpy.Environment,
    clocks: Any,
    rng: np.random.Generator,
    plan: Callable[[np.ndarray], Sequence[Any]],
    on_ring: Callable[[Any], None],
) -> Generator[simpy.Event, Any, None]:
    """Ring ``clocks`` (a :class:`~protocols._edge_clocks.PoissonClocks`) forever from
    ``env.now``, one :data:`WINDOW` per draw; ``plan(picked)`` turns a window's rung
    clocks into one item per ring (it may draw more from ``rng``, after the rings), and
    ``on_ring(item)`` runs at each ring's time, in order."""
    timeout = env.timeout
    start = float(env.now)
    window = 0
    while True:
        times, picked = clocks.ring(rng, WINDOW)
        base = start + window * WINDOW
        window += 1
        if times.size:
            for at, item in zip((times + base).tolist(), plan(picked), strict=True):
                yield timeout(max(at - env.now, 0.0))
                on_ring(item)
        yield timeout(max(base + WINDOW - env.now, 0.0))


def pairwise_rules(state: State, wire: WireLike = IDENTITY) -> tuple[Snapshot, Apply]:
    """Pairwise gossip's exchange through ``wire``: the snapshot is (d_i, d_j) =
    (s_i − Q(s_j), Q(s_i) − s_j) (:func:`~sim.kernels.pairwise.exchange_differences`;
    one s_i − s_j on an exact wire), the update x_i −= d_i/2, x_j += d_j/2 (at any
    time: ``now`` is not needed)."""
    wire = as_wire(wire)

    def snapshot(i: int, j: int) -> Any:
        return exchange_differences(state.x, i, j, wire)

    def apply(i: int, j: int, d: Any, now: float | None = None) -> None:
        state.x = move_pairs(state.x, i, j, d[0], d[1], 0.5)

    return snapshot, apply


def pairwise_batch(state: State, wire: WireLike = IDENTITY, compiled: bool = False) -> Batch:
    """Pairwise gossip's :data:`~protocols._solo_exchanges.Batch`: an exchange alone on
    its rows from snapshot to update is a whole pairwise average, so a batch is
    :func:`~sim.kernels.pairwise.average_waves` (each wave one
    :func:`~sim.kernels.pairwise.exchange_differences` and one
    :func:`~sim.kernels.pairwise.move_pairs`), with ``compiled`` its numba loop on an
    exact wire where numba imports (the same bits)."""
    wire = as_wire(wire)
    kernel = compiled_average() if compiled and wire.exact else None

    def batch(
        a: np.ndarray, b: np.ndarray, start: np.ndarray, end: np.ndarray, waves: list[np.ndarray]
    ) -> None:
        state.x = average_waves(state.x, a, b, waves, kernel, wire)

    return batch


def watched(watcher: Any, apply: Apply) -> Apply:
    """``apply`` with ``watcher.before``/``after`` around the change of rows i and j."""

    def apply_watched(i: int, j: int, sent: Any, now: float | None = None) -> None:
        rows = np.array([i, j])
        watcher.before(rows)
        apply(i, j, sent, now)
        watcher.after(rows)

    return apply_watched


def exchange_process(
    protocol: Any,
    run: RunEnv,
    rules: tuple[Snapshot, Apply] | None = None,
    batch: Batch | None = None,
) -> Generator[simpy.Event, Any, None]:
    """SimPy process body: ring the edge clocks of ``protocol`` forever, in simulated
    seconds, starting exchanges over ``run.net`` (see the module docstring).

    ``protocol`` is an :class:`~protocols._edge_clocks.EdgeClockProtocol` (``edges``,
    ``clocks``, ``counters``, ``params.max_concurrent``, ``wire``, ``ctx``); ``rules``
    its (snapshot, apply) pair, default :func:`pairwise_rules`; ``batch`` its
    arithmetic of exchanges alone on their rows (default with the default rules:
    :func:`pairwise_batch`), which lets :class:`~protocols._solo_exchanges.SoloExchanges`
    time exchanges alone on their links in closed form (None: every exchange as flows).
    """
    present, counters, ctx = run.present, protocol.counters, protocol.ctx
    for key in ("completed", "cancelled"):
        counters.setdefault(key, 0)
    if rules is None:
        rules = pairwise_rules(run.state, protocol.wire)
        if batch is None:
            compiled = solo_settings.runs_compiled(ctx.n_peers, run.net)
            batch = pairwise_batch(run.state, protocol.wire, compiled)
    snapshot, raw = rules
    apply = raw if protocol.watcher is None else watched(protocol.watcher, raw)
    ends = list(zip(protocol.edges[:, 0].tolist(), protocol.edges[:, 1].tolist(), strict=True))
    cap = int(protocol.params.max_concurrent)
    nbytes = float(protocol.wire.message_bytes(ctx.wire_coords, ctx.itemsize))
    solo = SoloExchanges.build(protocol, run, (snapshot, raw), batch, nbytes, WINDOW, apply)
    if solo is not None:
        return solo.process()
    busy = [0] * ctx.n_peers
    send, env = run.net.send, run.env

    def plan(picked: np.ndarray) -> list[tuple[int, int]]:
        return [ends[edge] for edge in picked.tolist()]

    def on_ring(pair: tuple[int, int]) -> None:
        i, j = pair
        counters["rings"] += 1
        if not (present[i] and present[j]):
            counters["skipped_absent"] += 1
            return
        if busy[i] >= cap or busy[j] >= cap:
            counters["skipped_busy"] += 1
            return
        counters["exchanges"] += 1
        busy[i] += 1
        busy[j] += 1
        exchange = Exchange(i, j, snapshot(i, j), apply, busy, counters)
        exchange.start_s = float(env.now)
        send(i, j, nbytes).done.callbacks.append(exchange.on_end)
        send(j, i, nbytes).done.callbacks.append(exchange.on_end)

    return ring_loop(run.env, protocol.clocks, ctx.rng, plan, on_ring)


class _Push:
    """One push in flight: sender, target, the half (h_x, h_w) sent and the h_x decoded."""

    __slots__ = (
        "arrived_x", "busy", "counters", "half_w", "half_x", "i", "j", "state", "watcher",
    )  # fmt: skip

    def __init__(
        self,
        i: int,
        j: int,
        state: State,
        busy: list[bool],
        counters: dict,
        wire: Wire = IDENTITY,
        watcher: Any = None,
    ) -> None:
        self.i, self.j, self.state, self.busy, self.counters = i, j, state, busy, counters
        self.watcher = watcher
        self.half_x = state.x[i, ...] * 0.5
        self.half_w = state.extra["w"][i, ...] * 0.5
        self.arrived_x = wire.receive(self.half_x)  # ``half_x`` itself on an exact wire

    def on_end(self, event: simpy.Event) -> None:
        """Callback of the flow's ``done``: deliver the half, or keep everything."""
        if event.ok:
            state, watcher = self.state, self.watcher
            rows = None if watcher is None else np.array([self.i, self.j])
            if watcher is not None:
                watcher.before(rows)
            state.x = move_pairs(state.x, self.i, self.j, self.half_x, self.arrived_x)
            state.extra["w"] = move_pairs(
                state.extra["w"], self.i, self.j, self.half_w, self.half_w
            )
            if watcher is not None:
                watcher.after(rows)
            self.counters["completed"] += 1
        else:
            self.counters["cancelled"] += 1
        self.busy[self.i] = False


def push_process(protocol: Any, run: RunEnv) -> Generator[simpy.Event, Any, None]:
    """SimPy process body: ring the peer clocks of ``protocol`` (``push_sum``) forever,
    pushing half of (x_i, w_i) over ``run.net`` (see the module docstring).

    ``protocol`` has ``clocks`` (one per peer), ``degree``, ``neighbours``, ``counters``,
    ``wire`` and ``ctx``.
    """
    present, counters, ctx, state = run.present, protocol.counters, protocol.ctx, run.state
    for key in ("skipped_busy", "completed", "cancelled"):
        counters.setdefault(key, 0)
    degree, neighbours = protocol.degree, protocol.neighbours
    wire = protocol.wire
    nbytes = float(wire.message_bytes(ctx.wire_coords, ctx.itemsize) + ctx.itemsize)
    busy = [False] * ctx.n_peers
    send, rng = run.net.send, ctx.rng

    def plan(senders: np.ndarray) -> list[tuple[int, int, bool]]:
        slot = np.floor(rng.random(senders.size) * degree[senders]).astype(np.intp)
        targets = neighbours[senders, slot]
        isolated = degree[senders] == 0
        return list(zip(senders.tolist(), targets.tolist(), isolated.tolist(), strict=True))

    def on_ring(push: tuple[int, int, bool]) -> None:
        i, j, isolated = push
        counters["rings"] += 1
        if isolated:
            counters["skipped_isolated"] += 1
            return
        if not (present[i] and present[j]):
            counters["skipped_absent"] += 1
            return
        if busy[i]:
            counters["skipped_busy"] += 1
            return
        counters["pushes"] += 1
        busy[i] = True
        pending = _Push(i, j, state, busy, counters, wire, protocol.watcher)
        send(i, j, nbytes).done.callbacks.append(pending.on_end)

    return ring_loop(run.env, protocol.clocks, rng, plan, on_ring)
