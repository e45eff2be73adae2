"""Tables of array addresses, for compiled kernels called often with many arrays.

Calling a numba kernel converts each array argument (~30 ns an array): a kernel that
takes a network's fifteen state arrays spends ~0.5 µs a call on that alone, more than
many of its calls compute. Such a kernel takes one :func:`address_table` of its arrays
instead, and views them through it (:mod:`sim.core._addresses_jit`): ~0.1 µs a call.

The table holds raw addresses, valid in the process that made it (a forked child has
the same addresses; a copy or a pickle of the arrays has not: make the table again).
Its owner keeps the arrays alive and makes the table again whenever it replaces one of
them (a grown array is a new array). The layout each kernel expects is checked here,
when the table is made, since a view of the wrong dtype or shape would read memory as
something it is not.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: A table's columns: each array's address, its length and (2-D) its row length.
ADDRESS, ROWS, COLUMNS = 0, 1, 2


def address_table(
    arrays: Sequence[np.ndarray], layout: Sequence[tuple[np.dtype, int]]
) -> np.ndarray:
    """(len(arrays), 3) int64: the address and shape of each array, each checked against
    ``layout`` (its dtype and number of dimensions, 1 or 2): C-ordered and writeable, as
    the kernel's views (``view1``, ``view2``) assume."""
    if len(arrays) != len(layout):
        raise ValueError(f"address_table: {len(arrays)} arrays for a layout of {len(layout)}")
    table = np.zeros((len(arrays), 3), dtype=np.int64)
    for k, (array, (dtype, ndim)) in enumerate(zip(arrays, layout, strict=True)):
        if array.dtype != dtype or array.ndim != ndim:
            raise TypeError(
                f"address_table: array {k} is {array.dtype} with {array.ndim} dimensions, "
                f"expected {np.dtype(dtype)} with {ndim}"
            )
        if not (array.flags.c_contiguous and array.flags.writeable):
            raise ValueError(f"address_table: array {k} is not C-ordered and writeable")
        table[k, ADDRESS] = array.ctypes.data
        table[k, ROWS] = array.shape[0]
        table[k, COLUMNS] = array.shape[1] if ndim == 2 else 1
    return table
