"""Who holds which training sample: the test hold-out and the split across peers.

The samples are shuffled once (the ``workload`` generator) and the first
⌈``test_fraction`` · N⌉ are held out for testing. The rest is split across the n peers
(every peer that will ever exist):

- ``shared``: every peer reads the whole training set (the A²CiD² paper's set-up:
  "every worker reads the whole dataset with its own shuffle");
- ``iid``: a random partition into n shares of equal size (±1);
- ``dirichlet``: label skew as in Hsu et al. (2019): for each class, proportions
  p ~ Dirichlet(α·1_n) over the peers, and the class's shuffled samples cut at the
  cumulative proportions. A peer left without a sample then takes one from the peer
  that has most (largest first, ties to the lowest index), so every peer has data.

A :class:`Layout` stores a split as one permutation of the training samples and each
peer's slice of it, so a minibatch for any set of peers is one vectorised gather.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Layout:
    """Peer i holds the training samples ``order[start[i] : start[i] + size[i]]``.

    ``order`` is (N_held,) int64 sample indices, ``start`` and ``size`` are (n,) int64.
    """

    order: np.ndarray
    start: np.ndarray
    size: np.ndarray

    @classmethod
    def shared(cls, n_samples: int, n_peers: int) -> Layout:
        """Every peer holds all ``n_samples`` samples."""
        zeros = np.zeros(n_peers, dtype=np.int64)
        return cls(np.arange(n_samples, dtype=np.int64), zeros, zeros + n_samples)

    @classmethod
    def from_owner(cls, owner: np.ndarray, n_peers: int) -> Layout:
        """Each sample held by one peer: ``owner`` ((N,) int) gives whose it is."""
        order = np.argsort(owner, kind="stable").astype(np.int64)
        size = np.bincount(owner, minlength=n_peers).astype(np.int64)
        start = np.concatenate(([0], np.cumsum(size)[:-1])).astype(np.int64)
        return cls(order, start, size)

    def draw(self, rng: np.random.Generator, rows: np.ndarray, batch: int) -> np.ndarray:
        """(k, batch) sample indices: a minibatch for each of peers ``rows``, drawn
        uniformly with replacement from the peer's share (one ``rng.random`` call)."""
        u = rng.random((rows.size, batch))
        pos = (u * self.size[rows, None]).astype(np.int64)
        return self.order[self.start[rows, None] + pos]

    def padded(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every sample of peers ``rows``: (k, m) indices, m the largest share, padded
        with the peer's first sample, and (k, m) weights 1/size (0 on padding)."""
        size = self.size[rows, None]
        pos = np.arange(int(self.size[rows].max(initial=1)))[None, :]
        inside = pos < size
        index = self.order[self.start[rows, None] + np.where(inside, pos, 0)]
        return index, inside / size

    def sample_weights(self, n_samples: int) -> np.ndarray:
        """(n_samples,) weights c_j with Σ_j c_j ℓ_j = (1/n) Σ_i f_i: each share counts
        1/n, each of its samples 1/(n·size_i)."""
        n = self.size.size
        if np.array_equal(self.order, np.arange(n_samples)) and np.all(self.size == n_samples):
            return np.full(n_samples, 1.0 / n_samples)
        owner = np.repeat(np.arange(n), self.size)
        weights = np.zeros(n_samples)
        np.add.at(weights, self.order, 1.0 / (n * self.size[owner]))
        return weights


def holdout(
    n_samples: int, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) sample indices: a shuffle, the first ⌈fraction·N⌉ held out."""
    perm = rng.permutation(n_samples)
    n_test = math.ceil(test_fraction * n_samples)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def iid_owner(n_samples: int, n_peers: int, rng: np.random.Generator) -> np.ndarray:
    """(n_samples,) owners: a random partition into n_peers shares of equal size (±1)."""
    owner = np.empty(n_samples, dtype=np.int64)
    owner[rng.permutation(n_samples)] = np.arange(n_samples) * n_peers // n_samples
    return owner


def dirichlet_owner(
    labels: np.ndarray, classes: int, n_peers: int, alpha: float, rng: np.random.Generator
) -> np.ndarray:
    """(N,) owners of a label-skewed split (see the module doc); every peer gets at
    least one sample (needs N ≥ n_peers)."""
    owner = np.empty(labels.size, dtype=np.int64)
    for c in range(classes):
        members = rng.permutation(np.flatnonzero(labels == c))
        p = rng.dirichlet(np.full(n_peers, alpha))
        cuts = np.floor(np.cumsum(p) * members.size).astype(np.int64)
        counts = np.diff(np.concatenate(([0], np.minimum(cuts, members.size))))
        counts[-1] += members.size - counts.sum()
        owner[members] = np.repeat(np.arange(n_peers), counts)
    return _fill_empty(owner, n_peers)


def _fill_empty(owner: np.ndarray, n_peers: int) -> np.ndarray:
    """Give each peer without a sample one sample of the peer that has most."""
    size = np.bincount(owner, minlength=n_peers)
    empty = np.flatnonzero(size == 0)
    if empty.size == 0:
        return owner
    shares = np.split(np.argsort(owner, kind="stable"), np.cumsum(size)[:-1])
    held = {p: shares[p].tolist() for p in np.flatnonzero(size).tolist()}
    heap = [(-int(size[p]), p) for p in held]
    heapq.heapify(heap)
    for peer in empty.tolist():
        count, donor = heapq.heappop(heap)
        owner[held[donor].pop()] = peer
        heapq.heappush(heap, (count + 1, donor))
    return owner


__all__ = ["Layout", "dirichlet_owner", "holdout", "iid_owner"]
