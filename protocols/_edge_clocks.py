"""Poisson clocks on edges (or peers) and the batching of their events into waves.

Independent Poisson clocks of rates λ_1 … λ_E, observed over a window of length T, are
drawn at once: the number of rings is Poisson(Λ_tot·T) with Λ_tot = Σ_e λ_e, the ring
times are sorted uniforms on [0, T), and each ring picks its clock with probability
λ_e / Λ_tot, independently. This is the superposition theorem read backwards, so the
draw has exactly the law of E independent clocks.

Events that touch disjoint peers commute. :func:`waves` groups a time-ordered list of
two-peer events into waves of pairwise disjoint events such that every peer meets its
events in time order, each after all events its partners had before: applying the waves
one after another, each as one fancy-indexed update, does the same arithmetic as
applying the events one by one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from protocols._common import Compression, Rate, as_mask, wire_of
from protocols.base import ContinuousProtocol
from protocols.contract import Context, RoundStats
from protocols.footprint import (
    EDGE_TABLE_BYTES,
    Footprint,
    exchange_footprint,
    graph_size,
    wave_share,
)
from protocols.graphs import TopologyGraph, TopologyParams, topology_edges
from sim.core import units
from sim.core.backend import to_numpy
from sim.kernels._xp import namespace, take_rows


class EdgeClockParams(TopologyParams):
    """LinkGraph plus the exchange rate shared by the edge-clock protocols."""

    name: Literal["pairwise_gossip", "a2cid2"]
    rate: Rate = Field(
        default=1.0,
        gt=0,
        le=units.MAX_RATE,
        allow_inf_nan=False,
        description="exchanges per peer per unit time (e.g. 3/min)",
    )
    max_concurrent: int = Field(
        default=1,
        ge=1,
        description="exchanges a peer takes part in at once (never binds on the rounds clock)",
    )
    compression: Compression = Field(default="none", description="wire compression")


def edge_rates(edges: np.ndarray, n_peers: int, rate: float) -> np.ndarray:
    """(E,) rates λ_ij = rate·(1/deg(i) + 1/deg(j))/2 of the edges' Poisson clocks.

    On a regular graph λ_ij = rate/deg, so every peer takes part in ``rate`` exchanges per
    unit time on average; in general peer i rings at Σ_j λ_ij.
    """
    degree = np.bincount(edges.reshape(-1), minlength=n_peers).astype(float)
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    return rate * (inverse[edges[:, 0]] + inverse[edges[:, 1]]) / 2


class PoissonClocks:
    """Independent Poisson clocks of given rates, drawn a window at a time.

    Parameters
    ----------
    rates
        (E,) non-negative rates, rings per unit time.
    """

    def __init__(self, rates: np.ndarray) -> None:
        self.rates = np.asarray(rates, dtype=float).reshape(-1)
        self.total_rate = float(self.rates.sum())
        uniform = self.rates.size > 0 and bool(np.all(self.rates == self.rates[0]))
        self._cumulative = None if uniform else np.cumsum(self.rates) / self.total_rate

    def ring(
        self, rng: np.random.Generator, duration: float = 1.0
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rings in [0, duration): (times sorted ascending, clock indices).

        Draws from ``rng`` in a fixed order: the count, the times, then the clocks.
        """
        if self.total_rate <= 0:
            return np.zeros(0), np.zeros(0, dtype=np.intp)
        count = int(rng.poisson(self.total_rate * duration))
        times = np.sort(rng.random(count))
        if duration != 1.0:  # (times · 1.0 is times)
            times *= duration
        if self._cumulative is None:
            return times, rng.integers(0, self.rates.size, count).astype(np.intp)
        picked = np.searchsorted(self._cumulative, rng.random(count), side="right")
        return times, np.minimum(picked, self.rates.size - 1).astype(np.intp)


def wave_levels(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The wave of each event of a time-ordered list of two-peer events (a_k, b_k).

    Returns
    -------
    (K,) int64 levels: event k's level is one more than the largest level among the
    previous events of a_k and of b_k (0 when it has none). Events of one level touch
    disjoint peers; every event comes after all the events it depends on.

    Notes
    -----
    The longest-path recurrence L = F(L) is solved by iterating L ← max(L, F(L)) from a
    lower bound (the rank of the event among each end's events): the iterates stay below
    the solution and grow until L ≥ F(L), which by induction over events means L is the
    solution. One vectorised pass per level of slack, a few numpy calls over K each.
    """
    previous, rank = previous_and_rank(a, b)
    k = a.size
    p1, p2 = previous[:k], previous[k:]
    level = np.maximum(rank[:k], rank[k:])
    while True:
        after = np.maximum(np.where(p1 >= 0, level[p1] + 1, 0), np.where(p2 >= 0, level[p2] + 1, 0))
        raised = np.maximum(after, level)
        if np.array_equal(raised, level):
            return level
        level = raised


def previous_and_rank(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each end (a then b): the previous event touching that peer (−1: none), and
    how many events touched that peer before."""
    k = a.size
    ends = np.concatenate((a, b)).astype(np.int64)
    event = np.concatenate((np.arange(k), np.arange(k)))
    order = np.argsort(ends * max(k, 1) + event)  # by peer, then by event
    peer, ev = ends[order], event[order]
    same = np.flatnonzero(peer[1:] == peer[:-1]) + 1
    previous = np.full(2 * k, -1, dtype=np.int64)
    previous[order[same]] = ev[same - 1]
    start = np.flatnonzero(np.r_[True, peer[1:] != peer[:-1]])
    rank = np.empty(2 * k, dtype=np.int64)
    rank[order] = np.arange(2 * k) - np.repeat(start, np.diff(np.r_[start, 2 * k]))
    return previous, rank


def host_rows(x: Any, rows: np.ndarray) -> np.ndarray:
    """Rows ``rows`` of a backend array as a float64 host array (a copy): what a
    :class:`~protocols.contract.RowWatcher` is shown."""
    if type(x) is np.ndarray:
        return x.take(rows, axis=0).astype(np.float64, copy=False)
    return np.asarray(to_numpy(take_rows(namespace(x), x, rows)), dtype=np.float64)


def waves(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """Indices of the events of each wave, wave by wave (see :func:`wave_levels`).

    Within a wave the events keep their time order; applying the waves in turn does, for
    every peer, the same operations in the same order as the events one by one.
    """
    if a.size == 0:
        return []
    level = wave_levels(a, b)
    order = np.argsort(level, kind="stable")
    bounds = np.cumsum(np.bincount(level))[:-1]
    return np.split(order, bounds)


class EdgeClockProtocol(TopologyGraph, ContinuousProtocol):
    """Base of the protocols whose exchanges ring on Poisson edge clocks.

    Builds the topology once, the (E, 2) edge table and the clocks, and draws each
    round's rings; ``counters`` accumulate rings, exchanges and skipped rings.
    """

    counter_names = (
        "rings", "exchanges", "skipped_absent", "skipped_busy", "completed", "cancelled",
    )  # fmt: skip
    #: Rows of the state an exchange in flight holds on the network clock (what was
    #: sent, taken at its start), without and with a compressing wire.
    snapshot_rows: ClassVar[tuple[float, float]] = (1.0, 2.0)
    #: (N, dim) arrays of the state's dtype per :func:`~protocols.footprint.wave_share`
    #: of rows a wave's kernel holds (the ends' rows, their difference and step).
    wave_arrays: ClassVar[float] = 2.0
    #: float64 (N, dim) arrays per unit of ``rate`` that the exact-target tracker keeps
    #: for a round's replay on the rounds clock (measured ≈ 0 for pairwise gossip and
    #: A²CiD² with the current tracker; kept as a margin).
    replay_arrays: ClassVar[float] = 0.5

    @classmethod
    def footprint(cls, params: Any, n_peers: int, dim: int, itemsize: int, clock: str) -> Footprint:
        """The graph and its (E, 2) edge table; ``rate``·N/2 exchanges of two flows per
        second, a peer in at most ``max_concurrent`` at once; with one, on the network
        clock, a closed-form segment's planned rings."""
        graph = graph_size(params, n_peers)
        base = super().footprint(params, n_peers, dim, itemsize, clock)
        tables = graph.table_bytes(n_peers, neighbour_table=False)
        arrays = base.state_arrays + cls.wave_arrays * wave_share(n_peers)
        tables += EDGE_TABLE_BYTES * graph.edges
        base = replace(base, state_arrays=arrays, table_bytes=tables)
        rows = cls.snapshot_rows[not wire_of(params).exact]
        in_flight = float(n_peers * params.max_concurrent)
        base = exchange_footprint(
            base, n_peers, params.rate, in_flight, clock, rows / 2, cls.replay_arrays
        )
        if clock != "network" or params.max_concurrent != 1:
            return base
        from protocols._solo_exchanges.settings import segment_rings  # (a cycle at the top)

        return replace(base, planned_rings=float(segment_rings(n_peers)))

    def __init__(self, params: EdgeClockParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        self.edges = topology_edges(params, ctx.n_peers, ctx.rng)
        #: The edges' two ends, each a contiguous (E,) array (gathered every round).
        self.ends = (self.edges[:, 0].copy(), self.edges[:, 1].copy())
        self.rates = edge_rates(self.edges, ctx.n_peers, params.rate)
        self.clocks = PoissonClocks(self.rates)
        #: Bytes of one vector sent (S, or less with ``compression``).
        self.wire_vector_bytes = self.wire.message_bytes(ctx.wire_coords, ctx.itemsize)

    @property
    def events_keep_sum(self) -> bool:
        """An exchange on an exact wire keeps its two rows' sum (see the base class)."""
        return self.wire.exact

    def ring_round(self, present: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This round's exchanges between present peers: (offsets in [0, 1), i, j).

        Rings with an absent end are skipped and counted. Exchanges are instant on the
        rounds clock, so no ring ever finds a peer busy and ``max_concurrent`` never binds.
        """
        mask = as_mask(present, self.ctx.n_peers)
        times, edge = self.clocks.ring(self.ctx.rng)
        i, j = self.ends[0][edge], self.ends[1][edge]
        self.counters["rings"] += int(edge.size)
        if np.count_nonzero(mask) == mask.size:  # everyone present: every ring exchanges
            self.counters["exchanges"] += int(edge.size)
            return times, i, j
        live = mask[i] & mask[j]
        self.counters["skipped_absent"] += int(edge.size - np.count_nonzero(live))
        self.counters["exchanges"] += int(np.count_nonzero(live))
        return times[live], i[live], j[live]

    def exchange_stats(self, exchanges: int) -> RoundStats:
        """Traffic of ``exchanges`` exchanges: both vectors travel (2 messages, 2·S bytes;
        S the compressed message's bytes with ``compression``)."""
        return RoundStats(float(2 * exchanges * self.wire_vector_bytes), 2 * exchanges)
