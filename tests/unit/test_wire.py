"""Wires as objects (sim/kernels/compression.py): bytes, round trips, the identity, the
name registry, and the one pairwise exchange (sim/kernels/pairwise.py) built on them."""

from typing import get_args

import array_api_strict as xps
import numpy as np
import pytest

from protocols._butterfly import ButterflySetup, ShareCache, compressed_round
from protocols._common import Compression
from protocols._moshpit_net import Matched, plan_groups
from protocols.all_reduce import AllReduce, AllReduceParams
from protocols.base import Context
from protocols.gossip import Gossip, GossipParams
from sim.core.errors import ScenarioError
from sim.kernels import Groups
from sim.kernels.compression import (
    IDENTITY,
    METHODS,
    WIRES,
    Fp16Wire,
    IdentityWire,
    Quantile8Wire,
    Uniform8Wire,
    Wire,
    WireName,
    as_wire,
    roundtrip,
    wire_for,
)
from sim.kernels.pairwise import exchange_differences, move_pairs
from sim.model.scenario.loader import scenario_from_mapping

LOSSY = [wire for wire in WIRES.values() if not wire.exact]


@pytest.mark.parametrize(
    ("wire", "per_coord", "header"),
    [
        (IdentityWire(), 8, 0),
        (Fp16Wire(), 2, 0),
        (Uniform8Wire(), 1, 8),
        (Quantile8Wire(), 1, 1024),
    ],
)
def test_each_wire_costs_its_coordinates_plus_its_header(wire, per_coord, header):
    assert wire.message_bytes(1000, 8) == 1000 * per_coord + header
    assert wire.message_bytes(0, 8) == 0  # an empty message is not sent


@pytest.mark.parametrize("wire", WIRES.values(), ids=METHODS)
def test_nbytes_is_message_bytes_of_every_size_at_once(wire):
    sizes = np.array([[0, 1, 7], [255, 256, 5000]])
    got = wire.nbytes(sizes, 4)
    assert got.dtype == np.float64
    assert got.shape == sizes.shape
    assert got.tolist() == [[wire.message_bytes(int(n), 4) for n in row] for row in sizes]


def test_the_identity_costs_the_vectors_own_itemsize():
    assert IDENTITY.message_bytes(10, 2) == 20
    assert IDENTITY.message_bytes(10, 4) == 40


@pytest.mark.parametrize("wire", WIRES.values(), ids=METHODS)
def test_roundtrip_is_receive_and_the_bytes_of_every_row(wire):
    x = np.random.default_rng(1).normal(size=(3, 300))
    received, nbytes = wire.roundtrip(x)
    np.testing.assert_array_equal(received, wire.receive(x))
    assert received.shape == x.shape
    assert received.dtype == x.dtype
    assert nbytes == 3 * wire.message_bytes(300, 8)
    np.testing.assert_array_equal(roundtrip(x, wire.name)[0], received)


@pytest.mark.parametrize("wire", WIRES.values(), ids=METHODS)
def test_one_message_decodes_as_a_row_of_a_batch(wire):
    x = np.random.default_rng(2).normal(size=500)
    np.testing.assert_array_equal(wire.receive(x), wire.receive(x[None, :])[0])


@pytest.mark.parametrize("wire", LOSSY, ids=[w.name for w in LOSSY])
def test_a_lossy_wire_changes_values_and_leaves_its_input_alone(wire):
    x = np.random.default_rng(3).normal(size=(2, 1000))
    before = x.copy()
    received = wire.receive(x)
    assert received is not x
    assert not np.array_equal(received, x)
    np.testing.assert_array_equal(x, before)
    assert not wire.exact


def test_the_identity_is_exact_and_does_not_copy():
    x = np.random.default_rng(4).normal(size=(4, 9))
    assert IDENTITY.exact
    assert [w.name for w in WIRES.values() if w.exact] == ["none"]
    assert IDENTITY.receive(x) is x
    assert IDENTITY.roundtrip(x)[0] is x
    assert IDENTITY.roundtrip_parts(x, np.array([0, 4]), np.array([4, 9]))[0] is x
    strict = xps.asarray(x)
    assert IDENTITY.receive(strict) is strict


def test_wire_for_maps_every_name_to_its_registered_wire():
    for name in METHODS:
        assert wire_for(name) is WIRES[name]
        assert wire_for(name).name == name
        assert as_wire(name) is as_wire(wire_for(name))
    assert isinstance(IDENTITY, Wire)
    assert wire_for("none") is IDENTITY


@pytest.mark.parametrize("name", ["int4", "None", "", 3, None])
def test_wire_for_rejects_an_unknown_name_listing_the_known_ones(name):
    with pytest.raises(ValueError, match="expected one of none, fp16, uniform8, quantile8"):
        wire_for(name)


def test_the_schema_names_are_the_registry():
    assert get_args(WireName) == METHODS
    assert Compression is WireName


def test_scenario_validation_rejects_an_unknown_wire_in_one_line():
    scenario = {"name": "x", "protocol": {"name": "gossip", "compression": "int4"}}
    with pytest.raises(ScenarioError) as raised:
        scenario_from_mapping(scenario)
    message = str(raised.value)
    assert message.startswith("protocol.compression: expected")
    assert "\n" not in message
    assert "'int4'" in message
    assert all(repr(name) in message for name in METHODS)


def test_a_protocol_builds_its_wire_once_from_its_parameters():
    ctx = Context(8, 4, 8, np.random.default_rng(0))
    gossip = Gossip(GossipParams(compression="uniform8"), ctx)
    assert gossip.wire is WIRES["uniform8"]
    assert Gossip(GossipParams(), ctx).wire is IDENTITY
    assert AllReduce(AllReduceParams(), ctx).wire is IDENTITY  # sends no compressed vectors


# -- the one pairwise exchange --------------------------------------------------------------


def test_an_exact_exchange_shares_one_difference():
    x = np.random.default_rng(5).normal(size=(4, 6))
    d_i, d_j = exchange_differences(x, np.array([0, 1]), np.array([2, 3]))
    assert d_i is d_j
    np.testing.assert_array_equal(d_i, x[[0, 1]] - x[[2, 3]])


@pytest.mark.parametrize("wire", LOSSY, ids=[w.name for w in LOSSY])
def test_each_end_applies_its_own_value_against_the_decoded_other(wire):
    x = np.random.default_rng(6).normal(size=(4, 300))
    d_i, d_j = exchange_differences(x, np.array([0]), np.array([3]), wire)
    q = wire.receive(x[[0, 3]])
    np.testing.assert_array_equal(d_i[0], x[0] - q[1])
    np.testing.assert_array_equal(d_j[0], q[0] - x[3])


@pytest.mark.parametrize("backend", ["numpy", "strict"])
@pytest.mark.parametrize("wire", WIRES.values(), ids=METHODS)
def test_one_exchange_at_a_time_equals_the_batch_bit_for_bit(wire, backend):
    """The network clock (one pair, ints) and the rounds clock (a wave, arrays) run the
    same implementation: applying disjoint pairs one by one gives the batch's bits."""
    x = np.random.default_rng(7).normal(size=(6, 200)).astype(np.float32)
    as_backend = xps.asarray if backend == "strict" else np.array
    i, j = np.array([0, 4, 2]), np.array([5, 1, 3])
    batch = as_backend(x)
    d_i, d_j = exchange_differences(batch, i, j, wire)
    batch = move_pairs(batch, i, j, d_i, d_j, 0.5)
    single = as_backend(x)
    pairs = list(zip(i.tolist(), j.tolist(), strict=True))
    snapshots = [exchange_differences(single, a, b, wire) for a, b in pairs]
    for (a, b), (s_i, s_j) in zip(pairs, snapshots, strict=True):
        single = move_pairs(single, a, b, s_i, s_j, 0.5)
    np.testing.assert_array_equal(np.asarray(single), np.asarray(batch))


def test_move_pairs_scales_each_end():
    x = np.zeros((3, 2))
    move_pairs(x, 0, 2, np.array([1.0, 2.0]), np.array([4.0, 8.0]), 0.25)
    np.testing.assert_array_equal(x, [[-0.25, -0.5], [0.0, 0.0], [1.0, 2.0]])


# -- the butterfly on a lossy wire ----------------------------------------------------------


@pytest.mark.parametrize("wire", LOSSY, ids=[w.name for w in LOSSY])
def test_compressed_round_counts_the_planners_flows(wire):
    """The rounds clock's bytes and messages are those of the network clock's planner for
    the same groups and pieces (equal shares, everyone delivered)."""
    n, dim = 11, 50
    groups = Groups.from_labels(np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1]))
    shares = ShareCache(np.ones(n), np.ones(n, bool), dim, balance=False)
    setup = ButterflySetup(dim, 8, 8 * 7, wire)  # pieces of 7 coordinates
    x = np.random.default_rng(8).normal(size=(n, dim))
    _, nbytes, messages, _ = compressed_round(x, groups, shares, setup)
    members = [groups.order[a : a + c] for a, c in zip(groups.starts, groups.counts, strict=True)]
    _, flows = plan_groups(Matched(members, np.zeros(len(members)), 0.0), shares, setup)
    assert nbytes == float(flows.nbytes.sum())
    assert messages == flows.src.size > 0
