"""Address tables (``sim.core.addresses``): what a kernel views through one is the
arrays' own memory, a table that does not fit its layout is refused when it is made, and
the compiled network core makes its table again whenever it replaces an array."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import simpy

from sim.core.addresses import address_table
from sim.core.optional import optional_module
from sim.network import FlowNetwork, compiled, flows

numba = pytest.importorskip("numba")
views: Any = optional_module("sim.core._addresses_jit")

RECORD = np.dtype([("x", "f8"), ("k", "i8")], align=True)
LAYOUT = ((RECORD, 1), (np.float64, 2), (np.bool_, 1))


@numba.njit
def _touch(tab: Any) -> float:
    """Reads one value of each array through its view and writes one."""
    rec, grid, flag = (
        views.view1(tab, 0, RECORD),
        views.view2(tab, 1, np.float64),
        views.view1(tab, 2, np.bool_),
    )
    total = rec[1].x + grid[2, 1] + (1.0 if flag[0] else 0.0)
    rec[0].k = 7
    grid[0, 2] = total
    flag[1] = True
    return total + rec.size + grid.shape[0] * 10 + grid.shape[1] * 100


def test_views_read_and_write_the_arrays_memory() -> None:
    rec = np.zeros(2, RECORD)
    rec[1]["x"] = 0.5
    grid = np.arange(12.0).reshape(3, 4)
    flag = np.array([True, False, False])
    tab = address_table((rec, grid, flag), LAYOUT)
    assert _touch(tab) == 0.5 + 9.0 + 1.0 + 2 + 30 + 400
    assert rec[0]["k"] == 7
    assert grid[0, 2] == 10.5
    assert flag.tolist() == [True, True, False]


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ((np.zeros(2, RECORD), np.zeros((3, 4)), np.zeros(3, np.int8)), "array 2 is int8"),
        ((np.zeros(2, RECORD), np.zeros(12), np.zeros(3, bool)), "array 1 is float64 with 1"),
        ((np.zeros(2, RECORD), np.zeros((4, 3)).T, np.zeros(3, bool)), "not C-ordered"),
        ((np.zeros(2, RECORD), np.zeros((3, 4)), np.zeros(6, bool)[::2]), "not C-ordered"),
        ((np.zeros(2, RECORD), np.zeros((3, 4))), "2 arrays for a layout of 3"),
    ],
)
def test_a_table_that_does_not_fit_its_layout_is_refused(arrays: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        address_table(arrays, LAYOUT)


def test_a_read_only_array_is_refused() -> None:
    frozen = np.zeros(3, bool)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="array 2 is not C-ordered and writeable"):
        address_table((np.zeros(2, RECORD), np.zeros((3, 4)), frozen), LAYOUT)


@pytest.mark.skipif(not compiled.available(), reason="numba not installed")
def test_the_compiled_core_tables_its_arrays_again_once_they_grow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Enough flows at once to grow the slots (64 at first) and the pool: the table then
    holds the new arrays' addresses, and the flows end when the closed form says."""
    monkeypatch.setattr(flows, "COMPILED_MIN_PEERS", 0)
    env = simpy.Environment()
    n = 200
    net = FlowNetwork(env, np.full(n, 1e6), np.full(n, 1e6), np.zeros(n))
    core = net._core
    assert isinstance(core, compiled.CompiledCore)
    before = core.tab.copy()
    sent = [net.send(i, (i + 1) % n, 1e5 * (1 + i % 3)) for i in range(n)]
    env.run()
    assert core.slots > 64
    arrays = (*core.st, core.keep, core.latch_of, core.due, core.when, core.quiet, core.entered)
    assert core.tab.tolist() == address_table(arrays, core.k.LAYOUT).tolist()
    assert core.tab[:, 0].tolist() != before[:, 0].tolist()
    assert [flow.end_s for flow in sent] == pytest.approx([0.1 * (1 + i % 3) for i in range(n)])
