"""numba caches the compiled loop (``_alone_jit.solve``) on disk, keyed on the source file
of :func:`sim.engine.netclock._alone_loop.solve` only (its time and size), not on the
files of the helpers it compiles in (:mod:`sim.engine.netclock._alone_fill`). The loop's
file carries the helpers' digest, so that a change to them changes the loop's file and
no stale compiled loop runs."""

from __future__ import annotations

import hashlib
import inspect

from sim.engine.netclock import _alone_fill, _alone_loop


def test_the_loops_file_carries_the_digest_of_its_helpers():
    source = inspect.getsourcefile(_alone_fill)
    assert source is not None
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    assert digest == _alone_loop.FILL_SOURCE_SHA256, (
        f"sim/engine/netclock/_alone_fill.py changed: set FILL_SOURCE_SHA256 = {digest!r} in "
        "sim/engine/netclock/_alone_loop.py (numba's cache of the loop keys on that file)"
    )
