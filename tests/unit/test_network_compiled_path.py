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


def test_hot_kernels_are_called_through_their_entry_point_once_compiled() -> None:
    """After the first call of each, the per-event kernels skip numba's dispatcher; the
    run's completion times are those of the general path (closed forms above)."""
    env = simpy.Environment()
    net = FlowNetwork(env, np.full(4, 1e6), np.full(4, 1e6), np.zeros(4))
    core = net._core
    assert isinstance(core, compiled.CompiledCore)
    first = net.send(0, 1, 1e5, keep=True)
    env.run(first.done)
    net.resume(first, 2e5)
    env.run()
    for name in ("enter_one", "pop_chain", "refill"):
        call = getattr(core, f"_{name}")
        assert call is not getattr(core.k, name), name
        assert call is getattr(core.k, name).get_overload(getattr(core.k, name).signatures[0])
    assert net.flows_completed == 2
    assert env.now == pytest.approx(0.3)  # 1e5 then 2e5 bytes at 1e6 B/s, no latency


def test_direct_keeps_the_dispatcher_without_exactly_one_signature() -> None:
    class Kernel:
        def __init__(self, signatures: list[str]) -> None:
            self.signatures = signatures

        def get_overload(self, signature: str) -> str:
            return f"entry {signature}"

    for signatures in ([], ["a", "b"]):
        kernel = Kernel(signatures)
        assert compiled.direct(kernel) is kernel
    assert compiled.direct(Kernel(["a"])) == "entry a"
    plain = lambda: None  # noqa: E731  (a kernel under NUMBA_DISABLE_JIT: no signatures)
    assert compiled.direct(plain) is plain
