"""``schedule: async``: every peer's own loop with hivemind's matchmaking (issue 12).

Equivalence with barrier rounds on a full grid, the cost of a barrier in closed form,
the matchmaking's message count, preemption and rejoin, deadlines, ``min_group_size``,
client mode, the fixed grid's keys, random_groups, the ring as a collective, continuous
protocols, rows, summary, tables and determinism."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sim
from protocols import _moshpit_net as net
from sim.core.seeding import component_rng
from sim.engine.asynchronous import AsyncEngine
from sim.engine.netclock import NetworkClock
from sim.engine.schedules import BarrierEngine, CollectiveEngine, engine_class, engine_for
from sim.engine.steps import COLUMNS

M, D, N = 4, 3, 64  # the full 4^3 grid
B = 12.5e6  # 100 Mbit/s


def scenario(schedule: str = "async", overrides: dict[str, Any] | None = None, **parts: Any):
    data: dict[str, Any] = {
        "name": "async",
        "clock": "network",
        "schedule": schedule,
        "peers": {"count": N, "upload": B, "download": B, "latency": 0, "compute": 0},
        "vector": {"dim": 4096},
        "protocol": {"name": "moshpit", "group_size": M, "grid_dims": D,
                     "matchmaking_latency": 0.0},
        "stop": {"max_time": 100, "target_var": 0},
        "metrics": {"every": 1e-3},
    }  # fmt: skip
    data.update(parts)
    return sim.scenario_from_mapping(data, overrides or {})


def groups_of(table: Any) -> list[frozenset[int]]:
    return [frozenset(int(p) for p in m.split()) for m in table["members"]]


# -- equivalence with barrier rounds -----------------------------------------------------


class BarrierOrder(AsyncEngine):
    """Leaders order their members as barrier rounds do: round k's seeded shuffle of the
    protocol's generator, positions as chunk indices."""

    def member_order(self) -> Any:
        rng = component_rng(self.seed, "protocol")
        ranks = []
        for _ in range(D + 2):
            rank = np.arange(N)
            rank[rng.permutation(N)] = np.arange(N)
            ranks.append(rank)

        def order(leader: int, members: np.ndarray, _rng: Any, _size: int) -> Any:
            k = int(self.book.steps[leader])
            ordered = members[np.argsort(ranks[k][members], kind="stable")]
            return ordered, np.arange(ordered.size)

        return order


@pytest.mark.parametrize("alone", [False, True])
def test_async_equals_barrier_on_a_full_grid(monkeypatch, alone):
    """Equal compute (0), equal bandwidths, no latency, no churn, full grid: the same
    groups each round, bit-identical vectors, and every group ends when barrier's round
    does: at the same instant on the clock's events, to round-off where the groups run
    alone (:mod:`sim.engine.netclock.alone_groups`)."""
    monkeypatch.setattr(NetworkClock, "groups_alone", alone)
    rounds: list[list[frozenset[int]]] = []
    matchmake = net.matchmake

    def recording(*args: Any, **kwargs: Any) -> Any:
        matched = matchmake(*args, **kwargs)
        rounds.append([frozenset(g.tolist()) for g in matched.groups])
        return matched

    monkeypatch.setattr(net, "matchmake", recording)
    barrier = engine_for(scenario("barrier", {"stop.max_time": None, "stop.max_rounds": D}), 0)
    barrier.simulate()
    monkeypatch.setattr(net, "matchmake", matchmake)
    ends = barrier.recorder.frame()["time_s"].tolist()[1:]
    assert len(ends) == D
    run = BarrierOrder(scenario(overrides={"stop.max_time": 1.2 * ends[-1]}), 0)
    run.simulate()
    groups = run.tables()["groups"]
    assert len(groups) == D * N // M
    for k, end in enumerate(ends):
        same = groups["done_s"] == end if not alone else np.isclose(groups["done_s"], end, 1e-9, 0)
        assert set(groups_of(groups[same])) == set(rounds[k])
    if not alone:
        assert set(groups["done_s"]) == set(ends)
    np.testing.assert_array_equal(run.state.x, barrier.state.x)
    assert (run.book.steps == D).all()


def test_one_slow_group_slows_only_its_members():
    """Members 0..M−1 (the first groups' block on a full grid) at b/4: under async their
    step 1 ends at c + T(b/4), everyone else's at c + T(b); under barrier rounds round 1
    ends for everyone at T(b/4). T(b) = 2(M−1)S/(M·b)."""
    n, size, c = 16, 4, 0.25
    nbytes = 4096 * 8

    def t(bandwidth: float) -> float:
        return 2 * (size - 1) * nbytes / (size * bandwidth)

    common = {"peers": {"count": n, "upload": B, "download": B, "latency": 0, "compute": c},
              "protocol": {"name": "moshpit", "group_size": size, "grid_dims": 2,
                           "load_balance": False, "matchmaking_latency": 0.0},
              "stop": {"max_time": 0.5, "target_var": 0}, "metrics": {"every": 1e-4}}  # fmt: skip
    for schedule in ("async", "barrier"):
        run = engine_for(scenario(schedule, **common), 0)
        run.peers.loc[: size - 1, ["upload_bytes_per_s", "download_bytes_per_s"]] = B / 4
        run.simulate()
        if schedule == "async":
            groups = run.tables()["groups"]
            first = groups[groups["assembled_s"] == c]
            slow = first["members"].map(lambda m: set(map(int, m.split())) == {0, 1, 2, 3})
            assert slow.sum() == 1
            assert first.loc[slow, "done_s"].tolist() == pytest.approx([c + t(B / 4)], abs=1e-12)
            fast = first.loc[~slow, "done_s"].to_numpy()
            assert fast.size == n // size - 1
            np.testing.assert_allclose(fast, c + t(B), rtol=0, atol=1e-12)
        else:
            times = run.recorder.frame()["time_s"].tolist()
            assert times[1] == pytest.approx(t(B / 4), abs=1e-12)


def test_matchmaking_costs_a_declaration_and_three_messages():
    """Two peers, compute c, route r, DHT delay L, infinite bandwidth, dim 2 in equal
    parts: assembly at c + L + r (the request), the leader's reply and BEGIN reach the
    follower at +r, its request to the leader arrives at +2r, the reply at +3r: step k
    ends at k·(c + L + 4r)."""
    c, latency, dht = 0.5, 0.01, 0.05
    sc = scenario(
        peers={"count": 2, "upload": "inf", "download": "inf", "latency": latency, "compute": c},
        vector={"dim": 2},
        protocol={"name": "moshpit", "group_size": 2, "grid_dims": 1, "load_balance": False,
                  "matchmaking_latency": dht},
        stop={"max_time": 3, "target_var": 0},
        metrics={"every": 1},
    )  # fmt: skip
    result = sim.run(sc)
    done = result.extra_tables["groups"]["done_s"].to_numpy()
    step = c + dht + 4 * 2 * latency
    np.testing.assert_allclose(done, step * np.arange(1, 5), rtol=0, atol=1e-12)
    assert result.summary["steps_min"] == result.summary["steps_max"] == 4


# -- churn, deadlines, sizes -----------------------------------------------------------------


def small(count: int = 8, overrides: dict[str, Any] | None = None, **parts: Any) -> Any:
    base: dict[str, Any] = {
        "peers": {"count": count, "upload": B, "download": B, "latency": 0.005, "compute": 0.2},
        "vector": {"dim": 64},
        "protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 2,
                     "matchmaking_time": 0.5},
        "stop": {"max_time": 10, "target_var": 0},
        "metrics": {"every": 0.5},
    }  # fmt: skip
    base.update(parts)
    return scenario(overrides=overrides, **base)


@pytest.mark.parametrize("rejoin", ["keep", "reset", "fetch"])
def test_a_preempted_peer_stops_at_once_and_restarts_after_rejoin(rejoin, tmp_path):
    """Peer 3 goes down at 1.03 s and comes back at 2.5 s: no group of peer 3 ends while
    it is absent, and its next step starts its local work when it is back (``fetch``:
    once the download arrived)."""
    trace = tmp_path / "trace.csv"
    trace.write_text("peer,down_s,up_s\n3,1.03,2.5\n")
    churn = {"model": "trace", "file": str(trace), "rejoin": rejoin}
    run = engine_for(small(churn=churn), 0)
    starts: list[float] = []
    loop = run._loop

    def watched(peer: int) -> Any:
        if peer == 3:
            starts.append(float(run.env.now))
        return loop(peer)

    run._loop = watched  # type: ignore[method-assign]
    run.simulate()
    groups = run.tables()["groups"]
    mine = groups[groups["members"].map(lambda m: 3 in map(int, m.split()))]
    averaged = mine[mine["averaged"] == mine["size"]]
    assert not ((averaged["done_s"] > 1.03) & (averaged["done_s"] < 2.5)).any()
    assert len(starts) == 2
    assert starts[0] == 0.0
    if rejoin == "fetch":
        assert starts[1] > 2.5  # the download takes time
    else:
        assert starts[1] == 2.5
    later = mine[mine["assembled_s"] > 2.5]
    assert (later["assembled_s"] >= starts[1] + 0.2).all()
    assert run.book.steps[3] > 0
    assert len(later) > 0


def test_a_lone_peer_fails_its_step_at_the_deadline():
    """One peer per key (group_size 4 on a 4^2 grid with 2 peers... one key each): every
    step fails at its deadline, the vectors never change, no declaration after a
    deadline except a step's first."""
    timeout = 1.5
    run = engine_for(
        small(
            count=2, peers={"count": 2, "upload": B, "download": B, "latency": 0.005,
                            "compute": 0.2},
            protocol={"name": "moshpit", "group_size": 2, "grid_dims": 1, "rekey": False,
                      "matchmaking_time": 0.5, "averaging_timeout": timeout},
        ),
        0,
    )  # fmt: skip
    # two fixed cells on a 2^1 grid line... force distinct keys instead
    run.protocol.group_key = lambda peer, step: peer  # type: ignore[method-assign]
    x0 = np.array(run.state.x, copy=True)
    declared: list[tuple[int, float, float, float]] = []
    start = run.start

    def started(clock: Any) -> None:
        start(clock)
        run.matchmaker.on_declare = lambda *a: declared.append(a)

    run.start = started  # type: ignore[method-assign]
    run.simulate()
    np.testing.assert_array_equal(run.state.x, x0)
    cycle = 0.2 + timeout
    assert list(run.book.failed) == [int(10 // cycle)] * 2
    for _peer, at, expiration, deadline in declared:
        first = abs((at - 0.2) % cycle) < 1e-9 or abs((at - 0.2) % cycle - cycle) < 1e-9
        assert at < deadline or first
        assert expiration <= max(deadline, at + 0.5) + 1e-12


def test_min_group_size_disbands_and_retries():
    """Three peers, min_group_size 4: nobody ever averages; every expiration is a
    disband counted in groups_failed; with min_group_size 3 they average."""
    parts = {"peers": {"count": 3, "upload": B, "download": B, "latency": 0.005, "compute": 0.2},
             "stop": {"max_time": 5, "target_var": 0}}  # fmt: skip
    never = sim.run(small(overrides={"protocol.min_group_size": 4, "protocol.grid_dims": 1},
                          **parts))  # fmt: skip
    assert never.summary["groups_run"] == 0
    assert never.summary["matchmaking_disbands"] > 0
    assert never.summary["groups_failed"] >= never.summary["matchmaking_disbands"]
    three = sim.run(small(overrides={"protocol.min_group_size": 3, "protocol.grid_dims": 1},
                          **parts))  # fmt: skip
    assert three.summary["groups_run"] > 0
    assert set(three.extra_tables["groups"]["size"]) == {3}


def test_client_peers_never_lead():
    classes = [{"name": "server", "fraction": 0.5}, {"name": "client", "fraction": 0.5,
                                                     "client": True}]  # fmt: skip
    peers = {"count": 8, "upload": B, "download": B, "latency": 0.005, "compute": 0.2,
             "classes": classes}  # fmt: skip
    run = engine_for(small(peers=peers), 0)
    run.simulate()
    client = run.peers["client"].to_numpy(bool)
    groups = run.tables()["groups"]
    assert len(groups) > 0
    assert not client[groups["leader"].to_numpy()].any()


def test_rekey_false_keys_follow_each_peers_axis():
    """Fixed grid: at step s a peer declares its line along axis s mod d, and lines of
    different axes never share a key."""
    run = engine_for(small(count=16, overrides={"protocol.rekey": False}), 0)
    protocol = run.protocol
    lines = protocol.lines
    for peer in range(16):
        for step in range(4):
            axis = step % 2
            assert protocol.group_key(peer, step) == axis * 4 + int(lines[axis][peer])
    run.simulate()
    groups = run.tables()["groups"]
    assert len(groups) > 0
    for members, key in zip(groups_of(groups), groups["key"], strict=True):
        axis, line = divmod(int(key), 4)
        assert {int(lines[axis][m]) for m in members} == {line}


def test_random_groups_async_forms_groups_up_to_group_size():
    protocol = {"name": "random_groups", "group_size": 3, "matchmaking_time": 0.5,
                "min_group_size": 2}  # fmt: skip
    result = sim.run(small(count=10, protocol=protocol))
    groups = result.extra_tables["groups"]
    assert len(groups) > 0
    assert groups["size"].between(2, 3).all()
    assert (groups["key"] == 0).all()
    assert result.summary["final_var"] < result.metrics["var"].iloc[0]


def test_ring_under_async_waits_for_the_slowest_compute():
    """A collective: the first attempt starts once the slowest peer did its local work."""
    classes = [{"fraction": 0.5, "compute": 0.1}, {"fraction": 0.5, "compute": "700 ms"}]
    peers = {"count": 4, "upload": B, "download": B, "latency": 0, "classes": classes}
    stop = {"max_rounds": 1, "target_var": 0}
    sc_async = small(peers=peers, protocol={"name": "ring_allreduce"}, stop=stop)
    sc_barrier = small(schedule="barrier", peers=peers, protocol={"name": "ring_allreduce"},
                       stop=stop)  # fmt: skip
    assert engine_class(sc_async) is CollectiveEngine
    assert engine_class(sc_barrier) is BarrierEngine
    t_async = sim.run(sc_async).summary["sim_time_s"]
    t_barrier = sim.run(sc_barrier).summary["sim_time_s"]
    assert t_async == pytest.approx(0.7 + t_barrier, abs=1e-12)


@pytest.mark.parametrize("name", ["pairwise_gossip", "push_sum", "a2cid2"])
def test_continuous_protocols_ignore_the_schedule(name):
    protocol = {"name": name}
    frames = [
        sim.run(
            small(schedule=schedule, protocol=protocol, stop={"max_time": 3, "target_var": 0})
        ).metrics
        for schedule in ("barrier", "async")
    ]
    assert frames[0].equals(frames[1])


# -- rows, summary, tables, determinism --------------------------------------------------


def test_async_rows_every_metrics_every_and_exact_target():
    """Rows at k·every and at the end; the target's time is the instant of the group
    whose arithmetic crossed it."""
    sc = small(count=16, overrides={"stop.target_var": 1e-6, "metrics.every": 0.25})
    result = sim.run(sc)
    times = result.metrics["time_s"].to_numpy()
    assert times[0] == 0.0
    np.testing.assert_allclose(times[1:-1], 0.25 * np.arange(1, times.size - 1), atol=1e-12)
    assert result.summary["stop_reason"] == "target"
    crossed = result.summary["time_to_target_s"]
    assert times[-1] == crossed
    assert crossed in set(result.extra_tables["groups"]["done_s"])
    assert result.metrics["var"].iloc[-1] < 1e-6 <= result.metrics["var"].iloc[-2]
    assert list(result.metrics.columns[-len(COLUMNS) :]) == list(COLUMNS)


def test_async_summary_and_tables():
    churn = {"model": "exponential", "mtbf": 4, "mttr": 1, "rejoin": "fetch"}
    result = sim.run(small(count=12, churn=churn))
    s = result.summary
    groups, steps = result.extra_tables["groups"], result.extra_tables["steps"]
    assert sum(s["group_sizes"].values()) == s["groups_run"] == len(groups)
    assert s["group_size_mean"] == pytest.approx(groups["size"].mean())
    assert s["steps_min"] <= s["steps_median"] <= s["steps_max"]
    assert s["steps_max"] == steps["steps"].max()
    assert s["steps_failed"] == steps["steps_failed"].sum()
    total = s["compute_s"] + s["matchmaking_s"] + s["allreduce_s"]
    assert 0 < total <= 12 * s["sim_time_s"] + 1e-9
    for phase in ("compute_s", "matchmaking_s", "allreduce_s"):
        assert steps[phase].sum() == pytest.approx(s[phase])
        assert result.metrics[phase].iloc[-1] == pytest.approx(s[phase])
    assert (groups["done_s"] >= groups["assembled_s"]).all()
    assert s["matchmaking_messages"] > 0


def test_async_is_deterministic():
    churn = {"model": "exponential", "mtbf": 4, "mttr": 1, "rejoin": "keep"}
    sc = small(count=12, churn=churn)
    a, b = sim.run(sc), sim.run(sc)
    assert a.metrics.equals(b.metrics)
    for name in ("groups", "steps", "traffic"):
        assert a.extra_tables[name].equals(b.extra_tables[name])
    np.testing.assert_array_equal(a.state.x, b.state.x)
    c = sim.run(sc, seed=1)
    assert not a.extra_tables["groups"].equals(c.extra_tables["groups"])
