"""numba build of :func:`sim.kernels.solo_plan.plan_rings`; needs the extra ``fast``.

Importing this module imports numba. ``fastmath`` stays off: every addition and
comparison is the IEEE operation the Python function does, in its order.
"""

from __future__ import annotations

import numba

from sim.kernels import solo_plan

plan_rings = numba.njit(cache=True, nogil=True)(solo_plan.plan_rings)
