"""numba views of the arrays of an address table (:mod:`sim.core.addresses`); needs
the extra ``fast``.

A view is a ``numba.carray`` over the array's memory: no reference is taken, so the
table's owner keeps the arrays alive while a kernel runs (it holds them). Views are
plain C-ordered arrays in numba: the kernels' code is the same as on the arrays
themselves, and so is every number it computes.
"""

from __future__ import annotations

from typing import Any

import numba
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from sim.core.addresses import ADDRESS, COLUMNS, ROWS


def _pointer_of(typingctx: Any, address: Any) -> Any:
    """The int64 ``address`` as a pointer (LLVM ``inttoptr``)."""
    signature = types.voidptr(types.int64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return signature, codegen


#: ``_pointer(address)`` in compiled code (the intrinsic takes the typing context first)
_pointer: Any = intrinsic(_pointer_of)


@numba.njit(cache=True, nogil=True, inline="always")
def view1(table: Any, k: int, dtype: Any) -> Any:
    """The 1-D array of ``dtype`` in row k of ``table``."""
    return numba.carray(_pointer(table[k, ADDRESS]), (table[k, ROWS],), dtype)


@numba.njit(cache=True, nogil=True, inline="always")
def view2(table: Any, k: int, dtype: Any) -> Any:
    """The 2-D (C-ordered) array of ``dtype`` in row k of ``table``."""
    return numba.carray(_pointer(table[k, ADDRESS]), (table[k, ROWS], table[k, COLUMNS]), dtype)
