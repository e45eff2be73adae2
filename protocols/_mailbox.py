"""What gossip and sgp share under ``schedule: async`` (asynchronous SGP,
:class:`~protocols.base.MailboxProtocol`): one peer's snapshot, mixing and push-sum
shares, row by row (``state.x`` is updated in place)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from protocols.contract import State
from sim.kernels._xp import namespace
from sim.kernels.compression import Wire


def snapshot(state: State, peer: int, wire: Wire) -> Any:
    """Q(x_peer), a copy of ``peer``'s row as its receivers decode it."""
    row = state.x[peer, ...]
    return namespace(state.x).asarray(wire.receive(row), copy=True)


def mix_row(state: State, peer: int, terms: Iterable[tuple[float, Any]]) -> None:
    """x_i ← x_i + Σ w (v − x_i) over ``terms`` (weight, value), all with the old x_i."""
    old = state.x[peer, ...]
    step = None
    for weight, value in terms:
        term = weight * (value - old)
        step = term if step is None else step + term
    if step is not None:
        state.x[peer, ...] = old + step


def take_shares(state: State, peer: int, sent: int, slots: int, wire: Wire) -> Any:
    """Push-sum: ``peer`` sends 1/(slots+1) of (x, w) to each of ``sent`` receivers and
    keeps the rest; the payload (share of x, its decoded copy, share of w)."""
    x, w = state.x, state.extra["w"]
    share_x = x[peer, ...] / (slots + 1.0)
    share_w = w[peer, ...] / (slots + 1.0)
    x[peer, ...] = x[peer, ...] - sent * share_x
    w[peer, ...] = w[peer, ...] - sent * share_w
    return share_x, wire.receive(share_x), share_w


def add_share(state: State, peer: int, x_share: Any, w_share: Any) -> None:
    """Push-sum: ``peer`` receives (or gets back) a share."""
    state.x[peer, ...] = state.x[peer, ...] + x_share
    state.extra["w"][peer, ...] = state.extra["w"][peer, ...] + w_share
