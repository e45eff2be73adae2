"""push_sum: asynchronous push-sum on Poisson peer clocks (directed pushes).

Algorithm. A topology (:mod:`protocols.graphs`) is built once; a peer's out-neighbours
are its neighbours in it. Each peer holds x_i and a weight w_i (``state.extra["w"]``,
shape (N, 1), initially 1) and has a Poisson clock of rate ``rate``. When i's clock rings
it picks an out-neighbour j uniformly and pushes half of its pair:
(x_i, w_i) ← (x_i, w_i)/2, (x_j, w_j) += (x_i, w_i)/2. The estimate is x_i / w_i.

Lost pushes — the rule that keeps Σx and Σw exact: a share leaves the sender only when
it is delivered. If the target is absent the push is not delivered and the sender keeps
its whole (x_i, w_i) (on the rounds clock nothing is sent; on the network clock the
sender restores the share of a push whose flow fails). Absent peers do not push, and
peers without neighbours have nowhere to push; both rings are skipped and counted
(``counters``).

Rounds clock: one round is one unit of time; the round's rings are drawn at once
(:class:`protocols._edge_clocks.PoissonClocks`) and the pushes happen one after another
at their ring times, applied in waves of disjoint (sender, target) pairs — the
one-by-one result, bit for bit.

Network clock: continuous time (:func:`protocols._async_net.push_process`). The same
clocks ring in seconds (same ring times, senders and targets as the rounds clock for one
seed). A present sender with a present target and no push of its own in flight sends
h = (x_i, w_i)/2 as of the ring as one flow of S + itemsize bytes; on delivery
x_i −= h_x, w_i −= h_w, x_j += h_x, w_j += h_w (deltas of the snapshot, so Σx and Σw
stay exact however pushes overlap). A failed flow (either end preempted) delivers
nothing and the sender keeps everything (``counters["cancelled"]``). A ring while the
sender's previous push is in flight is skipped (``counters["skipped_busy"]``); that one
push in flight per sender keeps w_i > 0. Receiving never makes a peer busy.

Messages: each delivered push is 1 message of S + one coordinate (x_i/2 and w_i/2).

Compression (``compression``: fp16, uniform8, quantile8; both clocks): h_x is sent as one
quantized message (S = :func:`~sim.kernels.compression.wire_bytes` of ``dim``
coordinates, plus the weight, exact, itemsize bytes). The sender subtracts exactly the
h_x it sent, the target adds the dequantized Q(h_x); h_w travels exact. Σw is kept, Σx
moves by Q(h_x) − h_x per push (``mean_drift``).

``mean_drift`` measures Σx/Σw (:meth:`PushSum.conserved_mean`), what push-sum conserves;
the mean of the estimates x/w is not conserved and is not what it reports.

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| Σ_i x_i | preserved (round-off; halving is exact) | all; ``compression: none`` |
| Σ_i w_i | preserved (round-off; halving is exact), with any ``compression`` | all |
| w_i | stays > 0 | all |
| estimates x_i / w_i, when all are equal | stay equal (round-off) | all; ``compression: none`` |
| absent peers' x and w | unchanged, bit for bit | all |
| batched waves | equal to the one-by-one application, bit for bit (compressed: round-off) | all |
| Σ_i x_i with compression | moves by the wire's error (``mean_drift``) | all |

References: Kempe, Dobra, Gehrke, "Gossip-based computation of aggregate information",
FOCS 2003; Assran, Loizou, Ballas, Rabbat, "Stochastic Gradient Push for Distributed
Deep Learning", ICML 2019.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from typing import Any, Literal

import numpy as np
import simpy
from pydantic import Field

from protocols._async_net import push_process
from protocols._common import Compression, Rate, as_mask
from protocols._edge_clocks import PoissonClocks, waves
from protocols.base import ContinuousProtocol
from protocols.contract import Context, RoundStats, RowValues, RowWatcher, RunEnv, State
from protocols.footprint import Footprint, exchange_footprint, graph_size, wave_share
from protocols.graphs import TopologyGraph, TopologyParams, neighbour_table, topology_edges
from sim.core import units
from sim.core.backend import to_numpy
from sim.kernels import push_half
from sim.kernels._xp import namespace, take_rows
from sim.kernels.compression import IDENTITY, WireLike


class PushSumParams(TopologyParams):
    """Parameters of ``push_sum``: a topology and each peer's push ``rate``."""

    name: Literal["push_sum"] = "push_sum"
    rate: Rate = Field(
        default=1.0,
        gt=0,
        le=units.MAX_RATE,
        allow_inf_nan=False,
        description="pushes per peer per unit time (e.g. 3/min)",
    )
    compression: Compression = Field(default="none", description="wire compression")


def apply_pushes(
    x: Any,
    w: Any,
    senders: np.ndarray,
    targets: np.ndarray,
    wire: WireLike = IDENTITY,
    watcher: RowWatcher | None = None,
    times: np.ndarray | None = None,
) -> tuple[Any, Any]:
    """Pushes (s_k → t_k) one after another, batched in waves of disjoint pairs (h_x
    through ``wire``, h_w exact). ``watcher`` (with the pushes'
    ``times``) is shown each wave's estimates x/w before and after it."""
    for wave in waves(senders, targets):
        rows = before = None
        if watcher is not None and times is not None:
            rows = np.concatenate((senders[wave], targets[wave]))
            before = RowValues(estimate_rows(x, w, rows))  # pushes never keep Σ(x/w)
        x = push_half(x, senders[wave], targets[wave], wire)
        w = push_half(w, senders[wave], targets[wave])
        if watcher is not None and times is not None and rows is not None:
            after = RowValues(estimate_rows(x, w, rows))
            watcher.wave(rows, before, after, np.concatenate((times[wave], times[wave])))
    return x, w


def estimate_rows(x: Any, w: Any, rows: np.ndarray) -> np.ndarray:
    """x / w of peers ``rows``, divided in the state's dtype (as :meth:`PushSum.estimate`),
    as float64 host rows."""
    if type(x) is np.ndarray and type(w) is np.ndarray:
        return (x.take(rows, axis=0) / w.take(rows, axis=0)).astype(np.float64, copy=False)
    xp = namespace(x)
    return np.asarray(to_numpy(take_rows(xp, x, rows) / take_rows(xp, w, rows)), dtype=float)


class PushSum(TopologyGraph, ContinuousProtocol):
    """Asynchronous push-sum: each peer pushes half of (x, w) at its Poisson times."""

    Params = PushSumParams
    description = "asynchronous push-sum on Poisson peer clocks (Kempe et al.)"
    counter_names = (
        "rings", "pushes", "skipped_absent", "skipped_isolated", "skipped_busy", "completed",
        "cancelled",
    )  # fmt: skip
    invariants = frozenset(
        {"sum", "weight_sum", "positive_weights", "hull", "absent_unchanged", "atomic_exchanges"}
    )
    #: x and the estimate x / w the recorder reads; a wave of pushes adds the halves
    #: sent, the targets' rows and their sums; the wire adds the decoded halves.
    state_arrays = 2.0
    compressed_arrays = 1.5
    #: float64 (N, dim) arrays per unit of ``rate`` the exact-target tracker keeps for a
    #: round's replay on the rounds clock (measured ≈ 0 with the current tracker).
    replay_arrays = 0.5

    @classmethod
    def footprint(cls, params: Any, n_peers: int, dim: int, itemsize: int, clock: str) -> Footprint:
        """The graph and its neighbour table; ``rate`` pushes of one flow per peer and
        second, at most one in flight per sender, each holding the half it sent."""
        graph = graph_size(params, n_peers)
        base = super().footprint(params, n_peers, dim, itemsize, clock)
        arrays = base.state_arrays + 1.5 * wave_share(n_peers)
        base = replace(base, state_arrays=arrays, table_bytes=graph.table_bytes(n_peers))
        n = float(n_peers)
        return exchange_footprint(base, n_peers, params.rate, n, clock, 1.0, cls.replay_arrays)

    def __init__(self, params: PushSumParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        self.edges = topology_edges(params, ctx.n_peers, ctx.rng)
        neighbours, valid = neighbour_table(self.edges, ctx.n_peers)
        self.degree = valid.sum(axis=1)
        itself = np.arange(ctx.n_peers)[:, None]
        self.neighbours = neighbours if neighbours.shape[1] else itself  # no edge at all
        self.clocks = PoissonClocks(np.full(ctx.n_peers, params.rate))
        #: Bytes of one push: h_x (S, or less with ``compression``) and h_w (itemsize).
        self.push_bytes = self.wire.message_bytes(ctx.wire_coords, ctx.itemsize) + ctx.itemsize

    def init_state(self, state: State) -> None:
        """Add the weights w = 1 (``state.extra["w"]``, shape (N, 1), the dtype of x)."""
        state.extra["w"] = namespace(state.x).ones_like(state.x[:, :1])

    def estimate(self, state: State) -> Any:
        """Each peer's x / w."""
        return state.x / state.extra["w"]

    def estimate_rows(self, state: State, rows: np.ndarray) -> RowValues:
        """x / w of peers ``rows`` (float64 host rows, constant between pushes)."""
        return RowValues(estimate_rows(state.x, state.extra["w"], rows))

    def conserved_mean(self, state: State, rows: np.ndarray | None = None) -> Any:
        """Σx / Σw over ``rows`` (None: all): what push-sum conserves (the estimates'
        own mean is not conserved), (dim,) float64."""
        x, w = state.x, state.extra["w"]
        if rows is not None:
            xp = namespace(x)
            x, w = take_rows(xp, x, rows), take_rows(xp, w, rows)
        xp = namespace(x)
        total_x = xp.sum(xp.astype(x, xp.float64), axis=0)
        return to_numpy(total_x / xp.sum(xp.astype(w, xp.float64)))

    def _pushes(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This round's delivered pushes (senders, targets, offsets in [0, 1)), in ring
        order."""
        times, senders = self.clocks.ring(self.ctx.rng)
        slot = np.floor(self.ctx.rng.random(senders.size) * self.degree[senders])
        targets = self.neighbours[senders, slot.astype(np.intp)]
        isolated = self.degree[senders] == 0
        live = ~isolated & mask[senders] & mask[targets]
        self.counters["rings"] += int(senders.size)
        self.counters["skipped_isolated"] += int(np.count_nonzero(isolated))
        self.counters["skipped_absent"] += int(np.count_nonzero(~isolated & ~live))
        self.counters["pushes"] += int(np.count_nonzero(live))
        return senders[live], targets[live], times[live]

    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """One unit of time: the round's pushes at their ring times, in order."""
        senders, targets, times = self._pushes(as_mask(present, self.ctx.n_peers))
        state.x, state.extra["w"] = apply_pushes(
            state.x, state.extra["w"], senders, targets, self.wire,
            self.watcher, t + times,
        )  # fmt: skip
        pushes = senders.size
        return RoundStats(float(pushes * self.push_bytes), pushes)

    def network_process(self, run: RunEnv) -> Generator[simpy.Event, Any, None]:
        """SimPy process body of the network clock: pushes as flows, in continuous time."""
        return push_process(self, run)

    def sync(self, state: State, now: float) -> None:
        """Nothing: every push is applied on delivery, the state is always current."""
