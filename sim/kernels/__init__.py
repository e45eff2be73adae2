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
| :func:`exchange_differences` | d_i = s_i − Q(s_j), d_j = Q(s_i) − s_j: what each end applies |
| :func:`move_pairs` | x_i −= c·d_i, x_j += c·d_j for disjoint pairs |
| :func:`a2cid2_mix` | (x, x̃) ← (x + c(x̃ − x), x̃ − c(x̃ − x)): A²CiD²'s closed-form mixing |
| :func:`a2cid2_exchange` | mix both ends, then x ∓= m/2, x̃ ∓= α̃·m (m = x_i − x_j) |
| :func:`push_half` | x_s ← x_s/2, x_t += x_s/2 for disjoint (sender, target) pairs |

Kernels that send vectors take a :class:`~sim.kernels.compression.Wire` (Q above: the
values a receiver decodes; the identity by default).
"""

from sim.kernels.grouped import assign_groups, group_mean, group_means
from sim.kernels.groups import Groups
from sim.kernels.mixing import a2cid2_exchange, a2cid2_mix, mix_coefficient
from sim.kernels.neighbours import ell_mix, neighbour_mean
from sim.kernels.pairwise import exchange_differences, move_pairs, pairwise_delta
from sim.kernels.push import push_half

__all__ = [
    "Groups",
    "a2cid2_exchange",
    "a2cid2_mix",
    "assign_groups",
    "ell_mix",
    "exchange_differences",
    "group_mean",
    "group_means",
    "mix_coefficient",
    "move_pairs",
    "neighbour_mean",
    "pairwise_delta",
    "push_half",
]
