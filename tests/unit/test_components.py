"""A round's flows split into components (:mod:`sim.engine.netclock.components`): flows
that share a peer or wait for one another are in one component, and a component's
flows renumbered from 0 keep their plan."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.contract import Flows
from sim.engine.netclock.components import labels, split, subset
from tests.strategies import group_flow_plans

FIELDS = ("src", "dst", "nbytes", "opens", "waits", "after", "start_s", "timeout_s",
          "streamed", "previous")  # fmt: skip


def _flows(plan: dict[str, Any]) -> Flows:
    return Flows(**{k: plan[k] for k in FIELDS})


def _joined(groups: list[Flows], sizes: list[int]) -> tuple[Flows, np.ndarray]:
    """Groups on disjoint peers as one round (peers, flows and gates moved past those
    before), and each flow's group."""
    columns: dict[str, list[np.ndarray]] = {k: [] for k in FIELDS}
    peer0 = flow0 = gate0 = 0
    for flows, g in zip(groups, sizes, strict=True):
        n = flows.src.size
        for k in FIELDS:
            a = getattr(flows, k)
            if k in ("src", "dst"):
                a = a + peer0
            elif k in ("opens", "waits"):
                a = np.where(a >= 0, a + gate0, -1)
            elif k in ("after", "previous"):
                a = np.where(a >= 0, a + flow0, -1)
            columns[k].append(a)
        gates = np.r_[flows.opens, flows.waits]
        peer0, flow0, gate0 = peer0 + g, flow0 + n, gate0 + int(gates.max(initial=-1)) + 1
    group = np.repeat(np.arange(len(groups)), [f.src.size for f in groups])
    return Flows(**{k: np.concatenate(v) for k, v in columns.items()}), group


@settings(max_examples=200, deadline=None)
@given(st.lists(group_flow_plans(), min_size=1, max_size=5))
def test_groups_on_disjoint_peers_split_back_into_their_plans(plans: list[dict[str, Any]]) -> None:
    """Each component is within one group, closed (what its flows refer to is its own),
    and renumbered it is the group's plan where the group is one component."""
    groups = [_flows(p) for p in plans]
    sizes = [len(p["up"]) for p in plans]
    flows, group = _joined(groups, sizes)
    n_peers = sum(sizes) + 3  # peers no flow uses too
    label = labels(flows, n_peers)
    assert label.size == flows.src.size
    for i in range(flows.src.size):  # flows that share a peer or refer to each other
        for j in range(flows.src.size):
            shared = {flows.src[i], flows.dst[i]} & {flows.src[j], flows.dst[j]}
            tied = (
                flows.after[i] == j
                or flows.previous[i] == j
                or (flows.opens[i] >= 0 and flows.opens[i] in (flows.opens[j], flows.waits[j]))
                or (flows.waits[i] >= 0 and flows.waits[i] == flows.waits[j])
            )
            if shared or tied:
                assert label[i] == label[j]
    parts = split(flows, n_peers)
    assert np.array_equal(np.sort(np.concatenate([idx for idx, _ in parts])),
                          np.arange(flows.src.size))  # fmt: skip
    firsts = [int(idx[0]) for idx, _ in parts]
    assert firsts == sorted(firsts)  # in the order of their first flows
    for index, peers in parts:
        assert np.unique(group[index]).size == 1  # never across groups
        assert np.array_equal(peers, np.unique(np.r_[flows.src[index], flows.dst[index]]))
        mine = subset(flows, index)
        for ref in ("after", "previous"):
            r = getattr(mine, ref)
            assert np.all(r < index.size)
        g = int(group[index[0]])
        if index.size == groups[g].src.size:  # the whole group: its own plan back
            own = groups[g]
            shift = sum(sizes[:g])
            np.testing.assert_array_equal(mine.src, own.src + shift)
            np.testing.assert_array_equal(mine.dst, own.dst + shift)
            for k in ("nbytes", "after", "previous", "start_s", "timeout_s", "streamed"):
                np.testing.assert_array_equal(getattr(mine, k), getattr(own, k), err_msg=k)
            used = np.unique(np.r_[own.opens, own.waits])
            used = used[used >= 0]
            for k in ("opens", "waits"):  # its gates numbered from 0, in their order
                a = getattr(own, k)
                want = np.where(a >= 0, np.searchsorted(used, a), -1)
                np.testing.assert_array_equal(getattr(mine, k), want, err_msg=k)


@settings(max_examples=100, deadline=None)
@given(group_flow_plans())
def test_a_subset_of_every_flow_is_the_plan(plan: dict[str, Any]) -> None:
    """Every flow: the plan itself, its gates numbered from 0 in their order."""
    flows = _flows(plan)
    mine = subset(flows, np.arange(flows.src.size))
    for k in FIELDS:
        a = getattr(flows, k)
        if k in ("opens", "waits"):
            used = np.unique(np.r_[flows.opens, flows.waits])
            used = used[used >= 0]
            a = np.where(a >= 0, np.searchsorted(used, a), -1)
        np.testing.assert_array_equal(getattr(mine, k), a, err_msg=k)


def test_a_butterfly_round_splits_into_its_groups() -> None:
    """Two groups of a Moshpit round (gates, replies after requests, streams) are two
    components, each renumbered to the plan the group alone would have."""
    import protocols._moshpit_net as net

    one = Flows(
        src=np.array([0, 1, 1, 0]), dst=np.array([1, 0, 0, 1]), nbytes=np.ones(4),
        opens=np.array([0, 1, -1, -1]), waits=np.array([-1, -1, 0, 1]),
        after=np.array([-1, -1, 0, 1]), previous=np.array([-1, -1, -1, -1]),
    )  # fmt: skip

    def moved(a: np.ndarray, by: int) -> np.ndarray:
        return np.where(a >= 0, a + by, -1)

    two = Flows(
        src=one.src + 2, dst=one.dst + 2, nbytes=one.nbytes, opens=moved(one.opens, 2),
        waits=moved(one.waits, 2), after=moved(one.after, 4), previous=one.previous,
    )  # fmt: skip
    empty = np.zeros(4)
    both = net._concat([
        Flows(one.src, one.dst, one.nbytes, one.opens, one.waits, one.after, empty, empty,
              np.zeros(4, bool), one.previous),
        Flows(two.src, two.dst, two.nbytes, two.opens, two.waits, two.after, empty, empty,
              np.zeros(4, bool), two.previous),
    ])  # fmt: skip
    parts = split(both, 6)
    assert [idx.tolist() for idx, _ in parts] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [p.tolist() for _, p in parts] == [[0, 1], [2, 3]]
    second = subset(both, parts[1][0])
    np.testing.assert_array_equal(second.opens, one.opens)
    np.testing.assert_array_equal(second.waits, one.waits)
    np.testing.assert_array_equal(second.after, one.after)
