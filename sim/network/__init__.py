"""Flow-level network model: latency, then max-min fair bandwidth sharing (network.md).

>>> from sim.network import FlowNetwork, FlowFailed, transfer_times
>>> transfer_times([(1e6, 1e6), (1e6, 1e6)], 0.5, [(0, 1, 2e6, 0.0)])
[2.5]

Modules: :mod:`~sim.network.routes` (resources and routes), :mod:`~sim.network.maxmin`
(the progressive-filling solver and its local recomputation), :mod:`~sim.network.flow`
(a :class:`Flow` and its phases), :mod:`~sim.network.flows` (the SimPy-integrated
:class:`FlowNetwork`) with its streams and latches (:mod:`~sim.network.streams`), its
bandwidth phase on the general path (:mod:`~sim.network.general`) or the compiled one
(:mod:`~sim.network.compiled`),
:mod:`~sim.network.standalone` (:func:`transfer_times`), :mod:`~sim.network.faults`.
"""

from sim.network.faults import FlowFailed, NetworkError
from sim.network.flows import Flow, FlowNetwork
from sim.network.maxmin import maxmin_rates
from sim.network.routes import LinkGraph
from sim.network.standalone import transfer_times

__all__ = [
    "Flow",
    "FlowFailed",
    "FlowNetwork",
    "LinkGraph",
    "NetworkError",
    "maxmin_rates",
    "transfer_times",
]
