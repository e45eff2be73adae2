"""The network's closed forms, SimPy-API and shared-link tests again, on the compiled path.

The test functions are imported from their modules and collected here a second time,
with every :class:`~sim.network.FlowNetwork` (and :func:`~sim.network.transfer_times`)
taking the compiled path whatever its size.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from sim.network import FlowNetwork, compiled, flows
from tests.integration.test_shared_links import *  # noqa: F403
from tests.unit.test_network_closed_forms import *  # noqa: F403
from tests.unit.test_network_simpy_api import *  # noqa: F403

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba not installed")


@pytest.fixture(autouse=True)
def _compiled_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flows, "COMPILED_MIN_PEERS", 0)


def test_networks_here_take_the_compiled_path() -> None:
    net = FlowNetwork(simpy.Environment(), np.ones(2), np.ones(2), np.zeros(2))
    assert net.solver == "compiled"
