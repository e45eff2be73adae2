"""numba's compilation of :mod:`sim.engine.netclock._alone_loop` (the same source, the
same floats); needs the extra ``fast``.

``fastmath`` stays off, so every operation is the IEEE one Python does, in the order
written there; :func:`solve` calls :func:`~sim.engine.netclock._alone_loop.rerate`,
:func:`~sim.engine.netclock._alone_loop.enter` and
:func:`~sim.engine.netclock._alone_loop.leave`, which numba compiles with it
(``register_jitable``: they stay Python functions too).
"""

from __future__ import annotations

import numba
from numba.extending import register_jitable

from sim.engine.netclock import _alone_loop

for helper in (_alone_loop.rerate, _alone_loop.enter, _alone_loop.leave):
    register_jitable(helper)

#: :func:`sim.engine.netclock._alone_loop.solve`, compiled (on first use, cached on disk)
solve = numba.njit(cache=True, nogil=True)(_alone_loop.solve)
