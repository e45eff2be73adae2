"""Modules that need an optional extra (``fast``: numba), imported on first use.

Every compiled kernel lives in a module of its own (``sim/kernels/_*_jit.py``,
``sim/network/_compiled_jit.py``) that imports numba at its top; the module that calls
it asks :func:`optional_module` for it and keeps its numpy or Python path when the answer
is None. A run that never needs a kernel never imports numba.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType


@functools.cache
def optional_module(name: str) -> ModuleType | None:
    """Module ``name`` (imported once), or None when it does not import (numba missing)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
