"""numba loop of :mod:`sim.kernels.bounds`; needs the extra ``fast``. Importing this
module imports numba."""

from __future__ import annotations

from typing import Any

import numba


@numba.njit(cache=True, nogil=True)
def all_within(flat: Any, bound: float) -> bool:
    """True when |v| ≤ ``bound`` for every v of the 1-D ``flat`` (False at a NaN): one
    pass, no early exit, so that the loop vectorises."""
    ok = True
    for k in range(flat.size):
        ok &= abs(flat[k]) <= bound
    return ok
