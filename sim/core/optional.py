"""Modules that need an optional extra (``fast``: numba), imported on first use.

Every compiled kernel lives in a module of its own (``sim/kernels/_*_jit.py``,
``sim/network/_compiled_jit.py``) that imports numba at its top; the module that calls
it asks :func:`optional_module` for it and keeps its numpy or Python path when the answer
is None (numba missing, or its JIT disabled). A run that never needs a kernel never
imports numba.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType


@functools.cache
def optional_module(name: str) -> ModuleType | None:
    """Module ``name`` (imported once), or None when it does not import (numba missing)
    or numba's JIT is disabled (``NUMBA_DISABLE_JIT``): the kernels would then run as
    Python, hundreds of times slower, and those that take addresses
    (:mod:`sim.core._addresses_jit`) not at all, so a run takes the paths it takes
    without numba, which give the same results."""
    try:
        numba = importlib.import_module("numba")
        if numba.config.DISABLE_JIT:
            return None
        return importlib.import_module(name)
    except ImportError:
        return None
