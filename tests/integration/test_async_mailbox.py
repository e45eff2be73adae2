"""``schedule: async`` for gossip and sgp: asynchronous SGP (issue 12 part 3).

Every peer sends at its own step and mixes what has arrived since its last step
(:mod:`sim.engine.mailbox`): push-sum's mass is exact with the shares in flight, plain
mixing never leaves the hull, a small ring converges, runs are deterministic, the
refusal is gone, a preemption settles the messages of the peer that goes down (its rows
never change while it is away), and a peer without local work steps at the pace of its
messages."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sim
from sim.engine.mailbox import MailboxEngine
from sim.engine.observe.wiring import watched
from sim.engine.schedules import engine_class
from sim.network.flows import DONE

CHURN = {"model": "exponential", "mtbf": 4, "mttr": 1, "rejoin": "keep"}


def scenario(protocol: dict[str, Any], **parts: Any) -> Any:
    data: dict[str, Any] = {
        "name": "mailbox",
        "clock": "network",
        "schedule": "async",
        "peers": {
            "count": 12, "upload": 1e6, "download": 1e6,
            "latency": {"dist": "uniform", "low": 0.005, "high": 0.05},
            "classes": [{"name": "fast", "fraction": 0.5, "compute": 0.1},
                        {"name": "slow", "fraction": 0.5, "compute": 0.35}],
        },
        "vector": {"dim": 8},
        "protocol": protocol,
        "stop": {"max_time": 30, "target_var": 0},
        "metrics": {"every": 0.5},
    }  # fmt: skip
    data.update(parts)
    return sim.scenario_from_mapping(data, {})


class Checked(MailboxEngine):
    """Calls ``check`` after every step and every end of a message."""

    def __init__(self, *args: Any, check: Any) -> None:
        super().__init__(*args)
        self.check, self.returns, self.busiest = check, 0, 0

    def _step(self, peer: int) -> None:
        super()._step(peer)
        self.busiest = max(self.busiest, len(self.in_flight))
        self.check(self)

    def _ended(self, event: Any, *args: Any, **kwargs: Any) -> None:
        self.returns += not event.ok
        super()._ended(event, *args, **kwargs)
        self.check(self)


def mass(engine: MailboxEngine) -> tuple[np.ndarray, float]:
    """Σx and Σw over the peers and the shares in flight."""
    x = np.asarray(engine.state.x).sum(axis=0)
    w = float(np.asarray(engine.state.extra["w"]).sum())
    for share_x, _, share_w in engine.in_flight.values():
        x = x + np.asarray(share_x)
        w += float(np.asarray(share_w).sum())
    return x, w


@pytest.mark.parametrize("churn", [None, CHURN])
def test_async_sgp_push_sum_keeps_mass_with_shares_in_flight(churn):
    sc = scenario({"name": "sgp", "push_sum": True}, **({"churn": churn} if churn else {}))
    assert engine_class(sc) is MailboxEngine
    seen: list[tuple[np.ndarray, float]] = []
    engine = Checked(sc, 3, check=lambda e: seen.append(mass(e)))
    x0, w0 = mass(engine)
    engine.simulate(None)
    assert len(seen) > 100
    assert engine.busiest > 0
    if churn is not None:
        assert engine.returns > 0  # failed flows gave their shares back
    for x, w in seen:
        np.testing.assert_allclose(x, x0, rtol=1e-12, atol=1e-12)
        assert w == pytest.approx(w0, rel=1e-12)
    assert (np.asarray(engine.state.extra["w"]) > 0).all()


@pytest.mark.parametrize(
    "protocol",
    [{"name": "gossip", "topology": "ring"}, {"name": "gossip", "weights": "metropolis"},
     {"name": "sgp"}],
)  # fmt: skip
def test_async_plain_mixing_never_leaves_the_hull(protocol):
    """The range of every value held (the peers' rows, the mailboxes, the messages in
    flight) never widens, and it shrinks."""
    ranges: list[tuple[np.ndarray, np.ndarray]] = []

    def check(e: MailboxEngine) -> None:
        held = [np.asarray(e.state.x)]
        held += [np.asarray(v)[None] for box in e.mailboxes.values() for v in box.values()]
        held += [np.asarray(v)[None] for v in e.in_flight.values()]
        values = np.concatenate(held)
        ranges.append((values.min(axis=0), values.max(axis=0)))

    engine = Checked(scenario(protocol, churn=CHURN), 5, check=check)
    x0 = np.asarray(engine.state.x).copy()
    lo, hi = x0.min(axis=0), x0.max(axis=0)
    engine.simulate(None)
    assert len(ranges) > 100
    assert engine.returns > 0
    for low, high in ranges:
        assert (low >= lo - 1e-12).all()
        assert (high <= hi + 1e-12).all()
        lo, hi = low, high
    assert (hi - lo < 0.5 * (x0.max(axis=0) - x0.min(axis=0))).all()


@pytest.mark.parametrize(
    "protocol",
    [{"name": "gossip", "topology": "ring"}, {"name": "sgp"},
     {"name": "sgp", "push_sum": True}],
)  # fmt: skip
def test_async_mixing_converges_on_a_small_ring(protocol):
    sc = scenario(protocol, stop={"max_time": 200, "target_var": 1e-8})
    result = sim.run(sc)
    assert result.summary["stop_reason"] == "target"
    assert result.summary["steps_min"] < result.summary["steps_max"]  # peers ran apart
    var = result.metrics["var"].to_numpy()
    assert var[-1] < 1e-8 < var[0]


@pytest.mark.parametrize("protocol", [{"name": "gossip"}, {"name": "sgp", "push_sum": True}])
def test_async_mixing_is_deterministic(protocol):
    sc = scenario(protocol, churn=CHURN, stop={"max_time": 10, "target_var": 0})
    first, second = sim.run(sc, seed=7), sim.run(sc, seed=7)
    assert first.metrics.equals(second.metrics)
    assert np.array_equal(np.asarray(first.state.x), np.asarray(second.state.x))
    assert not first.metrics.equals(sim.run(sc, seed=8).metrics)


def test_async_gossip_mixes_only_arrived_values():
    """Two peers, no local work: each step sends, then mixes the value that arrived
    before it; with 1 s of latency nothing has arrived at the first steps."""
    sc = scenario(
        {"name": "gossip", "topology": "ring"},
        peers={"count": 2, "upload": 1e9, "download": 1e9, "latency": 0.5, "compute": 0.4},
        stop={"max_time": 1.0, "target_var": 0},
        metrics={"every": 0.1},
    )
    result = sim.run(sc)
    var = result.metrics.set_index("time_s")["var"]
    # the first values arrive at 0.4 + 1.0 (two route latencies of 0.5 each) > 1.0
    assert var.iloc[-1] == var.iloc[0]


# -- a preemption settles the messages of the peer that goes down ---------------------------
SLOW = {"count": 4, "upload": 2000, "download": 2000, "latency": 0.01, "compute": 0.05}


def driven(protocol: dict[str, Any]) -> tuple[MailboxEngine, list[Any]]:
    """A run of four peers on slow links, driven event by event; the flows it sends."""
    sc = scenario(protocol, peers=SLOW, stop={"max_time": 20, "target_var": 0})
    engine = MailboxEngine(sc, 0)
    engine.env.process(engine.process(None))
    engine.env.step()  # the run's process builds the clock and the flow network
    flows: list[Any] = []
    send = engine.clock.net.send

    def recording(*args: Any, **kwargs: Any) -> Any:
        flows.append(send(*args, **kwargs))
        return flows[-1]

    engine.clock.net.send = recording  # type: ignore[method-assign]
    return engine, flows


def step_until(engine: MailboxEngine, found: Any) -> Any:
    """Step the run's events until ``found()`` returns something; return it."""
    for _ in range(100_000):
        hit = found()
        if hit is not None:
            return hit
        engine.env.step()
    raise AssertionError("never found")


def preempt(engine: MailboxEngine, peer: int) -> None:
    """Preempt ``peer`` as the churn process does (through the exact-target tracker)."""
    watched(engine.tracker, engine.clock.preempt)(np.array([peer]))


def rows(engine: MailboxEngine, peer: int) -> list[np.ndarray]:
    state = engine.state
    return [np.array(state.x[peer]), *(np.array(v[peer]) for v in state.extra.values())]


def test_a_sender_preempted_with_a_share_in_flight_takes_it_back_as_it_goes_down():
    """The flow fails at the sender's preemption: its share is back with it at once, so
    the absent sender's rows never change afterwards, and the mass is exact."""
    engine, _ = driven({"name": "sgp", "push_sum": True})
    src, _ = step_until(engine, lambda: next(iter(engine.in_flight), None))
    x0, w0 = mass(engine)
    preempt(engine, src)
    frozen = rows(engine, src)
    np.testing.assert_allclose(mass(engine)[0], x0, rtol=1e-12, atol=1e-12)
    engine.env.run(until=engine.env.now + 2.0)
    assert not engine.clock.present[src]
    for now, then in zip(rows(engine, src), frozen, strict=True):
        np.testing.assert_array_equal(now, then)
    x, w = mass(engine)
    np.testing.assert_allclose(x, x0, rtol=1e-12, atol=1e-12)
    assert w == pytest.approx(w0, rel=1e-12)


def delivered_unprocessed(engine: MailboxEngine, flows: list[Any]) -> Any:
    """A message whose flow has just completed, its callbacks not yet run."""
    for flow in flows:
        if flow.phase == DONE and not flow.done.processed:
            return flow
    return None


@pytest.mark.parametrize("protocol", [{"name": "sgp", "push_sum": True}, {"name": "gossip"}])
def test_a_receiver_preempted_at_the_instant_of_a_delivery_gets_it_before_it_is_down(protocol):
    """The message was delivered (its flow completed) at the instant its receiver goes
    down, before the delivery's callbacks ran: push-sum's share is added as the receiver
    goes down, never to its absent rows later; a plain value lands in the mailbox that
    the preemption empties, never in the absent peer's mailbox."""
    engine, flows = driven(protocol)
    flow = step_until(engine, lambda: delivered_unprocessed(engine, flows))
    x0, w0 = mass(engine) if protocol.get("push_sum") else (None, None)
    preempt(engine, flow.dst)
    frozen = rows(engine, flow.dst)
    if x0 is not None:
        np.testing.assert_allclose(mass(engine)[0], x0, rtol=1e-12, atol=1e-12)
    now = engine.env.now
    while engine.env.peek() <= now:  # the rest of the instant: the delivery's callbacks
        engine.env.step()
    assert flow.dst not in engine.mailboxes
    engine.env.run(until=now + 2.0)
    assert not engine.clock.present[flow.dst]
    assert flow.dst not in engine.mailboxes
    for value, then in zip(rows(engine, flow.dst), frozen, strict=True):
        np.testing.assert_array_equal(value, then)
    if x0 is not None:
        x, w = mass(engine)
        np.testing.assert_allclose(x, x0, rtol=1e-12, atol=1e-12)
        assert w == pytest.approx(w0, rel=1e-12)


@pytest.mark.parametrize("protocol", [{"name": "gossip"}, {"name": "sgp", "push_sum": True}])
def test_a_peer_without_local_work_steps_at_the_pace_of_its_messages(protocol):
    """``compute: 0`` (averaging back to back): a step takes no time, so each peer waits
    for one of its messages to end (or one to reach it) before the next; time advances
    and the steps follow the route latency (2 × 50 ms per message)."""
    sc = scenario(
        protocol,
        peers={"count": 3, "upload": 1e9, "download": 1e9, "latency": 0.05, "compute": 0},
        stop={"max_time": 5, "target_var": 0},
    )
    engine = MailboxEngine(sc, 0)
    engine.env.process(engine.process(None))
    for _ in range(50_000):
        if engine.env.peek() > 1.0:
            break
        engine.env.step()
    assert engine.env.peek() > 1.0  # not stuck at one instant
    steps = engine.book.steps
    assert 8 <= steps.min() <= steps.max() <= 12  # one step per 0.1 s, the first at 0
