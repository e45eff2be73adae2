"""When a decaying variance first falls below a threshold between two events.

Between events a set's variance is a quadratic in u = e^(−ρ(t − T)) (see
:mod:`sim.engine.observe.moments`): n·dim·var(u) = α − 2βu + γu², with γ ≥ 0 and u decreasing
in time. The variance is below θ exactly where q(u) = γu² − 2βu + (α − θ·n·dim) < 0: an
open interval of u (a line when γ = 0). Going forward in time from u_hi down to u_lo,
the first crossing is where that interval is entered: its upper end, or u_hi itself when
the interval already contains it. The functions work elementwise on numpy arrays (many
intervals at once) as well as on floats.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: Relative slack on u_lo: a crossing found a rounding past the interval's end (a timer
#: set at a predicted crossing fires at that time up to one rounding) still counts.
U_TOLERANCE = 1e-12


def negative_interval(alpha: Any, beta: Any, gamma: Any, level: Any) -> tuple[Any, Any]:
    """(lower, upper) ends of the open interval where γu² − 2βu + (α − level) < 0;
    ±inf for unbounded ends, (NaN, NaN) when it is nowhere negative."""
    alpha, beta, gamma, level = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (alpha, beta, gamma, level))
    )
    c = alpha - level
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        disc = beta * beta - gamma * c
        root = np.sqrt(np.where(disc > 0, disc, np.nan))
        big = beta + np.copysign(root, beta)  # stable roots: big/γ and c/big
        first, second = big / gamma, c / big
        lower = np.where(gamma > 0, np.minimum(first, second), np.nan)
        upper = np.where(gamma > 0, np.maximum(first, second), np.nan)
        line_root = c / (2 * beta)  # −2βu + c < 0 above it (β > 0) or below it (β < 0)
        flat = gamma <= 0
        lower = np.where(flat & (beta > 0), line_root, lower)
        upper = np.where(flat & (beta > 0), np.inf, upper)
        lower = np.where(flat & (beta < 0), -np.inf, lower)
        upper = np.where(flat & (beta < 0), line_root, upper)
        constant = flat & (beta == 0) & (c < 0)
        lower = np.where(constant, -np.inf, lower)
        upper = np.where(constant, np.inf, upper)
    return lower, upper


def first_crossing(
    alpha: Any, beta: Any, gamma: Any, level: Any, u_hi: Any, u_lo: Any
) -> np.ndarray:
    """u of the first crossing below ``level`` (= θ·n·dim) as u goes from ``u_hi`` down
    to ``u_lo``, or NaN when there is none in between."""
    lower, upper = negative_interval(alpha, beta, gamma, level)
    u_hi = np.asarray(u_hi, dtype=float)
    u_lo = np.asarray(u_lo, dtype=float)
    with np.errstate(invalid="ignore"):
        meets = (upper >= u_lo * (1 - U_TOLERANCE)) & (lower < u_hi) & (lower < upper)
        return np.where(meets, np.minimum(upper, u_hi), np.nan)


def first_crossing_at(
    alpha: float, beta: float, gamma: float, level: float, u_hi: float, u_lo: float
) -> float:
    """:func:`first_crossing` for one interval, in Python floats (an event's cost);
    NaN when there is none."""
    c = alpha - level
    if gamma > 0:
        disc = beta * beta - gamma * c
        if not disc > 0:
            return math.nan
        big = beta + math.copysign(math.sqrt(disc), beta)
        first, second = big / gamma, (c / big if big else math.nan)
        lower, upper = min(first, second), max(first, second)
    elif beta > 0:
        lower, upper = c / (2 * beta), math.inf
    elif beta < 0:
        lower, upper = -math.inf, c / (2 * beta)
    elif c < 0:
        lower, upper = -math.inf, math.inf
    else:
        return math.nan
    if upper >= u_lo * (1 - U_TOLERANCE) and lower < u_hi and lower < upper:
        return min(upper, u_hi)
    return math.nan


def time_of(u: float, reference_s: float, rate: float) -> float:
    """The time at which e^(−rate·(t − reference)) = u (inf for u ≤ 0)."""
    return reference_s - math.log(u) / rate if u > 0 else math.inf


__all__ = ["first_crossing", "negative_interval", "time_of"]
