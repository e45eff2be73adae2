"""Max-min optimality of the network model's solver, and work conservation (validation.md)."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linprog

from sim.network import FlowNetwork, LinkGraph, compiled, maxmin_rates, transfer_times

CAPACITIES = st.sampled_from([1.0, 2.0, 3.0, 5.0, 7.5, 10.0, math.inf])
MAX_HOSTS, MAX_FLOWS = 12, 20


@st.composite
def sharing_problems(draw: st.DrawFn) -> tuple[list[tuple[int, ...]], list[float], list[float]]:
    """Routes over up to 2·12 NIC resources plus 3 links, capacities (some inf), weights."""
    n = draw(st.integers(2, MAX_HOSTS))
    capacity = draw(st.lists(CAPACITIES, min_size=2 * n + 3, max_size=2 * n + 3))
    n_flows = draw(st.integers(1, MAX_FLOWS))
    routes = []
    for _ in range(n_flows):
        src, dst = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        links = draw(st.sets(st.integers(2 * n, 2 * n + 2), max_size=2))
        routes.append((src, n + dst, *sorted(links)))
    weights = draw(
        st.lists(st.sampled_from([1.0, 0.5, 2.0, 1 / 3]), min_size=n_flows, max_size=n_flows)
    )
    return routes, capacity, weights


def usage(routes: list[tuple[int, ...]], n_resources: int) -> np.ndarray:
    matrix = np.zeros((n_resources, len(routes)))
    for j, route in enumerate(routes):
        matrix[list(route), j] = 1.0
    return matrix


@given(sharing_problems(), st.booleans())
def test_no_rate_can_rise_without_lowering_a_rate_not_larger(problem, weighted: bool) -> None:
    routes, capacity, weights = problem
    weights = weights if weighted else [1.0] * len(routes)
    rates = maxmin_rates(routes, capacity, weights)
    lam = rates / np.array(weights)
    finite = [r for r, c in enumerate(capacity) if math.isfinite(c)]
    a_ub = usage(routes, len(capacity))[finite]
    b_ub = np.array(capacity)[finite]
    assert (a_ub @ np.where(np.isinf(rates), 0.0, rates) <= b_ub * (1 + 1e-9)).all()
    limited = np.flatnonzero(np.isfinite(rates))  # the others use no finite resource
    a_ub = a_ub[:, limited]
    for i in limited:
        # raise flow i as far as possible while every flow with lam <= lam_i keeps its rate
        tied = lam <= lam[i] * (1 + 1e-9)  # float round-off splits exact ties
        bounds = [(rates[j] if j != i and tied[j] else 0.0, None) for j in limited]
        cost = -(limited == i).astype(float)
        best = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
        assert best.status == 0
        assert -best.fun <= rates[i] * (1 + 1e-7) + 1e-9


@given(sharing_problems())
def test_every_flow_has_a_saturated_bottleneck_where_it_is_largest(problem) -> None:
    routes, capacity, weights = problem
    rates = maxmin_rates(routes, capacity, weights)
    lam = rates / np.array(weights)
    load = usage(routes, len(capacity)) @ np.where(np.isinf(rates), 0.0, rates)
    for j, route in enumerate(routes):
        finite = [r for r in route if math.isfinite(capacity[r])]
        if not finite:
            assert rates[j] == math.inf
            continue
        on = [[k for k, other in enumerate(routes) if r in other] for r in finite]
        assert any(
            load[r] >= capacity[r] * (1 - 1e-9) and lam[j] >= lam[others].max() * (1 - 1e-9)
            for r, others in zip(finite, on, strict=True)
        )


SOLVERS = ["general", "compiled"] if compiled.available() else ["general"]


class CheckedNetwork(FlowNetwork):
    """A network that compares its incremental rates with a solve from scratch after
    every change (white box: hooks the private step that follows each re-rating)."""

    worst = 0.0
    checks = 0

    def _schedule_wake(self, now: float) -> None:
        super()._schedule_wake(now)
        active = self._core.flows()
        if active:
            reference = maxmin_rates([f.res for f in active], self._capacity, [f.w for f in active])
            rates = self.rates()
            got = np.array([rates[f.id] for f in active])
            self.worst = max(self.worst, float(np.max(np.abs(got - reference) / reference)))
            self.checks += 1


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[tuple[float, float]], list[float], list[tuple]]:
    """Up to 12 hosts, 20 flows with overlapping start times; per-peer latencies."""
    n = draw(st.integers(2, MAX_HOSTS))
    hosts = draw(st.lists(st.tuples(CAPACITIES, CAPACITIES), min_size=n, max_size=n))
    latency_s = draw(st.lists(st.sampled_from([0.0, 0.1, 0.25]), min_size=n, max_size=n))
    transfer = st.tuples(
        st.integers(0, n - 1),
        st.integers(0, n - 1),
        st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.7]),
        st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0, 1.5]),
    )
    transfers = draw(st.lists(transfer, min_size=1, max_size=MAX_FLOWS))
    return hosts, latency_s, transfers


@given(workloads(), st.sampled_from(["maxmin", "rtt_weighted"]), st.sampled_from(SOLVERS))
def test_incremental_rates_equal_a_solve_from_scratch(workload, sharing: str, solver: str) -> None:
    hosts, latency_s, transfers = workload
    if sharing == "rtt_weighted":
        latency_s = [lat + 0.05 for lat in latency_s]
    env = simpy.Environment()
    up, down = np.array(hosts).T
    net = CheckedNetwork(env, up, down, latency_s, sharing=sharing, solver=solver)
    for src, dst, nbytes, start_s in transfers:
        simpy.Timeout(env, start_s).callbacks.append(lambda _, a=(src, dst, nbytes): net.send(*a))
    env.run()
    assert net.worst <= 1e-9
    assert net.flows_completed == len(transfers)


@given(workloads())
def test_an_uploader_that_alone_limits_its_flows_works_like_a_fifo_server(workload) -> None:
    # with unlimited downloads each uploader is a work-conserving server: it empties at
    # the time a FIFO server would (busy periods do not depend on the service order)
    hosts, latency_s, transfers = workload
    hosts = [(1.0 + u % 7, math.inf) for u, _ in enumerate(hosts)]
    finish = transfer_times(hosts, np.add.outer(latency_s, latency_s), transfers)
    for src in {t[0] for t in transfers}:
        mine = sorted(
            (start + latency_s[src] + latency_s[dst], nbytes, k)
            for k, (s, dst, nbytes, start) in enumerate(transfers)
            if s == src
        )
        free_s = 0.0
        for enter_s, nbytes, _ in mine:
            free_s = max(free_s, enter_s) + nbytes / hosts[src][0]
        assert max(finish[k] for *_, k in mine) == pytest.approx(free_s, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_rates_stay_exact_under_heavy_contention(seed: int, solver: str) -> None:
    # a seeded stress test: 24 hosts in 3 sites joined by finite links, 400 flows,
    # preemptions; every reallocation is compared with a solve from scratch
    rng = np.random.default_rng(seed)
    n = 24
    graph = nx.Graph()
    graph.add_edge("s0", "hub", capacity=float(rng.uniform(2, 6)), latency=0.01)
    graph.add_edge("s1", "hub", capacity=float(rng.uniform(2, 6)), latency=0.02)
    graph.add_edge("s2", "hub", capacity=math.inf, latency=0.0)
    topology = LinkGraph(graph, [f"s{i % 3}" for i in range(n)])
    env = simpy.Environment()
    up = rng.choice([1.0, 2.0, 4.0, math.inf], n)
    down = rng.choice([1.0, 3.0, 8.0, math.inf], n)
    sharing = "rtt_weighted" if seed == 3 else "maxmin"
    net = CheckedNetwork(env, up, down, rng.uniform(0.01, 0.1, n), sharing, topology, solver)
    for start_s in np.sort(rng.uniform(0, 40, 400)):
        src, dst = rng.integers(0, n, 2)
        nbytes = float(rng.choice([0.0, rng.exponential(3.0)], p=[0.05, 0.95]))
        simpy.Timeout(env, start_s).callbacks.append(
            lambda _, a=(int(src), int(dst), nbytes): net.send(*a)
        )
    for fail_s, peer in zip(rng.uniform(0, 40, 10), rng.integers(0, n, 10), strict=True):
        simpy.Timeout(env, fail_s).callbacks.append(lambda _, p=int(peer): net.fail_peer(p))
    env.run()
    assert net.worst <= 1e-9
    assert net.checks > 400
    assert net.flows_completed + net.flows_failed == 400
    assert net.flows_failed > 0
