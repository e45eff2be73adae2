"""Pure array kernels: the arithmetic of every averaging step.

Functions over ``(n_peers, dim)`` arrays on any array-API backend (numpy, CuPy,
``array_api_strict``); the "who with whom" comes in as host-side numpy index arrays
built by the protocols. No SimPy, no I/O, no randomness. numpy inputs are updated in
place (always use the returned array); other backends get new arrays with bit-identical
values.

| kernel | update |
| --- | --- |
| :func:`group_mean` | each member of a group ← the group's (weighted) mean |
| :func:`neighbour_mean` | x_i ← x_i + Σ_k w_ik (x_{n_ik} − x_i) (row-stochastic, ELL table) |
| :func:`ell_mix` | y = W x for a general sparse W in ELL form (push-sum) |
| :func:`pairwise_delta` | x_i −= (s_i − s_j)/2, x_j += (s_i − s_j)/2 for disjoint pairs |
"""

from sim.kernels.grouped import assign_groups, group_mean, group_means
from sim.kernels.groups import Groups
from sim.kernels.neighbours import ell_mix, neighbour_mean
from sim.kernels.pairwise import pairwise_delta

__all__ = [
    "Groups",
    "assign_groups",
    "ell_mix",
    "group_mean",
    "group_means",
    "neighbour_mean",
    "pairwise_delta",
]
