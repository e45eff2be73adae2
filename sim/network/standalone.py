"""The network model on its own: completion times of a list of transfers.

It runs the very :class:`~sim.network.flows.FlowNetwork` the protocols use, in a fresh
SimPy environment, so it gives exactly the times they see; it is the model's unit of
truth and what the SimGrid cross-check compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import simpy

from sim.network.faults import NetworkError
from sim.network.flows import Flow, FlowNetwork
from sim.network.routes import LinkGraph

Transfer = tuple[int, int, float, float]


def transfer_times(
    hosts: Sequence[tuple[float, float]],
    latency: float | Any,
    transfers: Sequence[Transfer],
    sharing: str = "maxmin",
    links: LinkGraph | None = None,
) -> list[float]:
    """Completion time of every transfer.

    Parameters
    ----------
    hosts
        ``(upload_bytes_per_s, download_bytes_per_s)`` of each host; ``inf`` allowed.
    latency
        Route latency in seconds: a float, the route latency of *every* pair, or an
        ``(n, n)`` matrix of route latencies.
    transfers
        ``(src, dst, nbytes, start_s)`` each; transfers starting at the same instant
        are sent in list order.
    sharing, links
        As for :class:`~sim.network.flows.FlowNetwork`.

    Returns
    -------
    list of float
        Completion time of each transfer, seconds, in the order given.

    Examples
    --------
    >>> transfer_times([(1e6, 1e6), (1e6, 2e6)], 0.01, [(0, 1, 1e6, 0.0)])
    [1.01]
    """
    host_array = np.asarray(hosts, dtype=float)
    if host_array.ndim != 2 or host_array.shape[1] != 2:
        raise NetworkError("hosts", hosts, "a list of (upload, download) pairs in bytes/s")
    n = host_array.shape[0]
    latency_s = np.asarray(latency, dtype=float)
    if latency_s.ndim == 0:
        # half on each end: lat/2 + lat/2 == lat exactly in binary floating point
        latency_s = np.full(n, float(latency_s) / 2.0)
    env = simpy.Environment()
    net = FlowNetwork(env, host_array[:, 0], host_array[:, 1], latency_s, sharing, links)
    flows: list[Flow | None] = [None] * len(transfers)
    order = sorted(range(len(transfers)), key=lambda k: (_start(transfers, k), k))
    _Launcher(env, net, [(k, *transfers[k]) for k in order], flows)
    env.run()
    return [flow.end_s if flow is not None else float("nan") for flow in flows]


def _start(transfers: Sequence[Transfer], k: int) -> float:
    start_s = float(transfers[k][3])
    if not (0.0 <= start_s < float("inf")):
        raise NetworkError(f"transfers[{k}] start_s", transfers[k][3], "a finite time >= 0")
    return start_s


class _Launcher:
    """Sends the transfers at their start times with one pending SimPy event at a time.

    ``schedule`` holds ``(k, src, dst, nbytes, start_s)`` sorted by start time.
    """

    def __init__(
        self,
        env: simpy.Environment,
        net: FlowNetwork,
        schedule: list[tuple[int, int, int, float, float]],
        flows: list[Flow | None],
    ) -> None:
        self.env, self.net, self.schedule, self.flows = env, net, schedule, flows
        self.next = 0
        self._arm()

    def _arm(self) -> None:
        if self.next < len(self.schedule):
            delay = max(float(self.schedule[self.next][4]) - self.env.now, 0.0)
            simpy.Timeout(self.env, delay).callbacks.append(self._launch)

    def _launch(self, _: simpy.Event) -> None:
        now, schedule, send, flows = self.env.now, self.schedule, self.net.send, self.flows
        while self.next < len(schedule) and schedule[self.next][4] <= now:
            k, src, dst, nbytes, _start_s = schedule[self.next]
            flows[k] = send(src, dst, nbytes)
            self.next += 1
        self._arm()
