"""The network model's closed forms (network.md), exact to ~1e-12 relative."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import simpy

from sim.core.errors import AvsimError
from sim.network import FlowFailed, FlowNetwork, LinkGraph, NetworkError, transfer_times

REL = 1e-12
MB = 1e6


def approx(value: float) -> object:
    return pytest.approx(value, rel=REL, abs=1e-15)


def make_net(up, down, latency_s, **kwargs) -> tuple[simpy.Environment, FlowNetwork]:
    env = simpy.Environment()
    return env, FlowNetwork(
        env, np.asarray(up, float), np.asarray(down, float), latency_s, **kwargs
    )


def send_at(env: simpy.Environment, net: FlowNetwork, t_s: float, *args: object) -> list:
    """Send a flow at time ``t_s``; the returned one-element list receives the Flow."""
    box: list = []

    def go(_: simpy.Event) -> None:
        box.append(net.send(*args))

    simpy.Timeout(env, t_s).callbacks.append(go)
    return box


# -- one flow ---------------------------------------------------------------------------
@pytest.mark.parametrize(("up", "down"), [(2 * MB, 3 * MB), (3 * MB, 2 * MB), (5 * MB, 5 * MB)])
def test_one_flow_takes_latency_plus_bytes_over_the_slower_end(up: float, down: float) -> None:
    env, net = make_net([up, up], [down, down], [0.013, 0.029])
    box = send_at(env, net, 0.7, 0, 1, 3.3 * MB)
    env.run()
    assert box[0].done.value == approx(0.7 + (0.013 + 0.029) + 3.3 * MB / min(up, down))
    assert box[0].end_s == box[0].done.value


def test_transfer_times_scalar_latency_is_the_route_latency() -> None:
    finish = transfer_times([(MB, 4 * MB), (2 * MB, 0.5 * MB)], 0.25, [(0, 1, 3 * MB, 1.5)])
    assert finish == [approx(1.5 + 0.25 + 3 * MB / (0.5 * MB))]


def test_matrix_latency_uses_the_route_entry() -> None:
    latency_s = np.array([[0.0, 0.3, 0.1], [0.2, 0.0, 0.4], [0.6, 0.7, 0.0]])
    hosts = [(MB, MB)] * 3
    finish = transfer_times(hosts, latency_s, [(2, 1, MB, 0.0), (1, 0, 0.0, 1.0)])
    assert finish == [approx(0.7 + 1.0), approx(1.0 + 0.2)]


# -- sharing ----------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_k_equal_flows_from_one_uploader_each_take_k_times_longer(k: int) -> None:
    hosts = [(2 * MB, 2 * MB)] + [(MB, 10 * MB)] * k
    transfers = [(0, j, 1.5 * MB, 0.0) for j in range(1, k + 1)]
    finish = transfer_times(hosts, 0.04, transfers)
    assert finish == [approx(0.04 + k * 1.5 * MB / (2 * MB))] * k


def test_a_flow_in_each_direction_does_not_interact() -> None:
    finish = transfer_times(
        [(MB, 3 * MB), (2 * MB, 0.5 * MB)], 0.1, [(0, 1, MB, 0.0), (1, 0, MB, 0.0)]
    )
    assert finish == [approx(0.1 + MB / (0.5 * MB)), approx(0.1 + MB / (2 * MB))]


def test_a_later_flow_gets_the_left_over_capacity() -> None:
    # uploader 0 at 1 MB/s: A (3 MB) alone on [0, 1), shares with B (1 MB) until B is done
    # at 1 + 2 = 3 (A has 2 - 1 = 1 MB left), then A alone again: done at 4.
    hosts = [(MB, 10 * MB), (10 * MB, 10 * MB), (10 * MB, 10 * MB)]
    finish = transfer_times(hosts, 0.0, [(0, 1, 3 * MB, 0.0), (0, 2, MB, 1.0)])
    assert finish == [approx(4.0), approx(3.0)]


def test_a_resource_stays_saturated_while_it_has_flows() -> None:
    env, net = make_net([MB, 10 * MB, 10 * MB], [10 * MB] * 3, [0.0, 0.0, 0.0])
    send_at(env, net, 0.0, 0, 1, 2.5 * MB)
    send_at(env, net, 0.5, 0, 2, 0.7 * MB)
    samples = []
    for t_s in (0.25, 0.75, 1.3, 2.0, 3.1):
        env.run(until=t_s)
        samples.append(net.bytes_out[0])
    env.run()
    assert samples == [approx(MB * t) for t in (0.25, 0.75, 1.3, 2.0, 3.1)]
    assert net.bytes_out[0] == approx(3.2 * MB)
    assert net.bytes_in.tolist() == [0.0, approx(2.5 * MB), approx(0.7 * MB)]


def test_a_download_bottleneck_leaves_the_uploader_to_others() -> None:
    # 0 -> 1 limited to 0.5 MB/s by 1's download; 0 -> 2 gets the other 1.5 MB/s
    hosts = [(2 * MB, MB), (MB, 0.5 * MB), (MB, 4 * MB)]
    finish = transfer_times(hosts, 0.0, [(0, 1, MB, 0.0), (0, 2, 3 * MB, 0.0)])
    assert finish == [approx(2.0), approx(2.0)]


def test_flows_starting_and_ending_at_the_same_instant() -> None:
    # A (0 -> 1) ends at 1.0 exactly when B (0 -> 2) enters; C and D enter together at 2.0
    hosts = [(MB, 10 * MB)] + [(10 * MB, 10 * MB)] * 3
    transfers = [(0, 1, MB, 0.0), (0, 2, MB, 1.0), (0, 3, MB, 2.0), (0, 1, MB, 2.0)]
    finish = transfer_times(hosts, 0.0, transfers)
    assert finish == [approx(1.0), approx(2.0), approx(4.0), approx(4.0)]


def test_rtt_weighted_shares_are_proportional_to_one_over_latency() -> None:
    # route latencies 0.1 and 0.3, both flows enter at 0.3: weights 10 and 10/3 give
    # 3 and 1 MB/s of the 4 MB/s uploader; the first is done at 1.3 and the second
    # finishes its last 2 MB alone at 4 MB/s
    latency_s = np.array([[0.0, 0.1, 0.3], [0.1, 0.0, 0.1], [0.3, 0.1, 0.0]])
    hosts = [(4 * MB, MB), (MB, 100 * MB), (MB, 100 * MB)]
    transfers = [(0, 1, 3 * MB, 0.2), (0, 2, 3 * MB, 0.0)]
    weighted = transfer_times(hosts, latency_s, transfers, sharing="rtt_weighted")
    plain = transfer_times(hosts, latency_s, transfers)
    assert weighted == [approx(1.3), approx(1.8)]
    assert plain == [approx(1.8), approx(1.8)]


def test_rtt_weighted_needs_positive_route_latencies() -> None:
    _, net = make_net([MB, MB], [MB, MB], [0.0, 0.0], sharing="rtt_weighted")
    with pytest.raises(NetworkError, match="positive route latency"):
        net.send(0, 1, MB)


# -- degenerate flows -------------------------------------------------------------------
def test_a_zero_byte_flow_takes_only_the_latency() -> None:
    finish = transfer_times([(MB, MB), (MB, MB)], 0.35, [(0, 1, 0.0, 2.0)])
    assert finish == [approx(2.35)]


def test_a_zero_byte_flow_without_latency_completes_at_once() -> None:
    env, net = make_net([MB, MB], [MB, MB], [0.0, 0.0])
    flow = net.send(0, 1, 0)
    env.run()
    assert flow.done.value == 0.0
    assert net.flows_completed == 1


def test_infinite_capacity_never_limits() -> None:
    inf = math.inf
    hosts = [(inf, MB), (inf, 2 * MB), (inf, inf), (inf, inf)]
    transfers = [(0, 1, MB, 0.0), (2, 1, MB, 0.0), (0, 2, 5 * MB, 0.0), (3, 2, MB, 1.0)]
    finish = transfer_times(hosts, 0.5, transfers)
    # 1's download (2 MB/s) split in two; 0 -> 2 and 3 -> 2 limited by nothing
    assert finish == [approx(1.5), approx(1.5), approx(0.5), approx(1.5)]


# -- failures ---------------------------------------------------------------------------
def test_a_preempted_peer_fails_its_flows_at_that_instant() -> None:
    env, net = make_net([MB, MB, MB], [MB, 10 * MB, 10 * MB], [0.25, 0.25, 0.25])
    doomed = send_at(env, net, 0.0, 0, 1, 2 * MB)
    survivor = send_at(env, net, 0.0, 0, 2, 2 * MB)
    late = send_at(env, net, 1.4, 2, 1, MB)
    caught = []

    def watch() -> simpy.events.ProcessGenerator:
        yield env.timeout(0)
        try:
            yield doomed[0].done
        except FlowFailed as error:
            caught.append((env.now, error.peer, error.flow.id))

    env.process(watch())
    env.run(until=1.5)
    failed = net.fail_peer(1)
    env.run()
    # 0.5 s of bandwidth at 0.5 MB/s went through before the failure at 1.5
    assert caught == [(1.5, 1, doomed[0].id)]
    assert [f.id for f in failed] == [doomed[0].id, late[0].id]
    assert doomed[0].bytes_sent == approx(0.5 * MB)
    assert late[0].bytes_sent == 0.0
    assert net.bytes_out[0] == approx(2.5 * MB)
    assert net.bytes_in[1] == approx(0.5 * MB)
    # the survivor had 1.5 MB left at 1.5 and then the whole uploader
    assert survivor[0].done.value == approx(3.0)
    assert (net.flows_started, net.flows_completed, net.flows_failed) == (3, 1, 2)
    assert net.bytes_sent_total == approx(2.5 * MB)


def test_an_unawaited_failure_does_not_crash_the_environment() -> None:
    env, net = make_net([MB, MB], [MB, MB], [0.1, 0.1])
    flow = net.send(0, 1, MB)
    env.run(until=0.1)
    net.fail_peer(0)
    env.run()
    assert not flow.done.ok
    assert isinstance(flow.done.value, FlowFailed)
    assert isinstance(flow.done.value, AvsimError)
    assert flow.phase == "failed"
    assert flow.end_s == 0.1


# -- topology ---------------------------------------------------------------------------
def test_shared_links_limit_flows_across_them() -> None:
    graph = nx.Graph()
    graph.add_edge("a", "core", capacity=MB, latency=0.01)
    graph.add_edge("b", "core", capacity=math.inf, latency=0.02)
    topo = LinkGraph(graph, ["a", "a", "b", "b", "a"])
    hosts = [(10 * MB, 10 * MB)] * 5
    transfers = [(0, 2, MB, 0.0), (1, 3, MB, 0.0), (4, 1, MB, 0.0), (2, 0, MB, 0.0)]
    finish = transfer_times(hosts, 0.1, transfers, links=topo)
    # a -> b flows share the 1 MB/s a-core link and gain its latency; within a node no
    # link; b -> a uses the link's other direction (full duplex)
    assert finish == [approx(0.13 + 2.0), approx(0.13 + 2.0), approx(0.2), approx(0.13 + 1.0)]


def test_a_half_duplex_link_is_shared_by_both_directions() -> None:
    graph = nx.Graph([("a", "b", {"capacity": MB})])
    topo = LinkGraph(graph, ["a", "b"], duplex="half")
    finish = transfer_times(
        [(10 * MB, 10 * MB)] * 2, 0.0, [(0, 1, MB, 0.0), (1, 0, MB, 0.0)], links=topo
    )
    assert finish == [approx(2.0), approx(2.0)]


def test_routes_follow_the_shortest_path_by_latency() -> None:
    graph = nx.Graph()
    graph.add_edge("a", "b", capacity=0.5 * MB, latency=0.5)
    graph.add_edge("a", "c", capacity=4 * MB, latency=0.1)
    graph.add_edge("c", "b", capacity=2 * MB, latency=0.1)
    topo = LinkGraph(graph, {0: "a", 1: "b"})
    finish = transfer_times([(10 * MB, 10 * MB)] * 2, 0.0, [(0, 1, MB, 0.0)], links=topo)
    assert finish == [approx(0.2 + 0.5)]


def test_unreachable_peers_are_an_error() -> None:
    graph = nx.Graph()
    graph.add_nodes_from(["a", "b"])
    with pytest.raises(NetworkError, match="path"):
        transfer_times([(MB, MB)] * 2, 0.0, [(0, 1, MB, 0.0)], links=LinkGraph(graph, ["a", "b"]))


# -- determinism and errors -------------------------------------------------------------
def test_same_inputs_give_identical_times() -> None:
    rng = np.random.default_rng(7)
    hosts = [(float(u), float(d)) for u, d in rng.uniform(1e5, 1e7, size=(16, 2))]
    transfers = [
        (int(s), int((s + o) % 16), float(b), float(t))
        for s, o, b, t in zip(
            rng.integers(0, 16, 200),
            rng.integers(1, 16, 200),
            rng.uniform(0, 1e6, 200),
            np.round(rng.uniform(0, 5, 200), 1),
            strict=True,
        )
    ]
    assert transfer_times(hosts, 0.02, transfers) == transfer_times(hosts, 0.02, transfers)


@pytest.mark.parametrize(
    ("up", "down", "latency_s", "where"),
    [
        ([MB, 0.0], [MB, MB], [0.0, 0.0], "upload_bytes_per_s"),
        ([MB, MB], [MB, math.nan], [0.0, 0.0], "download_bytes_per_s"),
        ([MB, MB], [MB], [0.0, 0.0], "download_bytes_per_s"),
        ([MB, MB], [MB, MB], [0.0, -1.0], "latency_s"),
        ([MB, MB], [MB, MB], [0.0, math.inf], "latency_s"),
        ([MB, MB], [MB, MB], np.zeros((3, 3)), "latency_s"),
    ],
)
def test_bad_network_inputs_name_the_parameter(up, down, latency_s, where: str) -> None:
    with pytest.raises(NetworkError, match=where):
        make_net(up, down, latency_s)


def test_bad_sends_are_errors() -> None:
    _, net = make_net([MB, MB], [MB, MB], [0.0, 0.0])
    with pytest.raises(NetworkError, match="send\\(dst\\)"):
        net.send(0, 2, MB)
    with pytest.raises(NetworkError, match="nbytes"):
        net.send(0, 1, -1.0)
    with pytest.raises(NetworkError, match="sharing"):
        make_net([MB], [MB], [0.0], sharing="fair")
    assert net.flows_started == 0


def test_callbacks_can_be_attached_after_an_instant_send() -> None:
    env, net = make_net([MB, MB], [MB, MB], [0.0, 0.0])
    seen: list[float] = []
    net.send(0, 1, 0.0).done.callbacks.append(lambda event: seen.append(event.value))
    env.run()
    assert seen == [0.0]


def test_a_done_event_yielded_after_completion_resumes_at_once() -> None:
    env, net = make_net([MB, MB], [MB, MB], [0.0, 0.0])
    flow = net.send(0, 1, MB)
    got: list[tuple[float, float]] = []

    def late() -> simpy.events.ProcessGenerator:
        yield env.timeout(5.0)
        value = yield flow.done
        got.append((env.now, value))

    env.process(late())
    env.run()
    assert got == [(5.0, approx(1.0))]
