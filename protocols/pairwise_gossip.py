"""pairwise_gossip: randomized asynchronous gossip on Poisson edge clocks.

Algorithm. A topology (:mod:`protocols.graphs`) is built once. Every edge (i, j) has
a Poisson clock of rate λ_ij = rate·(1/deg(i) + 1/deg(j))/2, so on a regular graph each
peer takes part in ``rate`` exchanges per unit time. When a clock rings and both ends are
present, the two peers swap vectors and apply x_i ← x_i − (s_i − s_j)/2,
x_j ← x_j + (s_i − s_j)/2 with s the values sent; a ring with an absent end is skipped
and counted (``counters["skipped_absent"]``).

Rounds clock: one round is one unit of time; the round's rings are drawn at once
(:class:`protocols._edge_clocks.PoissonClocks`) and the exchanges happen at their ring
times, one after another and instantly (s = the current values: the pairwise mean). As
nothing is ever in flight, a peer is never busy: ``max_concurrent`` (default 1) never
binds here and ``counters["skipped_busy"]`` stays 0; it matters on the network clock.
The exchanges are applied in waves of disjoint pairs (:func:`apply_exchanges`), which
is exactly the one-by-one result.

Network clock: continuous time (:mod:`protocols._async_net`). The same clocks ring in
seconds; an exchange sends both vectors as two flows of S bytes and applies
x_i ← x_i − (s_i − s_j)/2, x_j ← x_j + (s_i − s_j)/2 with the snapshots s sent, once both
flows have completed; a failed flow cancels it for both ends (``counters["cancelled"]``).
A peer is in at most ``max_concurrent`` exchanges; a ring on a busy end is skipped
(``counters["skipped_busy"]``). Exchanges alone on their links are timed in closed form
and applied in waves (:mod:`protocols._solo_exchanges`), with the same result.

Messages: each exchange sends both vectors: 2 messages, 2·S bytes (S = dim × itemsize).

Compression (``compression``: fp16, uniform8, quantile8; both clocks): each vector sent
is one quantized message (S = :func:`~sim.kernels.compression.wire_bytes` of ``dim``
coordinates) and each end uses its own exact value and the other's dequantized one:
x_i ← x_i − (s_i − Q(s_j))/2, x_j ← x_j + (Q(s_i) − s_j)/2. The global sum then moves
by the wire's error (``mean_drift``).

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| global sum Σ_i x_i | preserved (round-off) | all; ``compression: none`` |
| var | never increases (each exchange is a doubly stochastic step) | all; ``compression: none`` |
| max − min per coordinate | never widens | all; ``compression: none`` |
| absent peers' vectors | unchanged, bit for bit | all |
| equal vectors | unchanged, bit for bit | all; ``compression: none`` |
| E[x(t)] from a fixed x(0) | exp(−Λt/2)·x(0), Λ = Σ λ_ij (e_i−e_j)(e_i−e_j)ᵀ | none |
| batched waves | equal to the one-by-one application | all |
| global sum with compression | moves by the wire's error (``mean_drift``) | all |

References: Boyd, Ghosh, Prabhakar, Shah, "Randomized gossip algorithms", IEEE Trans.
Inf. Theory 52(6), 2006.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Literal

import numpy as np
import simpy

from protocols._async_net import exchange_process
from protocols._edge_clocks import EdgeClockParams, EdgeClockProtocol, host_rows, waves
from protocols.contract import RoundStats, RowValues, RowWatcher, RunEnv, State
from sim.kernels.compression import IDENTITY, WireLike, as_wire
from sim.kernels.pairwise import exchange_differences, move_pairs


class PairwiseGossipParams(EdgeClockParams):
    """Parameters of ``pairwise_gossip``: a topology, ``rate`` and ``max_concurrent``."""

    name: Literal["pairwise_gossip"] = "pairwise_gossip"


def apply_exchanges(
    x: Any,
    i: np.ndarray,
    j: np.ndarray,
    wire: WireLike = IDENTITY,
    watcher: RowWatcher | None = None,
    times: np.ndarray | None = None,
) -> Any:
    """Pairwise averages of the pairs (i_k, j_k) one after another, batched in waves.

    Parameters
    ----------
    x
        (n_peers, dim) floating array; numpy arrays are updated in place.
    i, j
        (K,) host rows, i_k ≠ j_k, in the order the exchanges happen (pairs may share
        peers).
    wire
        How the vectors sent travel (each one message); default exact.
    watcher, times
        Told each wave's rows before and after it, with the exchanges' times ((K,)),
        when given (:class:`~protocols.contract.RowWatcher`).

    Returns
    -------
    (n_peers, dim) array: the result of the K exchanges in order.
    """
    wire = as_wire(wire)
    for wave in waves(i, j):
        a, b = i[wave], j[wave]
        if watcher is not None and times is not None:
            rows = np.concatenate((a, b))
            before = RowValues(host_rows(x, rows)) if watcher.needs_before else None
            x = _exchange_wave(x, a, b, wire)
            at = np.concatenate((times[wave], times[wave]))
            watcher.wave(rows, before, RowValues(host_rows(x, rows)), at)
            continue
        x = _exchange_wave(x, a, b, wire)
    return x


def _exchange_wave(x: Any, a: np.ndarray, b: np.ndarray, wire: WireLike) -> Any:
    """One wave of disjoint exchanges (a_k, b_k) (see :func:`apply_exchanges`): the
    network clock's snapshot and update, at one instant."""
    d_a, d_b = exchange_differences(x, a, b, wire)
    return move_pairs(x, a, b, d_a, d_b, 0.5)


class PairwiseGossip(EdgeClockProtocol):
    """Randomized gossip: pairwise averages on Poisson edge clocks."""

    Params = PairwiseGossipParams
    description = "asynchronous pairwise gossip on Poisson edge clocks (Boyd et al.)"
    invariants = frozenset({"sum", "hull", "absent_unchanged", "atomic_exchanges"})
    #: x; a wave adds both ends' rows, their difference and its half (``wave_arrays``);
    #: the wire adds the decoded rows and the codec's working copies.
    state_arrays = 1.0
    compressed_arrays = 2.0

    def invariants_in_force(
        self, clock: str = "rounds", rejoin: str = "keep", schedule: str = "barrier"
    ) -> frozenset[str]:
        """With ``max_concurrent`` > 1 on the network clock the hull is not kept: a peer
        in two exchanges at once applies differences snapshotted at their starts against
        values the other exchange has changed meanwhile, which can overshoot (the sum is
        still kept: each exchange adds opposite amounts at its ends)."""
        kept = super().invariants_in_force(clock, rejoin, schedule)
        if clock == "network" and self.params.max_concurrent > 1:
            kept -= {"hull"}
        return kept

    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """One unit of time: the round's exchanges at their ring times, in order."""
        times, i, j = self.ring_round(present)
        state.x = apply_exchanges(state.x, i, j, self.wire, self.watcher, t + times)
        return self.exchange_stats(i.size)

    def network_process(self, run: RunEnv) -> Generator[simpy.Event, Any, None]:
        """SimPy process body of the network clock: exchanges as flows, in continuous time."""
        return exchange_process(self, run)

    def sync(self, state: State, now: float) -> None:
        """Nothing: every exchange is applied at its instant, the state is always current."""
