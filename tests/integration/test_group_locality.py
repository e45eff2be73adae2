"""A group that nothing else touches runs as it would alone (docs/design.md, stop 35: the
premise of running such a group in a loop of its own).

An async moshpit swarm without churn runs on the network clock. A peer is in one group
at a time and nothing else sends, so no flow of another group shares a group's links.
Every group is then run again in a SimPy environment and a flow network of its own,
from the instant it started, on the same links and with the same peers present. Every
send (its instant, its order, whether it resumes its stream and whether it keeps it),
every flow's end (a quiet end's own instant, not the wake-up's), the flows delivered and
the group's end are the same, bit for bit. In the swarm other groups' events cut the
network's chains of quiet completions, move its wake-ups and take flow ids in between,
and ``settle`` counts the pieces inside chunks at their instants: none of it may reach
a group's instants.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import pytest
import simpy

import sim
from protocols.contract import Flows, GroupPlan
from sim.engine.netclock import NetworkClock
from sim.engine.netclock import round_state as rs
from sim.network import FlowNetwork, compiled
from sim.network import flows as network_flows

PATHS = ["general", "compiled"] if compiled.available() else ["general"]


def _scenario() -> Any:
    link = {"dist": "lognormal", "median": "100 Mbit/s", "sigma": 1.0}
    return sim.scenario_from_mapping(
        {
            "name": "group-locality",
            "clock": "network",
            "schedule": "async",
            "peers": {"count": 16, "upload": link, "download": link, "latency": "10 ms",
                      "compute": "1 s"},
            "vector": {"dim": 64, "dtype": "float32", "wire_bytes": "8 MB"},
            # a short matchmaking window: groups of 2, 3 and 4
            "protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 2,
                         "matchmaking_time": 1.0},
            "stop": {"max_time": 200.0, "target_var": 0},
            "metrics": {"every": 200.0},
        }
    )  # fmt: skip


def _copy(flows: Flows) -> Flows:
    """The plan's flows, arrays copied (the clock fills ``delivered`` elsewhere)."""
    return dataclasses.replace(
        flows, **{k: np.array(v) for k, v in vars(flows).items() if v is not None}
    )


def _same(flows: Flows) -> Flows:
    return flows


def _never(state: Any, lost: np.ndarray) -> np.ndarray:
    raise AssertionError("a replayed group is not settled")


class _Recorder:
    """What each round state's group did: its sends and its flows' ends."""

    def __init__(self) -> None:
        self.sends: dict[int, list[tuple[float, int, bool, bool]]] = {}
        self.ends: dict[int, dict[int, tuple[float, bool]]] = {}
        self.ids = iter(range(10**9))
        self.pending: dict[str, Any] | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        rec = self
        init, ended = rs.RoundState.__init__, rs.RoundState.ended
        inside, run_ended = rs.RoundState.ended_inside, rs.RoundState.ended_run
        send, quiet = NetworkClock._send, NetworkClock._on_quiet

        def state_init(state: Any, *args: Any, **kwargs: Any) -> None:
            init(state, *args, **kwargs)
            state.rid = next(rec.ids)
            rec.sends[state.rid], rec.ends[state.rid] = [], {}
            if rec.pending is not None:
                rec.pending["state"], rec.pending = state.rid, None

        def state_ended(state: Any, i: int, ok: bool) -> list[int]:
            rec.ends[state.rid][i] = (float(state.done.env.now), ok)
            return ended(state, i, ok)

        def state_inside(state: Any, pieces: list[int], ready: list[int]) -> None:
            for i in pieces:  # counted when the chunk's family is next seen
                rec.ends[state.rid][i] = (-1.0, True)
            inside(state, pieces, ready)

        def state_run(
            state: Any, flat: np.ndarray, start: int, stop: int, ready: list[int]
        ) -> None:
            for i in flat[start:stop].tolist():
                rec.ends[state.rid][i] = (-1.0, True)
            run_ended(state, flat, start, stop, ready)

        def clock_send(clock: Any, i: int, state: Any) -> None:
            stream = state.open.get(i) if state.open else None
            cont = -1 if state.cont is None else int(state.cont[i])
            keep = cont >= 0 and state.need[cont] == 1
            resumed = stream is not None and stream.parked
            rec.sends[state.rid].append((float(clock.env.now), i, resumed, keep))
            send(clock, i, state)

        def clock_quiet(clock: Any, state: Any, flow: Any) -> None:
            quiet(clock, state, flow)
            rec.ends[state.rid][flow.tag] = (float(flow.end_s), True)  # its own instant

        monkeypatch.setattr(rs.RoundState, "__init__", state_init)
        monkeypatch.setattr(rs.RoundState, "ended", state_ended)
        monkeypatch.setattr(rs.RoundState, "ended_inside", state_inside)
        monkeypatch.setattr(rs.RoundState, "ended_run", state_run)
        monkeypatch.setattr(NetworkClock, "_send", clock_send)
        monkeypatch.setattr(NetworkClock, "_on_quiet", clock_quiet)


@pytest.mark.parametrize("solver", PATHS)
def test_every_group_of_a_swarm_runs_as_it_would_alone(
    solver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(network_flows, "COMPILED_MIN_PEERS", 0 if solver == "compiled" else 10**9)
    rec = _Recorder()
    rec.install(monkeypatch)
    links: list[tuple[Any, ...]] = []
    groups: list[dict[str, Any]] = []
    net_init, clock_run = FlowNetwork.__init__, NetworkClock.run

    def network_init(net: Any, env: Any, *args: Any) -> None:
        links.append(args)
        net_init(net, env, *args)

    def run(clock: Any, plan: Any, idle_s: float = 0.0) -> Any:
        flows = plan.flows()
        plan.flows = lambda: flows
        group = {"t0": clock.env.now, "flows": _copy(flows), "present": clock.present.copy()}
        groups.append(group)
        rec.pending = group
        yield from clock_run(clock, plan, idle_s)
        rec.pending = None
        group["end"], group["delivered"] = clock.env.now, plan.delivered.copy()

    monkeypatch.setattr(FlowNetwork, "__init__", network_init)
    monkeypatch.setattr(NetworkClock, "run", run)
    monkeypatch.setattr(NetworkClock, "groups_alone", False)  # every group on the events
    sim.run(_scenario(), seed=3)
    assert len(links) == 1
    finished = [g for g in groups if "end" in g and "state" in g]
    sizes = [np.unique(np.r_[g["flows"].src, g["flows"].dst]).size for g in finished]
    assert 2 in sizes, sizes  # pairs
    assert max(sizes) >= 3, sizes  # and families of two streams or more (chunks)
    chunked = 0
    for group in finished:
        env = simpy.Environment(initial_time=group["t0"])
        net = FlowNetwork(env, *links[0])
        alone = NetworkClock(env, net, group["present"].copy(), np.zeros(group["present"].size))
        plan = GroupPlan(
            np.zeros(0, dtype=np.intp), _never, functools.partial(_same, group["flows"])
        )
        replay: dict[str, Any] = {}
        rec.pending = replay
        env.run(env.process(clock_run(alone, plan)))
        mine, theirs = replay["state"], group["state"]
        assert rec.sends[mine] == rec.sends[theirs]
        assert rec.ends[mine] == rec.ends[theirs]
        np.testing.assert_array_equal(plan.delivered, group["delivered"])
        assert env.now == group["end"]
        chunked += any(at < 0 for at, _ in rec.ends[theirs].values())
    assert chunked > 0  # some pieces ended inside chunks
