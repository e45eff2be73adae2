"""numba's compilation of :mod:`sim.engine.netclock._alone_loop` (the same source, the
same floats); needs the extra ``fast``.

``fastmath`` stays off, so every operation is the IEEE one Python does, in the order
written there; :func:`solve` calls the helpers of
:mod:`sim.engine.netclock._alone_fill` (its rates), which numba compiles with it
(``register_jitable``: they stay Python functions too). The small ones that run at every
flow's entry and exit are inlined, which saves their calls' reference counting (~12 % of
the M1 round's loop); inlining :func:`~sim.engine.netclock._alone_fill.rerate` as well
gained nothing more and took the first compilation from 22 to 37 s (stop 43).
"""

from __future__ import annotations

import numba
from numba.extending import register_jitable

from sim.engine.netclock import _alone_fill, _alone_loop

for helper in (_alone_fill.fill_state, _alone_fill.rerate):
    register_jitable(helper)
for small in (_alone_fill.mark, _alone_fill.enter, _alone_fill.leave):  # called often
    register_jitable(inline="always")(small)

#: :func:`sim.engine.netclock._alone_loop.solve`, compiled (on first use, cached on disk)
solve = numba.njit(cache=True, nogil=True)(_alone_loop.solve)
