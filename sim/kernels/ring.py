"""Ring all-reduce through a compressing wire, hop by hop.

Members m_0 … m_{n−1} in ring order; the vector is cut into n chunks (chunk c has
``counts[c]`` consecutive coordinates). Reduce-scatter: chunk c leaves member c, and
each of the next n − 1 members adds its own exact values to the partial sum it received
(dequantized) and sends it on, quantized again; member c − 1 ends with the chunk's sum
and divides it by n. All-gather: that member keeps the exact mean and sends it once,
quantized; the others forward the same bytes, so every other member ends with the same
dequantized mean. On an exact wire every member ends with the exact mean, as
:func:`sim.kernels.group_mean` (up to the order of the additions).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.kernels._xp import namespace, take_rows
from sim.kernels.compression import WireLike, as_wire
from sim.kernels.mixing import replace_rows


def ring_reduce(
    x: Any, members: np.ndarray, counts: np.ndarray, wire: WireLike
) -> tuple[Any, np.ndarray]:
    """One ring all-reduce of ``members`` with every message through ``wire``.

    Parameters
    ----------
    x
        (n_peers, dim) floating array; numpy arrays are updated in place.
    members
        (n,) host rows in ring order, n ≥ 2.
    counts
        (n,) host ints summing to dim: coordinates of each chunk.
    wire
        How every message travels (a :class:`~sim.kernels.compression.Wire` or its name).

    Returns
    -------
    x
        The updated array (``x`` itself for numpy).
    shift
        (dim,) float64: Σ over members of (new − old) (the move of the global sum).
    """
    xp, wire = namespace(x), as_wire(wire)
    n, dim = int(members.size), int(x.shape[1])
    old = take_rows(xp, x, members)
    flat = xp.reshape(old, (-1,))
    stops = np.cumsum(counts)
    starts = stops - counts
    mean_vec, sent_vec = [None] * n, [None] * n
    for length in np.unique(counts).tolist():
        if length == 0:
            continue
        chunks = np.flatnonzero(counts == length)  # every hop: one message per chunk
        cols = starts[chunks][:, None] + np.arange(length)[None, :]

        def own(k: int, chunks: np.ndarray = chunks, cols: np.ndarray = cols) -> Any:
            rows = (chunks + k) % n  # the member that holds each chunk after k hops
            index = (rows[:, None] * dim + cols).reshape(-1)
            return xp.reshape(xp.take(flat, xp.asarray(index, device=_device(x))), cols.shape)

        partial = own(0)
        for k in range(1, n):
            partial = wire.receive(partial) + own(k)
        mean = partial / n
        sent = wire.receive(mean)
        for row, chunk in enumerate(chunks.tolist()):
            mean_vec[chunk], sent_vec[chunk] = mean[row, :], sent[row, :]
    present = [c for c in range(n) if mean_vec[c] is not None]
    means = xp.concat([mean_vec[c] for c in present])
    sents = xp.concat([sent_vec[c] for c in present])
    owns = np.zeros((n, dim), dtype=bool)  # member (c − 1) mod n keeps chunk c's exact mean
    for c in present:
        owns[(c - 1) % n, int(starts[c]) : int(stops[c])] = True
    new = xp.where(xp.asarray(owns, device=_device(x)), means[None, :], sents[None, :])
    return replace_rows(x, members, old, xp.astype(new, x.dtype))


def _device(x: Any) -> Any:
    from array_api_compat import device

    return device(x)
