"""A finished round's book-keeping is freed when it ends, not at the next full collection.

A round of the network clock (``RoundState``) holds lists of ~300 B per planned flow, a
group's plan (``GroupPlan``) its flows' arrays and its butterfly. Both were held by
reference cycles, which reference counting cannot free: the round's latch callbacks
(``take_latches``) are partials holding the round; moshpit's ``settle`` held the plan
holding it; the engine's record of a group (held by the group it holds) kept the plan. An
async swarm's many groups then piled up dead rounds and plans until the garbage
collector's next full pass, which the engine's raised thresholds make rare: 256 peers
with a 1 GB wire held ~250 dead rounds and 1.4 GiB resident after 30 simulated minutes,
0.86 GiB once the round's callbacks are dropped when it ends.

Flows hold those callbacks too (``Flow.quiet``, ``Flow.loud``): a failed flow is in a
cycle of its own (its ``done`` event holds a ``FlowFailed`` holding the flow), and a
stream's piece that ended quietly stays in its round's ``open`` table. Both pinned the
whole round until a full collection: the R1 swarm (1 GB wire, churn) held up to 28 dead
rounds at 256 peers, ~45 % of the live rounds' flows, so that the hour at 1024 peers
peaked above the memory estimate. An ended flow now drops both callbacks.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

import protocols.moshpit
import sim
from sim.engine.netclock.round_state import RoundState
from sim.network import compiled
from sim.network.flows import COMPILED_MIN_PEERS

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba not installed")


CHURN = {"model": "exponential", "mtbf": "40 s", "mttr": "10 s"}


@pytest.mark.parametrize("alone", [False, True], ids=["on the events", "alone"])
@pytest.mark.parametrize("churn", [{"model": "none"}, CHURN], ids=["no churn", "churn"])
def test_finished_rounds_and_plans_are_freed_without_the_collector(
    monkeypatch: Any, churn: dict[str, str], alone: bool
) -> None:
    """On the clock's events (``network.groups_alone: false``) and alone (no round: the
    plans, and the loop's arrays the groups' components hold)."""
    finished: list[weakref.ref[Any]] = []
    give_back = RoundState.give_back_latches

    def recording(self: Any, net: Any) -> None:
        give_back(self, net)
        finished.append(weakref.ref(self))

    monkeypatch.setattr(RoundState, "give_back_latches", recording)
    plans: list[weakref.ref[Any]] = []
    settled: list[bool] = []
    group_plan = protocols.moshpit.Moshpit.group_plan

    def planning(self: Any, *args: Any) -> Any:
        plan = group_plan(self, *args)
        plans.append(weakref.ref(plan))
        settled.append(False)
        settle, k = plan.settle, len(settled) - 1

        def settling(*a: Any) -> Any:  # holds no plan: no cycle of its own
            settled[k] = True
            return settle(*a)

        plan.settle = settling
        return plan

    monkeypatch.setattr(protocols.moshpit.Moshpit, "group_plan", planning)
    link = {"dist": "lognormal", "median": "100 Mbit/s", "sigma": 1.0}
    scenario = sim.scenario_from_mapping(
        {
            "name": "freed",
            "clock": "network",
            "schedule": "async",
            "peers": {"count": COMPILED_MIN_PEERS, "upload": link, "download": link,
                      "latency": "10 ms"},
            "churn": churn,
            "vector": {"dim": 64, "dtype": "float32", "wire_bytes": "4 MB"},
            "protocol": {"name": "moshpit", "group_size": 16, "grid_dims": 2,
                         "part_bytes": 65536},
            "stop": {"max_time": 30, "target_var": 0},
            "network": {"groups_alone": alone},
        }
    )  # fmt: skip
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        result = sim.run(scenario, seed=0)
        alive = sum(ref() is not None for ref in finished)
        done = [ref for ref, ok in zip(plans, settled, strict=True) if ok]
        kept = sum(ref() is not None for ref in done)
    finally:
        if enabled:
            gc.enable()
    if churn is CHURN:  # flows failed, and pieces ended quietly in streams of replies
        assert result.summary["members_failed"] > 0
    if not alone:
        assert len(finished) > 16  # the groups of several steps have ended
        assert alive == 0, f"{alive} of {len(finished)} finished rounds still alive"
    assert len(done) > 16
    assert kept == 0, f"{kept} of {len(done)} settled groups' plans still alive"
