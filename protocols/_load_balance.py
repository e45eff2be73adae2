"""Load balancing of the butterfly all-reduce: how much of the vector each member reduces.

In a group of g members with shares w (Σw = 1) member i moves S·(1 + (g−2)·w_i) bytes in
each direction (``protocols.md``, moshpit), so without other traffic the group needs
max_i S·(1 + (g−2)·w_i)/b_i seconds. :func:`lp_shares` picks the shares that minimise this
time (a linear program, whose optimum has a closed form: :func:`_optimal_tau`);
:func:`whole_coordinates` rounds them to whole coordinates and :func:`part_bounds` turns
those into slices.

b_i is the member's bandwidth ``min(upload, download)`` (:func:`member_bandwidth_bytes_per_s`):
the NIC is full duplex and member i sends and receives the same S·(1 + (g−2)·w_i) bytes,
so its own time is max(bytes/upload, bytes/download) = bytes/min(upload, download).
"""

from __future__ import annotations

import numpy as np

#: The equal split is returned when its time is within this relative distance of the
#: optimum: it is then optimal up to round-off.
EQUAL_SPLIT_RTOL = 1e-9
#: Caps below this share are round-off of a member held at w = 0 by its own floor time
#: S/b_i = T*; they are set to exactly 0.
_CAP_ATOL = 1e-12


def member_bandwidth_bytes_per_s(
    upload_bytes_per_s: np.ndarray, download_bytes_per_s: np.ndarray
) -> np.ndarray:
    """The bandwidth b_i the load balancer uses: ``min(upload, download)``, (g,) float64."""
    return np.minimum(
        np.asarray(upload_bytes_per_s, dtype=np.float64),
        np.asarray(download_bytes_per_s, dtype=np.float64),
    )


def lp_shares(
    bandwidth_bytes_per_s: np.ndarray, vector_bytes: float, reducer: np.ndarray | None = None
) -> np.ndarray:
    """Shares of the vector each member reduces, minimising the butterfly's time.

    Parameters
    ----------
    bandwidth_bytes_per_s
        (g,) float, bytes/s, each member's b_i (≥ 0, ``inf`` allowed), see
        :func:`member_bandwidth_bytes_per_s`.
    vector_bytes
        S, bytes of the whole vector (≥ 0). The optimal shares do not depend on it.
    reducer
        (g,) bool, whether a member may reduce a part; ``False`` for client-mode peers
        (behind NAT). Default: every member may.

    Returns
    -------
    (g,) float64 shares w, w ≥ 0, Σw = 1; members with b_i = 0 or ``reducer[i] == False``
    get exactly 0.

    Raises
    ------
    ValueError
        Bad shapes or values, or no member can reduce (all have b = 0 or are clients).

    Notes
    -----
    The linear program, in variables (w, T)::

        minimise T  subject to  S·(1 + (g−2)·w_i)/b_i ≤ T   (0 < b_i < inf)
                                w ≥ 0,  Σw = 1,  w_i = 0 for members that cannot reduce

    in units of S/b_ref (b_ref the largest finite bandwidth), its optimum T* in closed
    form (:func:`_optimal_tau`; it agrees with scipy's HiGHS on the same program to
    1e-9, tested). Members with b_i = inf never limit T;
    members with b_i = 0 make T infinite whatever the shares, so they add no constraint.

    The optimum T* may be reached by many shares (a slow client sets T*; an infinite
    bandwidth member). Output is made unique: the equal split among eligible reducers
    if it reaches T* (to ``EQUAL_SPLIT_RTOL``), otherwise the shares closest to it in
    Euclidean norm among those reaching T*: w_i = min(c, u_i) with u_i the cap
    (T*·b_i/S − 1)/(g−2) and c the common level with Σw = 1 (water-filling). Members
    with equal bandwidth therefore get equal shares, and relabelling members permutes
    the shares. When T* is reached by one point only, this is that point.

    g = 1 gives [1.0] (a group of one sends nothing). With g = 2, (g−2) = 0: every split
    takes the same time, and the equal split among eligible reducers is returned; so it
    is when every split takes no time (S = 0, or no member with 0 < b_i < inf).

    References
    ----------
    Diskin et al., "Distributed Deep Learning in Open Collaborations", NeurIPS 2021: the
    min-max load-balancing LP of the butterfly all-reduce (hivemind's
    ``load_balance_peers``), used by Moshpit All-Reduce (Ryabinin et al., NeurIPS 2021).
    """
    bandwidth, eligible = _checked_members(bandwidth_bytes_per_s, vector_bytes, reducer)
    g = bandwidth.size
    if g == 1:
        return np.ones(1)
    equal = _equal_split(eligible)
    ratio = _time_ratio(bandwidth)
    if g == 2 or vector_bytes == 0 or not np.any(ratio > 0):
        return equal
    tau = _optimal_tau(ratio, eligible)
    if _tau(ratio, equal) <= tau * (1 + EQUAL_SPLIT_RTOL):
        return equal
    caps = _caps(ratio, eligible, tau)
    shares = np.zeros(g)
    shares[eligible] = _water_fill(caps[eligible])
    return shares


def _checked_members(
    bandwidth_bytes_per_s: np.ndarray, vector_bytes: float, reducer: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    bandwidth = np.asarray(bandwidth_bytes_per_s, dtype=np.float64)
    if bandwidth.ndim != 1 or bandwidth.size == 0:
        raise ValueError(
            f"bandwidth_bytes_per_s: expected a non-empty (g,) array, got shape {bandwidth.shape}"
        )
    if np.any(np.isnan(bandwidth)) or np.any(bandwidth < 0):
        raise ValueError(
            f"bandwidth_bytes_per_s: expected values ≥ 0 (inf allowed), got {bandwidth}"
        )
    if not (vector_bytes >= 0 and np.isfinite(vector_bytes)):
        raise ValueError(f"vector_bytes: expected a finite number ≥ 0, got {vector_bytes!r}")
    can = (
        np.ones(bandwidth.size, dtype=bool) if reducer is None else np.asarray(reducer, dtype=bool)
    )
    if can.shape != bandwidth.shape:
        raise ValueError(f"reducer: expected shape {bandwidth.shape}, got {can.shape}")
    eligible = can & (bandwidth > 0)
    if bandwidth.size > 1 and not eligible.any():
        raise ValueError(
            "no member can reduce a part: every member is a client (reducer=False) or has "
            f"zero bandwidth (bandwidth_bytes_per_s={bandwidth}, reducer={can})"
        )
    return bandwidth, eligible


def _equal_split(eligible: np.ndarray) -> np.ndarray:
    """(g,) shares 1/k on the k eligible members, 0 elsewhere."""
    return np.where(eligible, 1.0 / np.count_nonzero(eligible), 0.0)


def _time_ratio(bandwidth: np.ndarray) -> np.ndarray:
    """r_i = b_ref/b_i for 0 < b_i < inf (b_ref the largest such b), 0 for the others."""
    limiting = (bandwidth > 0) & np.isfinite(bandwidth)
    if not limiting.any():
        return np.zeros(bandwidth.size)
    reference = bandwidth[limiting].max()
    return np.where(limiting, reference / np.where(limiting, bandwidth, 1.0), 0.0)


def _tau(ratio: np.ndarray, shares: np.ndarray) -> float:
    """The group time in units of S/b_ref: max_i r_i·(1 + (g−2)·w_i)."""
    return float(np.max(ratio * (1 + (ratio.size - 2) * shares)))


def _optimal_tau(ratio: np.ndarray, eligible: np.ndarray) -> float:
    """τ* = T*·b_ref/S, the linear program's optimum, in closed form.

    Every limiting member needs r_i·(1 + (g−2)·w_i) ≤ τ with w_i ≥ 0, so τ ≥ R = max r_i.
    At a τ ≥ R an eligible member takes at most its cap u_i(τ) = (τ/r_i − 1)/(g−2) ≥ 0
    (no limit when r_i = 0: an infinite bandwidth), and the shares reach Σw = 1 once
    Σ u_i(τ) = (τ·Σ 1/r_i − k)/(g−2) ≥ 1 over the k eligible members, i.e.
    τ ≥ (g − 2 + k)/Σ 1/r_i. τ* is the larger of the two bounds (R alone when an eligible
    member has r_i = 0). ``tests/property/test_load_balance_props.py`` checks it against
    scipy's HiGHS on the linear program itself.
    """
    peak = float(ratio.max())
    if np.any(eligible & (ratio == 0)):
        return peak
    count = np.count_nonzero(eligible)
    fill = (ratio.size - 2 + count) / float(np.sum(1.0 / ratio[eligible]))
    return max(peak, fill)


def _caps(ratio: np.ndarray, eligible: np.ndarray, tau: float) -> np.ndarray:
    """u_i: the largest share member i can take within time τ (inf when r_i = 0)."""
    g = ratio.size
    safe = np.where(ratio > 0, ratio, 1.0)
    caps = (tau / safe - 1) / (g - 2)
    caps[caps < _CAP_ATOL] = 0.0
    return np.where(eligible & (ratio == 0), np.inf, caps)


def _water_fill(caps: np.ndarray) -> np.ndarray:
    """w_i = min(c, u_i) with Σw = 1: the point of {0 ≤ w ≤ u, Σw = 1} nearest the equal split.

    Members are visited by increasing cap; one below the current level c = (mass left) /
    (members left) gets its cap, and the rest share the remainder equally. Caps summing to
    less than 1 (round-off in τ*) are scaled up to sum 1.
    """
    shares = caps.copy()
    left, count = 1.0, caps.size
    order = np.argsort(caps, kind="stable")
    for position, member in enumerate(order):
        level = left / count
        if caps[member] >= level:
            shares[order[position:]] = level
            return shares
        left, count = left - caps[member], count - 1
    return shares / shares.sum()


def member_bytes(shares: np.ndarray, vector_bytes: float) -> np.ndarray:
    """(g,) float64 bytes each member moves per direction: S·(1 + (g−2)·w_i)."""
    w = np.asarray(shares, dtype=np.float64)
    return vector_bytes * (1 + (w.size - 2) * w)


def butterfly_time_s(
    bandwidth_bytes_per_s: np.ndarray, shares: np.ndarray, vector_bytes: float
) -> float:
    """The group's butterfly time without other traffic and without latencies.

    Parameters
    ----------
    bandwidth_bytes_per_s
        (g,) float, bytes/s, each member's b_i (0 and ``inf`` allowed).
    shares
        (g,) float, the shares w (Σw = 1).
    vector_bytes
        S, bytes of the whole vector.

    Returns
    -------
    Seconds, max_i S·(1 + (g−2)·w_i)/b_i: 0 for a group of one, ``inf`` when a member
    with b_i = 0 has bytes to move.
    """
    bandwidth = np.asarray(bandwidth_bytes_per_s, dtype=np.float64)
    moved = member_bytes(shares, vector_bytes)
    with np.errstate(divide="ignore"):
        seconds = np.where(moved > 0, moved / bandwidth, 0.0)
    return float(seconds.max())


def whole_coordinates(shares: np.ndarray, dim: int) -> np.ndarray:
    """Round shares to whole coordinates by largest remainder.

    Parameters
    ----------
    shares
        (g,) float, w ≥ 0 with a positive sum (normalised here, so Σw = 1 up to
        round-off is fine).
    dim
        Coordinates of the vector (≥ 0).

    Returns
    -------
    (g,) int64 counts summing exactly to ``dim``; members with share 0 get 0.

    Notes
    -----
    counts_i = ⌊w_i·dim⌋, then the dim − Σ counts coordinates left go one each to the
    members with the largest remainders w_i·dim − ⌊w_i·dim⌋ (ties: lower member index
    first). Every count differs from w_i·dim by less than one coordinate.
    """
    w = np.asarray(shares, dtype=np.float64)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(
            f"shares: expected a (g,) array of finite values ≥ 0 with a positive sum, got {w}"
        )
    if dim < 0:
        raise ValueError(f"dim: expected an integer ≥ 0, got {dim!r}")
    exact = w / w.sum() * dim
    counts = np.floor(exact).astype(np.int64)
    remainder = np.where(w > 0, exact - counts, -1.0)
    order = np.argsort(-remainder, kind="stable")
    counts[order[: dim - int(counts.sum())]] += 1
    return counts


def part_bounds(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, stops): (g,) int64 slice bounds of consecutive parts of ``counts`` coordinates."""
    sizes = np.asarray(counts, dtype=np.int64)
    stops = np.cumsum(sizes)
    return stops - sizes, stops
