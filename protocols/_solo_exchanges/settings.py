"""Knobs of the closed-form exchange path (:mod:`protocols._solo_exchanges`); tests and
benchmarks set them."""

from __future__ import annotations

from typing import Any

#: Module switch: False runs every exchange through the general path (tests, benchmarks).
ENABLED = True
#: When a list, every completed exchange of either path is appended to it as
#: (i, j, start, end) seconds (tests compare the two paths' completion times).
EXCHANGES: list[tuple[int, int, float, float]] | None = None
#: Most rings planned in one segment: :data:`SEGMENT_RINGS` per :data:`SEGMENT_PEERS`
#: peers, at least :data:`SEGMENT_RINGS` (:func:`segment_rings`; ≈ 8 rings a peer, each
#: holding at most ``sim.engine.resources.PLANNED_RING_BYTES`` while planned). The
#: exchanges in flight at a segment's end go out as flows, and there are more of them the
#: more peers ring, so the length grows with N: a fixed length (or one with a cap) would
#: put a share ∝ N of the exchanges on the general path, N² flows in all (measured at
#: 10^5 peers over 100 simulated s: 20 segments of 2^18 rings sent 19,446 exchanges as
#: flows, 10 segments of up to 12 × 2^16 rings half as many, 5.3 → 4.1 s of wall).
SEGMENT_RINGS = 1 << 16
SEGMENT_PEERS = 1 << 13


def segment_rings(n_peers: int) -> int:
    """The most rings one segment plans with ``n_peers`` peers (:data:`SEGMENT_RINGS`)."""
    return SEGMENT_RINGS * max(1, n_peers // SEGMENT_PEERS)


#: Rings planned between two looks at the run's interrupt (its environment's ``_poll``,
#: :class:`sim.engine.observe.observer.PolledEnvironment`, which looks every 256
#: events; a ring costs at least one event on the general path).
POLL_RINGS = 256
#: Peers up to which a plan reads the presence mask as a list (faster per ring; above,
#: copying it for a short segment would cost more than the rings).
LIST_PEERS = 16384
#: Peers from which a plan runs its ring loop compiled (numba, when it imports:
#: :func:`sim.kernels.solo_plan.compiled`) on arrays, else the Python loop on lists; a
#: run whose flow network runs compiled (``net.solver == "compiled"``, from
#: ``COMPILED_MIN_PEERS`` peers on) runs it compiled at any size, numba being loaded
#: already (the kernel then loads in ~10 ms: E1 1.8x, E1 with its target 1.2x faster at
#: 1024 peers). A small run does not import numba. Both plan the same bits.
COMPILED_PEERS = 4096


def runs_compiled(n_peers: int, net: Any) -> bool:
    """Whether a run's closed-form exchanges run compiled (see :data:`COMPILED_PEERS`):
    from that many peers on, or wherever the flow network ``net`` runs compiled."""
    return n_peers >= COMPILED_PEERS or getattr(net, "solver", None) == "compiled"


#: Rings handled one at a time after a segment could not be planned, before the next try.
RETRY_RINGS = 32
#: With a watcher, a segment's rows before and after every exchange are kept until the
#: watcher has taken them: at most this many elements (``rings × dim``) per segment.
WATCHED_ELEMENTS = 1 << 20
#: Two finishes closer than this many flow-size windows (``REL_EPS × transfer time``)
#: refuse a segment (the factor covers the round-off of the comparison).
NEAR_FACTOR = 4.0
