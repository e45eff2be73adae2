"""The flow network drives SimPy through its public API only (issue 11, part 7).

``done`` events are settled with ``succeed``/``fail``, so they go through SimPy's event
queue like any other event: triggered when the flow completes, processed later in the
same instant, and open to subscribers until then.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import simpy

from sim.network import FlowNetwork

MB = 1e6
ROOT = Path(__file__).resolve().parents[2]
#: SimPy's private event and environment fields, and its mark of a processed event.
PRIVATE = re.compile(r"\._(ok|value|defused|eid|active_proc)\b|\.callbacks\s*=\s*None")


def make_net(up: list[float], down: list[float]) -> tuple[simpy.Environment, FlowNetwork]:
    env = simpy.Environment()
    return env, FlowNetwork(env, np.asarray(up), np.asarray(down), np.zeros(len(up)))


def test_a_done_event_nobody_awaits_is_triggered_then_processed_in_the_same_instant() -> None:
    env, net = make_net([MB, MB], [MB, MB])
    flow = net.send(0, 1, MB)
    while flow.phase != "done":
        env.step()
    assert env.now == 1.0
    assert flow.done.triggered
    assert not flow.done.processed
    assert env.peek() == 1.0  # its own queue entry, at the completion instant
    env.step()
    assert flow.done.processed
    assert flow.done.ok
    assert flow.done.value == 1.0


def test_a_callback_can_subscribe_to_a_flow_that_completed_at_the_same_instant() -> None:
    # one uploader, two equal flows: both end at exactly 2 s, flow a first (lower id)
    env, net = make_net([MB, MB, MB], [MB, 10 * MB, 10 * MB])
    a, b = net.send(0, 1, MB), net.send(0, 2, MB)
    seen: list[tuple[str, float, object]] = []

    def on_b(event: simpy.Event) -> None:
        seen.append(("b", env.now, event.value))

    def on_a(event: simpy.Event) -> None:
        seen.append(("a", env.now, event.value))
        assert b.phase == "done"  # completed by the same wake-up
        b.done.callbacks.append(on_b)

    a.done.callbacks.append(on_a)
    env.run()
    assert seen == [("a", 2.0, 2.0), ("b", 2.0, 2.0)]


def test_no_module_touches_simpy_private_fields() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in ("sim", "protocols")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert offenders == []
