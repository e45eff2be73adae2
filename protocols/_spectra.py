"""Spectral constants of a rate-weighted graph: χ₁ (1/λ₂) and χ₂ (edge resistances).

For the Laplacian Λ = Σ_edges λ_ij (e_i − e_j)(e_i − e_j)ᵀ of a graph with edge rates λ:

- χ₁ = 1/λ₂(Λ), the inverse algebraic connectivity. On a disconnected graph, the
  largest over components of two peers or more (each component mixes on its own).
- χ₂ = ½·max over edges of R_ij = (e_i − e_j)ᵀ Λ⁺ (e_i − e_j), half the largest
  effective resistance of an edge (conductances λ_ij).

Methods:

- ``circulant``: a connected circulant graph (peer i joined to i ± d mod n for each
  offset d of a set, every edge of one offset at one rate: the ring, the complete graph,
  the exponential graph on 2^k peers) has the closed-form spectrum
  λ_k = Σ_{d ∈ N(0)} w_d·2·sin²(π·(k·d mod n)/n) over peer 0's neighbours N(0), and an
  edge (0, d) the resistance R_d = (1/n)·Σ_{k≥1} 4·sin²(π·(k·d mod n)/n)/λ_k. O(n·|N(0)|),
  exact to round-off, whatever n. (sin², not 1 − cos, which cancels for small k.)

Otherwise, per connected component of n peers:

- ``dense`` (n ≤ :data:`DENSE_MAX_PEERS`): one symmetric eigendecomposition gives λ₂
  and Λ⁺, hence every R_ij. O(n³).
- ``sparse`` (larger n): λ₂ by ``scipy.sparse.linalg.eigsh`` in shift-invert mode just
  below 0 (k = 2: the zero mode and λ₂); resistances by sparse LU solves of the grounded
  Laplacian (one node removed), R_ij = (e_i − e_j)ᵀ Λ_g⁻¹ (e_i − e_j), in blocks of
  :data:`SOLVE_BLOCK` right-hand sides. On vertex-transitive graphs (ring, torus,
  complete, exponential: every edge is the image of an edge at peer 0 under an
  automorphism that keeps the rates) only the edges at one peer are solved; otherwise
  every edge is.

Rates are scaled by a power of two (exact) so that the largest is in [½, 1) before
either method runs, and χ₁, χ₂ scaled back: they are 1/rate-homogeneous, and a tiny
rate (``1e-320``) would otherwise underflow λ₂ to 0. An edge whose rate is 0 (a rate
that underflowed in ``rate·(1/deg(i) + 1/deg(j))/2``, as ``5e-324`` does) never rings
and is left out; when none is left, χ₁ = χ₂ = ∞.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import eigsh, splu

from sim.core.sets import unique_ints

#: Largest component handled by a dense eigendecomposition.
DENSE_MAX_PEERS = 512
#: Right-hand sides per block of sparse resistance solves.
SOLVE_BLOCK = 256


@dataclass(frozen=True)
class GraphConstants:
    """χ₁ = 1/λ₂ (time units), χ₂ = ½·max edge resistance, and how they were computed."""

    chi1: float
    chi2: float
    method: str


def laplacian(edges: np.ndarray, rates: np.ndarray, n_peers: int) -> sp.csr_matrix:
    """Sparse Λ = Σ_e λ_e (e_i − e_j)(e_i − e_j)ᵀ for (E, 2) ``edges`` and (E,) ``rates``."""
    i, j = edges[:, 0], edges[:, 1]
    rows = np.concatenate((i, j, i, j))
    cols = np.concatenate((j, i, i, j))
    values = np.concatenate((-rates, -rates, rates, rates))
    return sp.csr_matrix((values, (rows, cols)), shape=(n_peers, n_peers))


def graph_constants(
    edges: np.ndarray,
    rates: np.ndarray,
    n_peers: int,
    transitive: bool = False,
    dense_max: int = DENSE_MAX_PEERS,
    closed_form: bool = True,
) -> GraphConstants:
    """χ₁ and χ₂ of the rate-weighted graph (NaN for both when it has no edge); a
    connected circulant graph in closed form unless ``closed_form`` is False.

    Edges with rate 0 are left out (``inf`` for both when every rate is 0: nothing
    mixes). χ₁ and χ₂ are computed on the rates scaled exactly to a largest in [½, 1),
    then divided by that scale: ``inf`` when the true value exceeds the largest float,
    never a division by zero.
    """
    if edges.shape[0] == 0:
        return GraphConstants(math.nan, math.nan, "no edges")
    ringing = rates > 0
    if not np.any(ringing):
        return GraphConstants(math.inf, math.inf, "rates 0")
    if not np.all(ringing):  # the graph is no longer the vertex-transitive one
        edges, rates, transitive = edges[ringing], rates[ringing], False
    scale = math.ldexp(1.0, math.frexp(float(rates.max()))[1])  # a power of two
    rates = rates / scale
    circulant = _circulant(edges, rates, n_peers) if closed_form else None
    if circulant is not None:
        return GraphConstants(circulant[0] / scale, circulant[1] / scale, "circulant")
    count, label = connected_components(laplacian(edges, rates, n_peers), directed=False)
    nodes_by = np.split(np.argsort(label, kind="stable"), np.cumsum(np.bincount(label))[:-1])
    edge_label = label[edges[:, 0]]
    edge_order = np.argsort(edge_label, kind="stable")
    edges_by = np.split(edge_order, np.cumsum(np.bincount(edge_label, minlength=count))[:-1])
    chi1, chi2, methods = 0.0, 0.0, set()
    for nodes, on in zip(nodes_by, edges_by, strict=True):
        if on.size == 0:
            continue
        local = np.searchsorted(nodes, edges[on])  # nodes is sorted: local indices
        lap = laplacian(local, rates[on], nodes.size)
        solve = local[np.any(local == 0, axis=1)] if transitive else local
        dense = nodes.size <= dense_max
        lambda2, resistance = (_dense if dense else _sparse)(lap, solve)
        chi1, chi2 = max(chi1, 1 / lambda2), max(chi2, resistance / 2)
        methods.add("dense" if dense else "sparse")
    # Python floats: an overflow gives inf, without numpy's RuntimeWarning
    return GraphConstants(chi1 / scale, chi2 / scale, "+".join(sorted(methods)))


def circulant_offsets(
    edges: np.ndarray, rates: np.ndarray, n: int
) -> list[tuple[int, float, int]] | None:
    """When the graph is circulant (every edge {i, i + d mod n} of an offset class
    {d, n − d} there exactly once, all at one rate), its classes as (d ≤ n/2, rate,
    peer 0's neighbours in the class: 2, or 1 for d = n/2); else None."""
    if n < 3 or edges.shape[0] == 0:
        return None
    i, j = edges[:, 0].astype(np.int64), edges[:, 1].astype(np.int64)
    forward = (j - i) % n
    offset = np.minimum(forward, n - forward)  # the class {d, n − d}, by its smaller
    if np.any(offset == 0):
        return None
    start = np.where(forward == offset, i, j)  # the edge is {start, start + offset}
    half = 2 * offset == n  # {i, i + n/2} is one edge for the starts i and i + n/2
    start = np.where(half, start % max(1, n // 2), start)
    counts = np.bincount(offset, minlength=n // 2 + 1)
    classes = np.flatnonzero(counts)
    want = np.where(2 * classes == n, n // 2, n)
    if not np.array_equal(counts[classes], want):
        return None
    if unique_ints(offset * n + start).size != edges.shape[0]:  # an edge twice
        return None
    order = np.argsort(offset, kind="stable")
    first = np.cumsum(counts[classes]) - counts[classes]
    by_class = rates[order]
    if not np.array_equal(by_class, np.repeat(by_class[first], counts[classes])):
        return None
    return [
        (d, rate, 1 if 2 * d == n else 2)
        for d, rate in zip(classes.tolist(), by_class[first].tolist(), strict=True)
    ]


def _circulant(edges: np.ndarray, rates: np.ndarray, n: int) -> tuple[float, float] | None:
    """(χ₁, χ₂) of a connected circulant graph in closed form (module docstring), on
    rates already scaled; None when the graph is not circulant or not connected."""
    classes = circulant_offsets(edges, rates, n)
    if classes is None:
        return None
    k = np.arange(1, n, dtype=np.int64)
    spectrum = np.zeros(n - 1)
    for d, rate, neighbours in classes:  # 1 − cos(2πkd/n) = 2·sin²(π·(kd mod n)/n)
        spectrum += (2.0 * neighbours * rate) * np.sin(np.pi * ((k * d) % n) / n) ** 2
    lambda2 = float(spectrum.min())
    if not lambda2 > 0:  # disconnected: the components' own spectra tell
        return None
    largest = 0.0  # R_d = R_{n−d}: one class, one sum
    for d, _, _ in classes:
        resistance = np.sum(4.0 * np.sin(np.pi * ((k * d) % n) / n) ** 2 / spectrum) / n
        largest = max(largest, float(resistance))
    return 1 / lambda2, largest / 2


def _dense(lap: sp.csr_matrix, edges: np.ndarray) -> tuple[float, float]:
    """(λ₂, largest resistance over ``edges``) from one eigendecomposition."""
    values, vectors = np.linalg.eigh(lap.toarray())
    inverse = np.zeros_like(values)
    inverse[1:] = 1 / values[1:]
    pinv = (vectors * inverse) @ vectors.T
    i, j = edges[:, 0], edges[:, 1]
    resistance = pinv[i, i] + pinv[j, j] - 2 * pinv[i, j]
    return float(values[1]), float(resistance.max())


def _sparse(lap: sp.csr_matrix, edges: np.ndarray) -> tuple[float, float]:
    """(λ₂, largest resistance over ``edges``) by shift-invert Lanczos and sparse LU."""
    n = lap.shape[0]
    lightest = float(-np.max(lap.data[lap.data < 0]))
    # any σ < 0 finds 0 and λ₂; |σ| below λ₂ ≥ 4·(lightest edge)/(n·diam) (Mohar) is fast
    shift = -0.1 * lightest / n**2
    # a fixed start vector: ARPACK's own (v0=None) comes from a generator whose state
    # persists across calls, so λ₂'s last bits would differ between runs of one process
    v0 = np.random.default_rng(n).standard_normal(n)
    values = eigsh(lap.tocsc(), k=2, sigma=shift, which="LM", return_eigenvectors=False, v0=v0)
    lambda2 = float(np.max(values))
    grounded = splu(lap[: n - 1, : n - 1].tocsc())
    largest = 0.0
    for start in range(0, edges.shape[0], SOLVE_BLOCK):
        block = edges[start : start + SOLVE_BLOCK]
        rhs = np.zeros((n, block.shape[0]))
        cols = np.arange(block.shape[0])
        rhs[block[:, 0], cols] += 1.0
        rhs[block[:, 1], cols] -= 1.0
        solved = grounded.solve(rhs[: n - 1])
        largest = max(largest, float(np.max(np.sum(rhs[: n - 1] * solved, axis=0))))
    return lambda2, largest
