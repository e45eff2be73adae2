"""Float64 moments of a set of peers' estimates, kept current one change at a time.

Every row is a function of time between its changes, x_r(t) = a_r − u(t)·b_r with
u(t) = e^(−ρ(t − T)) for a decay rate ρ ≥ 0 and a reference time T (A²CiD²'s lazy
mixing; b = 0 for protocols whose rows are constant between events). For a set of n
rows of ``dim`` coordinates, :class:`Moments` keeps, around fixed centres p (of a) and q
(of b): A = Σ(a − p), B = Σ(b − q), saa = Σ‖a − p‖², sab = Σ(a − p)·(b − q) and
sbb = Σ‖b − q‖². Then

    n·dim·var(u) = α − 2βu + γu²,  α = saa − ‖A‖²/n,  β = sab − A·B/n,  γ = sbb − ‖B‖²/n,

and the mean is p − u·q + (A − uB)/n. Centring on the set's means at each resync keeps
the subtraction in α (β, γ) well conditioned, and updating the sums by the difference of
*centred* squared norms keeps each update's round-off relative to the rows' distance to
the mean, not to their size.

:class:`Norms` holds every peer's centred squared norms ‖a − p‖², (a − p)·(b − q),
‖b − q‖² around the centres of the ``var`` set, so that an event needs only the rows it
changed, after the change: Δsaa = Σ new norms − Σ cached ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.kernels.rownorms import rowdots


def rowdot(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Σ_j u_ij·v_ij per row (einsum: BLAS would start threads)."""
    return np.einsum("ij,ij->i", u, v)


def dot(u: np.ndarray, v: np.ndarray) -> float:
    """u·v of two vectors, as :func:`rowdots` computes it for each row of a matrix (the
    tracker's events one at a time and in batches give the same bits)."""
    return float(np.multiply(u, v).sum())


@dataclass
class Moments:
    """Centred sums of one set of rows (see the module docstring); all float64.

    ``reference`` is n·dim·var when the sums were last computed from the state; the
    tracker recomputes them when the variance has fallen well below it (the sums'
    absolute round-off is relative to that older, larger variance).
    """

    n: int
    dim: int
    p: np.ndarray
    a_sum: np.ndarray
    saa: float
    q: np.ndarray | None = None
    b_sum: np.ndarray | None = None
    sab: float = 0.0
    sbb: float = 0.0
    reference: float = 0.0
    aa: float = 0.0  # ‖A‖², A·B and ‖B‖², kept with A and B
    ab: float = 0.0
    bb: float = 0.0

    @classmethod
    def centred(cls, p: np.ndarray, q: np.ndarray | None) -> Moments:
        """An empty set with centres (p, q) (copied)."""
        zero = np.zeros(p.size)
        if q is None:
            return cls(0, p.size, p.copy(), zero, 0.0)
        return cls(0, p.size, p.copy(), zero, 0.0, q.copy(), zero.copy())

    def settle(self) -> None:
        """After adding the rows of a resync: remember n·dim·var as the reference."""
        alpha, beta, gamma = self.coefficients()
        self.reference = min(abs(alpha), abs(alpha - 2 * beta + gamma)) if self.n else 0.0

    def coefficients(self) -> tuple[float, float, float]:
        """(α, β, γ): n·dim·var(u) = α − 2βu + γu² (NaN for an empty set)."""
        n = self.n
        if n == 0:
            return np.nan, 0.0, 0.0
        return self.saa - self.aa / n, self.sab - self.ab / n, self.sbb - self.bb / n

    def refresh_sums(self) -> None:
        """Recompute ‖A‖², A·B, ‖B‖² after A or B changed."""
        self.aa = dot(self.a_sum, self.a_sum)
        if self.b_sum is not None:
            self.ab, self.bb = dot(self.a_sum, self.b_sum), dot(self.b_sum, self.b_sum)

    def variance(self, u: float = 1.0) -> float:
        """The set's variance (mean over coordinates) at u."""
        alpha, beta, gamma = self.coefficients()
        return (alpha - 2 * beta * u + gamma * u * u) / (self.n * self.dim) if self.n else np.nan

    def shift(
        self,
        d_saa: float,
        d_a: np.ndarray | None = None,
        d_sab: float = 0.0,
        d_sbb: float = 0.0,
        d_b: np.ndarray | None = None,
        centres: tuple[np.ndarray, np.ndarray | None] | None = None,
    ) -> None:
        """Apply an event's changes (same rows before and after), computed around
        ``centres`` (p, q) (default: this set's own); ``d_a``/``d_b`` None: Σa, Σb kept."""
        if centres is not None and d_a is not None:
            shift_p = self.p - centres[0]
            d_saa -= 2 * dot(shift_p, d_a)
            if d_b is not None and self.q is not None and centres[1] is not None:
                shift_q = self.q - centres[1]
                d_sbb -= 2 * dot(shift_q, d_b)
                d_sab -= dot(shift_q, d_a) + dot(shift_p, d_b)
        self.saa += d_saa
        self.sab += d_sab
        self.sbb += d_sbb
        if d_a is not None:
            self.a_sum += d_a
        if d_b is not None and self.b_sum is not None:
            self.b_sum += d_b
        if d_a is not None or d_b is not None:
            self.refresh_sums()

    def add_rows(self, a: np.ndarray, b: np.ndarray | None, sign: int) -> None:
        """Add (sign 1) or remove (−1) rows (a, b) ((k, dim) float64) from the set."""
        if a.shape[0] == 0:
            return
        centred = a - self.p
        self.n += sign * a.shape[0]
        self.a_sum += sign * centred.sum(axis=0)
        self.saa += sign * float(rowdot(centred, centred).sum())
        if self.b_sum is not None and b is not None and self.q is not None:
            centred_b = b - self.q
            self.b_sum += sign * centred_b.sum(axis=0)
            self.sbb += sign * float(rowdot(centred_b, centred_b).sum())
            self.sab += sign * float(rowdot(centred, centred_b).sum())
        self.refresh_sums()

    def rescale(self, factor: float) -> None:
        """Move the reference time of u: b ← factor·b (u ← u/factor)."""
        if self.b_sum is None or self.q is None:
            return
        self.q *= factor
        self.b_sum *= factor
        self.sab *= factor
        self.sbb *= factor * factor
        self.ab *= factor
        self.bb *= factor * factor

    def mean(self, u: float = 1.0) -> np.ndarray:
        """The set's mean estimate at u, (dim,)."""
        if self.b_sum is None or self.q is None:
            return self.p + self.a_sum / self.n
        return self.p - u * self.q + (self.a_sum - u * self.b_sum) / self.n


@dataclass
class Norms:
    """Every peer's centred squared norms around centres (p, q): ``aa`` = ‖a − p‖²,
    ``ab`` = (a − p)·(b − q), ``bb`` = ‖b − q‖² ((N,) float64; ab, bb None without b)."""

    p: np.ndarray
    q: np.ndarray | None
    aa: np.ndarray
    ab: np.ndarray | None = None
    bb: np.ndarray | None = None

    def of(self, a: np.ndarray, b: np.ndarray | None) -> tuple[np.ndarray, ...]:
        """The norms of rows (a, b) around the centres, (k,) each."""
        centred = a - self.p
        if b is None or self.q is None:
            return (rowdot(centred, centred),)
        centred_b = b - self.q
        return rowdot(centred, centred), rowdot(centred, centred_b), rowdot(centred_b, centred_b)

    def event(self, rows: list[int], a: np.ndarray, b: np.ndarray | None) -> tuple[float, ...]:
        """One event's rows (a few, as a list) now have values (a, b): store their norms
        and return the change of the sums (aa, ab, bb), in Python floats. One small Gram
        matrix (BLAS does not start threads for a few rows)."""
        k = len(rows)
        centred = a - self.p
        aa = self.aa
        if b is None or self.q is None or self.ab is None or self.bb is None:
            norms = rowdots(centred, centred).tolist()  # as a batch of events computes them
            d_aa = 0.0
            for slot, r in enumerate(rows):
                value = norms[slot]
                d_aa += value - aa.item(r)
                aa[r] = value
            return d_aa, 0.0, 0.0
        both = np.concatenate((centred, b - self.q))
        gram = both.dot(both.T).tolist()
        ab, bb = self.ab, self.bb
        d_aa = d_ab = d_bb = 0.0
        for slot, r in enumerate(rows):
            v_aa, v_ab, v_bb = gram[slot][slot], gram[slot][k + slot], gram[k + slot][k + slot]
            d_aa += v_aa - aa.item(r)
            d_ab += v_ab - ab.item(r)
            d_bb += v_bb - bb.item(r)
            aa[r], ab[r], bb[r] = v_aa, v_ab, v_bb
        return d_aa, d_ab, d_bb

    def rescale(self, factor: float) -> None:
        """b ← factor·b (see :meth:`Moments.rescale`)."""
        if self.q is not None and self.ab is not None and self.bb is not None:
            self.q *= factor
            self.ab *= factor
            self.bb *= factor * factor

    def swap(self, rows: np.ndarray, new: tuple[np.ndarray, ...]) -> tuple[float, float, float]:
        """Store ``new`` norms of ``rows``; return the change of their sums (aa, ab, bb)."""
        d_aa = float(new[0].sum() - self.aa[rows].sum())
        self.aa[rows] = new[0]
        if len(new) == 1 or self.ab is None or self.bb is None:
            return d_aa, 0.0, 0.0
        d_ab = float(new[1].sum() - self.ab[rows].sum())
        d_bb = float(new[2].sum() - self.bb[rows].sum())
        self.ab[rows], self.bb[rows] = new[1], new[2]
        return d_aa, d_ab, d_bb


def moments_of(
    read: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None]],
    blocks: list[np.ndarray],
    masks: dict[str, np.ndarray],
    dim: int,
    decay: bool,
    norms: bool,
) -> tuple[dict[str, Moments], Norms | None]:
    """The moments of each set (``masks`` over all peers), centred on its means, and
    every peer's :class:`Norms` around the first set's centres when ``norms``. Two passes
    of ``read(rows) -> (a, b)`` over the row ``blocks`` (centres, then sums)."""
    counts = dict.fromkeys(masks, 0)
    a_totals = {metric: np.zeros(dim) for metric in masks}
    b_totals = {metric: np.zeros(dim) for metric in masks}
    for rows in blocks:
        a, b = read(rows)
        for metric, mask in masks.items():
            inside = mask[rows]
            counts[metric] += int(inside.sum())
            a_totals[metric] += a[inside].sum(axis=0)
            if b is not None:
                b_totals[metric] += b[inside].sum(axis=0)
    sets = {}
    for metric, count in counts.items():
        n = max(count, 1)
        sets[metric] = Moments.centred(
            a_totals[metric] / n, b_totals[metric] / n if decay else None
        )
    first = next(iter(sets.values()))
    cache = None
    if norms:
        q = None if first.q is None else first.q.copy()
        cache = Norms(first.p.copy(), q, np.zeros(sum(r.size for r in blocks)))
        if decay:
            cache.ab, cache.bb = np.zeros(cache.aa.size), np.zeros(cache.aa.size)
    for rows in blocks:
        a, b = read(rows)
        for metric, moments in sets.items():
            inside = masks[metric][rows]
            moments.add_rows(a[inside], None if b is None else b[inside], 1)
        if cache is not None:
            cache.swap(rows, cache.of(a, b))
    for moments in sets.values():
        moments.settle()
    return sets, cache
