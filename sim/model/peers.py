"""Resolve the per-peer values of a scenario into a table (one row per peer).

Values are constants, distributions sampled from the run's ``peers`` generator, or
classes (fractions → whole counts by largest remainder; class membership shuffled over
peer indices so that a class is not a contiguous block of a ring).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.core.errors import ScenarioError
from sim.core.fields import PeerDist, dist_to_plain
from sim.model.scenario.models import Peers, peer_value_fields

COLUMNS = {
    "upload": "upload_bytes_per_s",
    "download": "download_bytes_per_s",
    "latency": "latency_s",
    "compute": "compute",
    "delay": "delay_s",
}


def largest_remainder(fractions: list[float], total: int) -> np.ndarray:
    """Whole counts summing to ``total`` proportional to ``fractions`` (Hamilton's method)."""
    quotas = np.asarray(fractions, dtype=np.float64) * total
    counts = np.floor(quotas).astype(np.int64)
    order = np.argsort(-(quotas - counts), kind="stable")
    counts[order[: total - counts.sum()]] += 1
    return counts


def resolve_peers(peers: Peers, rng: np.random.Generator, n: int | None = None) -> pd.DataFrame:
    """The per-peer table: ``peer, class, client`` and one column per value in SI units.

    ``n`` (default ``peers.count``) is the number of peers that will ever exist: more
    than ``peers.count`` when peers join during the run (``churn.joins``).
    """
    n = peers.count if n is None else n
    class_of = _assign_classes(peers, rng, n)
    table = {"peer": np.arange(n), "class": class_of, "client": np.zeros(n, dtype=bool)}
    for field in peer_value_fields():
        values = _draw(getattr(peers, field), rng, n, f"peers.{field}")
        for k, peer_class in enumerate(peers.classes or []):
            override = getattr(peer_class, field)
            members = class_of == k
            if override is not None and members.any():
                key = f"peers.classes.{k}.{field}"
                values[members] = _draw(override, rng, int(members.sum()), key)
        table[COLUMNS[field]] = values
    for k, peer_class in enumerate(peers.classes or []):
        table["client"][class_of == k] = peer_class.client
    return pd.DataFrame(table)


def _draw(dist: PeerDist, rng: np.random.Generator, n: int, key: str) -> np.ndarray:
    """``dist.sample(rng, n)``; a distribution whose draws overflow (a lognormal median
    near the largest float) is refused, naming ``key``, rather than giving peers
    infinite values (constants are taken as written)."""
    with np.errstate(over="ignore", invalid="ignore"):
        values = dist.sample(rng, n)
    if dist.kind != "const" and not np.isfinite(values).all():
        raise ScenarioError(
            key, dist_to_plain(dist), "a distribution whose draws are finite (lower its scale)"
        )
    return values


def _assign_classes(peers: Peers, rng: np.random.Generator, n: int) -> np.ndarray:
    if not peers.classes:
        return np.zeros(n, dtype=np.int64)
    counts = largest_remainder([c.fraction for c in peers.classes], n)
    return rng.permutation(np.repeat(np.arange(len(counts)), counts))
