"""Closed-form segments grow with the number of peers (protocols/_solo_exchanges/).

An exchange in flight where a segment ends (a straddler) goes out as two real flows,
which cost ~250 times a closed-form exchange. There are about as many straddlers at a
segment's end as exchanges in flight, a number ∝ N, so a segment of a fixed (or capped)
number of rings puts a share ∝ N of the exchanges on the general path: N² flows in all.
With segments of ``segment_rings(N)`` ∝ N rings the share stays put as N grows.
"""

from __future__ import annotations

from typing import Any

import pytest

import sim
from protocols._solo_exchanges import settings
from protocols._solo_exchanges.process import SoloExchanges


def straddler_share(monkeypatch: pytest.MonkeyPatch, peers: int) -> float:
    """Exchanges sent as flows ÷ all exchanges, over samples far apart (20 s: ~10 rings a
    peer, more than a segment holds, so the segment length decides)."""
    sent = 0
    send = SoloExchanges.send

    def counted(self: SoloExchanges, *args: Any) -> None:
        nonlocal sent
        sent += 1
        send(self, *args)

    monkeypatch.setattr(SoloExchanges, "send", counted)
    mapping = {
        "name": "segments",
        "clock": "network",
        "peers": {"count": peers, "upload": "100 Mbit/s", "download": "100 Mbit/s",
                  "latency": "10 ms"},
        "vector": {"dim": 2, "dtype": "float64"},
        "protocol": {"name": "pairwise_gossip", "topology": "ring"},
        "stop": {"max_time": 40.0, "max_rounds": None, "target_var": 0},
        "metrics": {"every": 20.0},
    }  # fmt: skip
    result = sim.run(sim.scenario_from_mapping(mapping))
    monkeypatch.undo()
    return sent / result.summary["exchanges"]


def test_segments_hold_more_rings_with_more_peers():
    small = settings.segment_rings(settings.SEGMENT_PEERS)
    assert small == settings.SEGMENT_RINGS
    assert settings.segment_rings(1) == settings.SEGMENT_RINGS
    assert settings.segment_rings(100 * settings.SEGMENT_PEERS) == 100 * small


def test_the_share_of_exchanges_sent_as_flows_does_not_grow_with_the_peers(monkeypatch):
    # 8 × 8192 peers: with segments capped at 4 × 2^16 rings this share doubled
    few = straddler_share(monkeypatch, settings.SEGMENT_PEERS)
    many = straddler_share(monkeypatch, 8 * settings.SEGMENT_PEERS)
    assert 0 < few < 0.01
    assert many < 1.3 * few, (few, many)
