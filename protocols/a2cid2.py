"""a2cid2: A²CiD² — pairwise gossip with a continuous local momentum.

Algorithm. Each peer holds x_i and a companion x̃_i (``state.extra["x_tilde"]``,
x̃(0) = x(0)). Edges ring as in :mod:`protocols.pairwise_gossip` (Poisson clocks of rate
λ_ij = rate·(1/deg(i) + 1/deg(j))/2). Between events every peer mixes continuously,
d/dt (x, x̃) = η·(x̃ − x, x − x̃), applied lazily in closed form: before an event touches
a peer, (x_i, x̃_i) is brought forward from its last update with
c = (1 − e^(−2ηΔ))/2, x ← x + c(x̃ − x), x̃ ← x̃ − c(x̃ − x). An exchange on a ringing
edge whose ends are both present then applies, with m = x_i − x_j (values at the event
time): x_i −= m/2, x̃_i −= α̃·m, x_j += m/2, x̃_j += α̃·m. Absent peers skip exchanges
but keep mixing (the ODE is local computation, not communication). At the end of each
round every peer is brought to the round's end, so ``state.x`` is current when measured.

Parameters (:func:`graph_constants`, :func:`default_eta_alpha`): with the rate-weighted
Laplacian Λ = Σ_edges λ_ij (e_i − e_j)(e_i − e_j)ᵀ, χ₁ = 1/λ₂(Λ), χ₂ = ½·max over edges
of (e_i − e_j)ᵀ Λ⁺ (e_i − e_j); η = 1/(2√(χ₁χ₂)) and α̃ = ½√(χ₁/χ₂). ``eta`` and
``alpha_tilde`` override them (η = 0, α̃ = ½ is plain pairwise gossip). On a
disconnected graph χ₁ is that of the slowest component (each mixes on its own).

Rounds clock: one round is one unit of time; the round's exchanges happen at their
Poisson times, applied in waves of disjoint pairs, each end brought forward to its own
exchange's time (:func:`apply_events`, the one-by-one result).

Network clock: continuous time (:func:`protocols._async_net.exchange_process`). Edges
ring as in pairwise_gossip, in seconds; an exchange "also costs its transfer time, and
values are those sent at its start": at the ring both ends are brought forward to now
and x_i, x_j are snapshotted (m = s_i − s_j), then two flows of S bytes go i → j and
j → i. When both have completed, both ends' (x, x̃) are brought forward to the
completion time and the exchange is applied with the snapshot's m: x_i −= m/2,
x̃_i −= α̃·m, x_j += m/2, x̃_j += α̃·m. A failed flow cancels it for both ends; a peer is
in at most ``max_concurrent`` exchanges; exchanges alone on their links are timed in
closed form and applied in waves (:mod:`protocols._solo_exchanges`, the same
arithmetic). :meth:`A2cid2.sync` brings every peer to the
sampling time before the engine measures. Σx is kept at every sync: each completed
exchange adds opposite amounts to x_i − x̃_i and x_j − x̃_j at one instant, which then
decay alike. A rejoin ``fetch`` first brings both ends to now (:meth:`A2cid2.sync_rows`),
so the copy is the source's (x, x̃) as of now, whenever it was last brought forward
(``reset`` and ``keep`` are exact).

Exact time-to-target: between events x_i(t) = a_i − e^(−2η(t − τ_i))·d_i with
a = (x + x̃)/2, d = (x̃ − x)/2 at the peer's last update τ_i (:meth:`estimate_rows`), so
the variance between events is a quadratic in e^(−2ηt) and its first crossing of a
threshold is found in closed form (:mod:`sim.engine.observe.decaying`): exact up to round-off
of this closed form, which the lazily mixed state follows to round-off.

Messages: each exchange sends both x vectors (x̃ stays local): 2 messages, 2·S bytes.

Compression (``compression``: fp16, uniform8, quantile8; both clocks): each x sent is
one quantized message (S = :func:`~sim.kernels.compression.wire_bytes` of ``dim``
coordinates); each end uses its own exact value and the other's dequantized one:
m_i = x_i − Q(x_j), m_j = Q(x_i) − x_j (values at the event time; on the network clock
the snapshot at the start), x_i −= m_i/2, x̃_i −= α̃·m_i, x_j += m_j/2, x̃_j += α̃·m_j.
Σx and Σx̃ then move by the wire's error (``mean_drift``).

Invariants (tests cite this table):

| quantity | guarantee | failure modes |
| --- | --- | --- |
| Σ_i (x_i + x̃_i) | preserved (round-off) | all; ``compression: none`` |
| Σ_i x_i at round ends / ``sync``, x̃(0) = x(0) | kept (round-off) | all; ``compression: none`` |
| equal vectors with x̃ = x | unchanged | all; ``compression: none`` |
| E[(x, x̃)(t)] | exp(A t)·(x(0), x̃(0)), A of :func:`expected_generator` | none |
| slowest decay rate of E[x] − x̄ | ≈ η (vs 1/(2χ₁) for pairwise gossip) | none |
| batched waves | equal to the one-by-one application (round-off) | all |
| Σ_i x_i with compression | moves by the wire's error (``mean_drift``) | all |

Why Σx is kept: Σ(x + x̃) is kept by mixing and exchanges, and every exchange adds
opposite amounts to x_i − x̃_i and x_j − x̃_j, which then decay at the same rate 2η, so
Σ(x − x̃) stays 0 whenever all peers are at the same time.

Reference: Nabli, Belilovsky, Oyallon, "A²CiD²: Accelerating Asynchronous Communication
in Decentralized Deep Learning", NeurIPS 2023.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from functools import cached_property
from types import ModuleType
from typing import Any, Literal

import numpy as np
import simpy
from pydantic import Field

from protocols._async_net import exchange_process
from protocols._edge_clocks import (
    EdgeClockParams,
    EdgeClockProtocol,
    host_rows,
    wave_levels,
    waves,
)
from protocols._spectra import GraphConstants, graph_constants
from protocols.contract import Context, RoundStats, RowValues, RowWatcher, RunEnv, State
from sim.core.optional import optional_module
from sim.core.sets import unique_ints
from sim.kernels import a2cid2_exchange, a2cid2_mix, mix_coefficient
from sim.kernels._xp import namespace, take_rows
from sim.kernels.compression import IDENTITY, WireLike, as_wire
from sim.kernels.mixing import put_rows, scatter_rows
from sim.kernels.pairwise import exchange_differences, move_pairs, sent_differences

#: Smallest events × columns of a round for the compiled loop: below it the waves are
#: as fast, and a small run never imports numba.
JIT_MIN_ELEMENTS = 1 << 14
#: dtypes the compiled loop takes (others keep the waves).
JIT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
#: The network clock's closed-form waves and their trajectories run compiled from a
#: state of this many peers × columns (:meth:`A2cid2._solo_wave`,
#: :meth:`A2cid2.estimate_pairs_into`; the compiled flows import numba from 256 peers on).
WAVE_MIN_ELEMENTS = 1 << 12
#: Topologies whose rate-weighted graph is vertex-transitive: the edges at one peer
#: carry every edge's effective resistance.
TRANSITIVE = frozenset({"ring", "torus", "complete", "exponential"})


class A2cid2Params(EdgeClockParams):
    """Parameters of ``a2cid2``: the edge clocks' plus optional η and α̃ overrides."""

    name: Literal["a2cid2"] = "a2cid2"
    eta: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="mixing rate η (default: graph)"
    )
    alpha_tilde: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="exchange weight α̃ on x̃ (default: graph)",
    )


def default_eta_alpha(chi1: float, chi2: float) -> tuple[float, float]:
    """(η, α̃) = (1/(2√(χ₁χ₂)), ½√(χ₁/χ₂)); (0, ½) — plain gossip — without edges."""
    if not (math.isfinite(chi1) and chi1 > 0 and chi2 > 0):
        return 0.0, 0.5
    return 1 / (2 * math.sqrt(chi1 * chi2)), 0.5 * math.sqrt(chi1 / chi2)


def expected_generator(laplacian: np.ndarray, eta: float, alpha_tilde: float) -> np.ndarray:
    """The (2N, 2N) matrix A of d/dt E[(x, x̃)] = A·E[(x, x̃)].

    A = [[−ηI − Λ/2, ηI], [ηI − α̃Λ, −ηI]]: the mixing ODE plus the exchanges' mean drift
    Σ λ_ij (−½, −α̃)·(e_i − e_j)(e_i − e_j)ᵀ x (derivation in docs/design-gossip.md).
    """
    n = laplacian.shape[0]
    eye = np.eye(n)
    top = np.hstack((-eta * eye - laplacian / 2, eta * eye))
    bottom = np.hstack((eta * eye - alpha_tilde * laplacian, -eta * eye))
    return np.vstack((top, bottom))


def block_decay_rate(mu: float, eta: float, alpha_tilde: float) -> float:
    """Decay rate of the slower mode of A restricted to a Laplacian eigenvalue μ."""
    block = np.array([[-eta - mu / 2, eta], [eta - alpha_tilde * mu, -eta]])
    return float(-np.max(np.linalg.eigvals(block).real))


def apply_events(
    x: Any,
    x_tilde: Any,
    times: np.ndarray,
    i: np.ndarray,
    j: np.ndarray,
    eta: float,
    alpha_tilde: float,
    end: float = 1.0,
    wire: WireLike = IDENTITY,
    watcher: RowWatcher | None = None,
    start: float = 0.0,
) -> tuple[Any, Any]:
    """Exchanges (i_k, j_k) at times t_k ∈ [0, end), in order, then everyone to ``end``.

    All peers start at time 0. Events are batched in waves of disjoint pairs; each end is
    brought forward to its own exchange's time, so the result equals the one-by-one
    application (to round-off). x is sent through ``wire``. Returns the
    new (x, x_tilde). ``watcher`` is shown each wave's rows before and after it
    (:func:`trajectory_rows`), times shifted by ``start`` (the round's start).
    """
    module = _compiled_module(x, x_tilde, i.size, wire, watcher)
    if module is not None:
        last = _compiled_events(module, x, x_tilde, times, i, j, eta, alpha_tilde)
        if eta > 0:  # a2cid2_mix's operations, in the same order
            module.mix_rows(
                x, x_tilde, mix_coefficient(end - last, eta).astype(x.dtype, copy=False)
            )
        return x, x_tilde
    last = np.zeros(x.shape[0])
    for wave in waves(i, j):
        rows = np.concatenate((i[wave], j[wave]))
        at = np.concatenate((times[wave], times[wave]))
        c = mix_coefficient(at - last[rows], eta)
        before = None
        if watcher is not None and watcher.needs_before:
            before = trajectory_rows(x, x_tilde, rows, start + last[rows])
        x, x_tilde = a2cid2_exchange(x, x_tilde, i[wave], j[wave], c, alpha_tilde, wire)
        last[rows] = at
        if watcher is not None:
            after = trajectory_rows(x, x_tilde, rows, start + at)
            watcher.wave(rows, before, after, start + at)
    if eta > 0:
        x, x_tilde = a2cid2_mix(x, x_tilde, mix_coefficient(end - last, eta))
    return x, x_tilde


def _compiled_module(
    x: Any,
    x_tilde: Any,
    events: int,
    wire: WireLike,
    watcher: RowWatcher | None,
    least: int | None = None,
) -> ModuleType | None:
    """The compiled loops (:mod:`sim.kernels._a2cid2_jit`) where they apply: numpy
    float32 or float64 states, an exact wire, no watcher (it is shown each wave), at
    least ``least`` (default :data:`JIT_MIN_ELEMENTS`) events × columns, numba
    importable; else None."""
    if watcher is not None or type(x) is not np.ndarray or type(x_tilde) is not np.ndarray:
        return None
    if x.dtype not in JIT_DTYPES or x_tilde.dtype != x.dtype or not as_wire(wire).exact:
        return None
    if events * x.shape[1] < (JIT_MIN_ELEMENTS if least is None else least):
        return None
    return optional_module("sim.kernels._a2cid2_jit")


def _compiled_events(
    module: ModuleType,
    x: np.ndarray,
    x_tilde: np.ndarray,
    times: np.ndarray,
    i: np.ndarray,
    j: np.ndarray,
    eta: float,
    alpha_tilde: float,
) -> np.ndarray:
    """:func:`apply_events`' waves done by the compiled ``module`` one event at a time,
    in place, with the same values bit for bit; returns each peer's last event time (0:
    none).

    Each end's coefficient is computed as the waves do, for the time since that peer's
    previous event (from 0), with numpy's ``expm1``; those times come from
    ``module.event_since``. A wave mixes its rows only when one
    of its coefficients is non-zero (:func:`~sim.kernels.a2cid2_exchange`); where some
    are and some are not, the waves are computed to tell each event whether it mixes.
    """
    k = i.size
    elapsed, last = module.event_since(times, i, j, x.shape[0])
    c = mix_coefficient(elapsed, eta)
    nonzero = c != 0
    count = np.count_nonzero(nonzero)
    if count in (0, c.size):
        mixed = np.full(k, count > 0)
    else:
        level = wave_levels(i, j)
        mixes = np.zeros(int(level.max()) + 1, dtype=bool)
        np.logical_or.at(mixes, np.concatenate((level, level)), nonzero)
        mixed = mixes[level]
    dtype = x.dtype
    c = c.astype(dtype, copy=False)
    half, alpha = dtype.type(0.5), dtype.type(alpha_tilde)
    module.exchange_events(x, x_tilde, i, j, c[:k], c[k:], mixed, half, alpha)
    return last


def trajectory_rows(x: Any, x_tilde: Any, rows: np.ndarray, since: np.ndarray) -> RowValues:
    """Peers ``rows``' x between events, as last brought forward at times ``since``:
    x(t) = a − e^(−2η(t − since))·d with a = (x + x̃)/2 and d = (x̃ − x)/2 (the closed
    form of the mixing, :func:`~sim.kernels.mixing.mix_coefficient`)."""
    x_rows, tilde_rows = host_rows(x, rows), host_rows(x_tilde, rows)
    return RowValues(0.5 * (x_rows + tilde_rows), 0.5 * (tilde_rows - x_rows), since)


class A2cid2(EdgeClockProtocol):
    """A²CiD²: pairwise gossip on Poisson edge clocks plus continuous momentum mixing."""

    Params = A2cid2Params
    description = "A²CiD² continuous-momentum asynchronous gossip (Nabli et al. 2023)"
    invariants = frozenset({"sum", "momentum_sum", "atomic_exchanges"})
    #: x and x̃; a wave adds both ends' rows of each, their mixing step and difference
    #: (``wave_arrays``); the wire adds the decoded rows and the codec's copies.
    state_arrays = 2.0
    wave_arrays = 4.0
    compressed_arrays = 2.0

    def __init__(self, params: A2cid2Params, ctx: Context) -> None:
        super().__init__(params, ctx)
        eta, alpha_tilde = params.eta, params.alpha_tilde
        if eta is None or alpha_tilde is None:  # the graph's constants are needed
            eta_default, alpha_tilde_default = self.defaults
            eta = eta_default if eta is None else eta
            alpha_tilde = alpha_tilde_default if alpha_tilde is None else alpha_tilde
        self.eta: float = eta
        self.alpha_tilde: float = alpha_tilde
        #: Network clock: each peer's last lazy-mixing time (seconds).
        self.last = np.zeros(ctx.n_peers)

    def invariants_in_force(
        self, clock: str = "rounds", rejoin: str = "keep", schedule: str = "barrier"
    ) -> frozenset[str]:
        """Σx is kept only while Σ(x − x̃) = 0: a rejoin that replaces a peer's (x, x̃)
        (``reset``, ``fetch``) drops that peer's x − x̃ from the sum, so Σx then moves
        (Σ(x + x̃) is still kept). The schedule changes nothing: the edge clocks run
        unchanged under ``async``."""
        kept = super().invariants_in_force(clock, rejoin, schedule)
        return kept if rejoin == "keep" else kept - {"sum"}

    @property
    def defaults(self) -> tuple[float, float]:
        """(η, α̃) from the graph's χ₁ and χ₂ (what ``eta``/``alpha_tilde`` override)."""
        return default_eta_alpha(self.constants.chi1, self.constants.chi2)

    @cached_property
    def constants(self) -> GraphConstants:
        """χ₁, χ₂ of the rate-weighted graph (computed once, on first use)."""
        transitive = self.params.topology in TRANSITIVE
        return graph_constants(self.edges, self.rates, self.ctx.n_peers, transitive)

    def init_state(self, state: State) -> None:
        """Add x̃ = a copy of x (``state.extra["x_tilde"]``)."""
        xp = namespace(state.x)
        state.extra["x_tilde"] = xp.asarray(state.x, copy=True)

    @property
    def decay_rate(self) -> float:  # type: ignore[override]
        """2η: x − x̃ decays at this rate between events (:meth:`estimate_rows`)."""
        return 2 * self.eta

    def estimate_rows(self, state: State, rows: np.ndarray) -> RowValues:
        """Peers ``rows``' x as functions of time until their next event
        (:func:`trajectory_rows`, from their last lazy-mixing time)."""
        return trajectory_rows(state.x, state.extra["x_tilde"], rows, self.last[rows])

    def round(self, state: State, present: np.ndarray, t: int) -> RoundStats:
        """One unit of time: exchanges at their ring times, lazy mixing, all to t + 1."""
        times, i, j = self.ring_round(present)
        state.x, state.extra["x_tilde"] = apply_events(
            state.x,
            state.extra["x_tilde"],
            times,
            i,
            j,
            self.eta,
            self.alpha_tilde,
            wire=self.wire,
            watcher=self.watcher,
            start=float(t),
        )
        self.last[:] = t + 1  # every peer is brought to the round's end
        return self.exchange_stats(i.size)

    def network_process(self, run: RunEnv) -> Generator[simpy.Event, Any, None]:
        """SimPy process body of the network clock: exchanges as flows, lazy mixing."""
        state, env, wire = run.state, run.env, self.wire
        self.last[:] = float(env.now)

        def snapshot(i: int, j: int) -> Any:
            self.forward(state, np.array([i, j]), float(env.now))
            return exchange_differences(state.x, i, j, wire)

        def apply(i: int, j: int, m: Any, now: float | None = None) -> None:
            self.forward(state, np.array([i, j]), float(env.now) if now is None else now)
            m_i, m_j = m
            state.x = move_pairs(state.x, i, j, m_i, m_j, 0.5)
            x_tilde = state.extra["x_tilde"]
            state.extra["x_tilde"] = move_pairs(x_tilde, i, j, m_i, m_j, self.alpha_tilde)

        def batch(
            a: np.ndarray,
            b: np.ndarray,
            start: np.ndarray,
            end: np.ndarray,
            waves: list[np.ndarray],
        ) -> None:
            for wave in waves:
                i, j = a[wave], b[wave]
                at = (
                    np.concatenate((start[wave], start[wave])),
                    np.concatenate((end[wave], end[wave])),
                )
                if type(state.x) is np.ndarray and type(state.extra["x_tilde"]) is np.ndarray:
                    self._solo_wave(state, i, j, at)
                    continue
                rows = np.concatenate((i, j))
                self.forward_pairs(state, rows, at[0])
                m_i, m_j = exchange_differences(state.x, i, j, wire)
                self.forward_pairs(state, rows, at[1])
                state.x = move_pairs(state.x, i, j, m_i, m_j, 0.5)
                x_tilde = state.extra["x_tilde"]
                state.extra["x_tilde"] = move_pairs(x_tilde, i, j, m_i, m_j, self.alpha_tilde)

        return exchange_process(self, run, (snapshot, apply), batch)

    def forward(self, state: State, rows: np.ndarray, now: float) -> None:
        """Bring peers ``rows`` (distinct) forward with the closed-form mixing to ``now``."""
        c = mix_coefficient(now - self.last[rows], self.eta)
        self.last[rows] = now
        if not np.any(c):
            return
        self._mix_rows(state, rows, c)

    def forward_pairs(self, state: State, rows: np.ndarray, now: np.ndarray) -> None:
        """Bring the ends of disjoint pairs forward, rows ``rows`` = (i…, j…) each to its
        own time ``now`` ((2P,) seconds): :meth:`forward` of each pair, batched (a pair
        whose two coefficients are 0 is left alone, bit for bit, as there)."""
        c = mix_coefficient(now - self.last[rows], self.eta)
        self.last[rows] = now
        pairs = rows.size // 2
        moving = (c[:pairs] != 0) | (c[pairs:] != 0)
        if moving.all():
            self._mix_rows(state, rows, c)
        elif moving.any():
            both = np.concatenate((moving, moving))
            self._mix_rows(state, rows[both], c[both])

    def _mix_rows(self, state: State, rows: np.ndarray, c: np.ndarray) -> None:
        """Mix peers ``rows`` (distinct) by their coefficients ``c``, in place."""
        x, x_tilde = state.x, state.extra["x_tilde"]
        xp = namespace(x)
        ends, ends_tilde = a2cid2_mix(take_rows(xp, x, rows), take_rows(xp, x_tilde, rows), c)
        state.x, state.extra["x_tilde"] = (
            put_rows(x, rows, ends),
            put_rows(x_tilde, rows, ends_tilde),
        )

    def _solo_wave(
        self, state: State, i: np.ndarray, j: np.ndarray, at: tuple[np.ndarray, np.ndarray]
    ) -> None:
        """A wave of disjoint exchanges alone on their rows from snapshot to update, on
        numpy arrays: :meth:`forward_pairs` to the snapshot times ``at[0]``, the wire's
        differences, :meth:`forward_pairs` to the update times ``at[1]``, the moves of
        x and x̃ — the same arithmetic on the rows taken once, written back once."""
        x, x_tilde = state.x, state.extra["x_tilde"]
        pairs = i.size
        rows = np.concatenate((i, j))
        module = _compiled_module(x, x_tilde, x.shape[0], self.wire, None, WAVE_MIN_ELEMENTS)
        if module is not None:  # the same operations, element by element, in numba
            c_start = mix_coefficient(at[0] - self.last[rows], self.eta)
            c_end = mix_coefficient(at[1] - at[0], self.eta)
            self.last[rows] = at[1]
            moving = np.stack(
                ((c_start[:pairs] != 0) | (c_start[pairs:] != 0),
                 (c_end[:pairs] != 0) | (c_end[pairs:] != 0))
            )  # fmt: skip
            c = np.stack((c_start, c_end)).astype(x.dtype)
            module.solo_wave(
                x, x_tilde, i, j, c, moving, x.dtype.type(0.5), x.dtype.type(self.alpha_tilde)
            )
            return
        ends, tilde = x.take(rows, axis=0), x_tilde.take(rows, axis=0)
        differences: tuple[np.ndarray, np.ndarray] = (ends, ends)
        for k, now in enumerate(at):
            c = mix_coefficient(now - self.last[rows], self.eta)
            self.last[rows] = now
            moving = (c[:pairs] != 0) | (c[pairs:] != 0)
            if moving.all():
                step = c.astype(x.dtype, copy=False)[:, None] * (tilde - ends)
                ends += step
                tilde -= step
            elif moving.any():
                both = np.concatenate((moving, moving))
                step = c[both].astype(x.dtype, copy=False)[:, None] * (tilde[both] - ends[both])
                ends[both] += step
                tilde[both] -= step
            if k == 0:
                differences = sent_differences(ends, self.wire)
        m_i, m_j = differences
        step_i = 0.5 * m_i
        step_j = step_i if m_j is m_i else 0.5 * m_j
        kick_i = self.alpha_tilde * m_i
        kick_j = kick_i if m_j is m_i else self.alpha_tilde * m_j
        ends[:pairs] -= step_i
        ends[pairs:] += step_j
        tilde[:pairs] -= kick_i
        tilde[pairs:] += kick_j
        scatter_rows(x, rows, ends)
        scatter_rows(x_tilde, rows, tilde)

    def estimate_pairs_into(
        self, state: State, pairs: np.ndarray, slots: np.ndarray, a: np.ndarray, d: np.ndarray
    ) -> bool:
        """:func:`trajectory_rows`' a and d of the rows of ``pairs``, written at ``slots``
        by the compiled loop (the same float64 operations) where it applies."""
        x, x_tilde = state.x, state.extra["x_tilde"]
        module = _compiled_module(x, x_tilde, x.shape[0], IDENTITY, None, WAVE_MIN_ELEMENTS)
        if module is None or a.dtype != np.float64 or d.dtype != np.float64:
            return False
        module.trajectory_pairs(x, x_tilde, pairs, slots, a, d)
        return True

    def save_rows(self, state: State, rows: np.ndarray) -> Callable[[], None]:
        """A function that puts peers ``rows`` (numpy state) back as they are now: x, x̃
        and their last mixing times (a closed-form segment undone,
        :mod:`protocols._solo_exchanges`)."""
        x, x_tilde = state.x[rows], state.extra["x_tilde"][rows]
        last = self.last[rows]

        def restore() -> None:
            state.x[rows] = x
            state.extra["x_tilde"][rows] = x_tilde
            self.last[rows] = last

        return restore

    def sync_rows(self, state: State, rows: np.ndarray, now: float) -> None:
        """Bring peers ``rows`` forward to ``now`` (a fetch then copies the source as of
        now, whenever it was last brought forward)."""
        self.forward(state, unique_ints(rows), now)

    def sync(self, state: State, now: float) -> None:
        """Bring every peer forward to ``now`` (network clock; the engine calls it before
        each measurement)."""
        c = mix_coefficient(now - self.last, self.eta)
        self.last[:] = now
        if np.any(c):
            state.x, state.extra["x_tilde"] = a2cid2_mix(state.x, state.extra["x_tilde"], c)

    def describe(self) -> dict[str, Any]:
        """χ₁, χ₂, η, α̃ in use, and the expected decay rates of E[x] − x̄ (per time unit)."""
        chi1, chi2 = self.constants.chi1, self.constants.chi2
        mu = 1 / chi1 if chi1 > 0 and math.isfinite(chi1) else 0.0
        gossip_rate = mu / 2
        eta_default, alpha_tilde_default = self.defaults
        return {
            "chi1": chi1,
            "chi2": chi2,
            "eta": self.eta,
            "alpha_tilde": self.alpha_tilde,
            "eta_default": eta_default,
            "alpha_tilde_default": alpha_tilde_default,
            "decay_rate_gossip": gossip_rate,
            "decay_rate_a2cid2": self.eta,
            "decay_rate_a2cid2_block": block_decay_rate(mu, self.eta, self.alpha_tilde),
            "gain": self.eta / gossip_rate if gossip_rate > 0 else math.nan,
            "method": self.constants.method,
        }
