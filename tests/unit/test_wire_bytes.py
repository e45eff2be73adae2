"""``vector.wire_bytes``: the key, the map between simulated and wire coordinates, the
butterfly's pieces on the wire, and the resource estimates (issue 13, part 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from protocols._butterfly import ButterflySetup, apply_pieces, merged, pieces_of
from protocols.contract import Context, simulated_offsets, wire_offsets
from sim.cli import app
from sim.core.errors import ScenarioError
from sim.engine.resources import culprit, footprint, memory_parts
from sim.engine.workload import estimate_events
from sim.kernels.butterfly import butterfly_pieces
from sim.kernels.compression import IDENTITY
from sim.model.scenario import scenario_from_mapping

BASE = {"name": "t", "protocol": {"name": "moshpit", "group_size": 4, "grid_dims": 1}}


def make(**vector):
    return scenario_from_mapping({**BASE, "vector": {"dim": 4096, **vector}})


# -- the key -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1 GB", 10**9), ("1 GiB", 2**30), (1e9, 10**9), (65536, 65536), ("512 KiB", 2**19)],
)
def test_wire_bytes_takes_sizes_with_units(value, expected):
    sc = make(wire_bytes=value)
    assert sc.vector.wire_bytes == expected
    assert sc.vector.wire_size == expected
    assert sc.vector.wire_coords == expected // 8


def test_without_wire_bytes_the_wire_carries_dim_coordinates():
    sc = make(dtype="float32")
    assert sc.vector.wire_bytes is None
    assert sc.vector.wire_size == 4096 * 4
    assert sc.vector.wire_coords == 4096


def test_the_resolved_scenario_keeps_wire_bytes_and_round_trips():
    sc = make(wire_bytes="1 GB")
    dumped = sc.model_dump(mode="json")
    assert dumped["vector"]["wire_bytes"] == 10**9
    assert scenario_from_mapping(dumped) == sc


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (-5, "a size like"),
        (0, "whole number of bytes"),
        (math.nan, "a size like"),
        ("nan", "a size like"),
        ("inf", "a size like"),
        (True, "a size like"),
        ("big", "a size like"),
        ([1], "a size like"),
        ({"dist": "lognormal"}, "a size like"),
        (1.5, "whole number of bytes"),
        (2**60, "whole number of bytes"),
        (1000, "at least vector.dim × 8 = 32768 bytes"),
        (32768 + 4, "a multiple of 8"),
        ("1 PB", "a size like"),
    ],
)
def test_bad_wire_bytes_give_one_line_naming_the_key(value, fragment):
    with pytest.raises(ScenarioError) as info:
        make(wire_bytes=value)
    message = str(info.value)
    assert message.startswith("vector.wire_bytes: expected "), message
    assert fragment in message, message
    assert "\n" not in message


def test_a_wire_too_large_for_the_coordinate_map_is_refused():
    with pytest.raises(ScenarioError) as info:
        scenario_from_mapping({**BASE, "vector": {"dim": 2**20, "wire_bytes": 2**53}})
    message = str(info.value)
    assert message.startswith("vector.wire_bytes: expected at most "), message
    assert "(dim × coordinates ≤ 2**62)" in message
    assert "\n" not in message


def test_the_dtype_sets_the_least_and_the_multiple():
    scenario_from_mapping({**BASE, "vector": {"dim": 4, "dtype": "float16", "wire_bytes": 10}})
    with pytest.raises(ScenarioError, match=r"vector\.wire_bytes: .*multiple of 4"):
        scenario_from_mapping({**BASE, "vector": {"dim": 4, "dtype": "float32", "wire_bytes": 18}})


def test_validate_refuses_a_bad_wire_size_in_one_line(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nprotocol: {name: moshpit}\nvector: {dim: 64}\n")
    runner = CliRunner()
    ok = runner.invoke(app, ["validate", str(path), "--set", "vector.wire_bytes=1 GB"])
    assert ok.exit_code == 0, ok.stderr
    bad = runner.invoke(app, ["validate", str(path), "--set", "vector.wire_bytes=-1"])
    assert bad.exit_code == 2
    assert bad.stderr.splitlines() == [bad.stderr.strip()]
    assert bad.stderr.startswith("error: vector.wire_bytes: expected ")
    assert "Traceback" not in bad.stdout + bad.stderr


# -- Context and the coordinate maps ---------------------------------------------------------


def test_context_sizes_default_to_the_simulated_vector():
    ctx = Context(4, 100, 4, np.random.default_rng(0))
    assert (ctx.wire_coords, ctx.vector_bytes) == (100, 400)
    wide = Context(4, 100, 4, np.random.default_rng(0), wire_bytes=4000)
    assert (wide.wire_coords, wide.vector_bytes) == (1000, 4000)
    assert wide.wire_offsets(np.array([0, 1, 50, 100])).tolist() == [0, 10, 500, 1000]


@pytest.mark.parametrize("wire_bytes", [396, 402, 0])
def test_context_refuses_a_wire_smaller_than_the_vector_or_not_whole(wire_bytes):
    with pytest.raises(ValueError, match="wire_bytes"):
        Context(4, 100, 4, np.random.default_rng(0), wire_bytes=wire_bytes)


@settings(max_examples=200)
@given(dim=st.integers(1, 5000), extra=st.integers(0, 10**7), data=st.data())
def test_offsets_map_ranges_proportionally_and_invert(dim, extra, data):
    wire = dim + extra
    k = np.arange(dim + 1)
    starts = wire_offsets(k, dim, wire)
    assert starts[0] == 0
    assert starts[-1] == wire
    widths = np.diff(starts)
    assert widths.min() >= wire // dim
    assert widths.max() <= -(-wire // dim)
    np.testing.assert_array_equal(simulated_offsets(starts, dim, wire), k)
    lo, hi = sorted(data.draw(st.lists(st.integers(0, wire), min_size=2, max_size=2)))
    a, b = simulated_offsets(np.array([lo, hi]), dim, wire).tolist()
    assert abs((b - a) - (hi - lo) * dim / wire) <= 1  # its share, to within a coordinate


def test_offsets_are_the_identity_without_a_larger_wire():
    k = np.arange(11)
    np.testing.assert_array_equal(wire_offsets(k, 10, 10), k)
    np.testing.assert_array_equal(simulated_offsets(k, 10, 10), k)


# -- the butterfly's pieces on the wire --------------------------------------------------------


def test_pieces_without_a_larger_wire_are_the_simulated_ones():
    counts = np.array([300, 0, 301, 299])
    setup = ButterflySetup(900, 8, 8 * 7, IDENTITY, wire_coords=900)
    bounds, reducer, first, width = setup.pieces(counts)
    expected = pieces_of(counts, 7)
    for got, want in zip((bounds, reducer, first), expected, strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(width, bounds[:, 1] - bounds[:, 0])


@settings(max_examples=100)
@given(
    counts=st.lists(st.integers(0, 40), min_size=1, max_size=6).filter(lambda c: sum(c) > 0),
    factor=st.integers(1, 500),
    extra=st.integers(0, 99),
    piece=st.integers(1, 3000),
)
def test_pieces_cut_the_wire_and_cover_the_simulated_parts(counts, factor, extra, piece):
    counts = np.array(counts)
    dim = int(counts.sum())
    wire = dim * factor + extra
    setup = ButterflySetup(dim, 4, 4 * piece, IDENTITY, wire_coords=wire)
    bounds, reducer, first, width = setup.pieces(counts)
    stops = np.cumsum(counts)
    wire_parts = np.diff(wire_offsets(np.concatenate([[0], stops]), dim, wire))
    # on the wire: pieces of at most part_bytes, ceil(part / piece) of them per part
    assert width.max() <= piece
    assert width.min() >= 1
    np.testing.assert_array_equal(np.bincount(reducer, width, counts.size), wire_parts)
    assert np.bincount(reducer, minlength=counts.size).tolist() == [
        -(-int(w) // piece) for w in wire_parts
    ]
    assert first.sum() == np.count_nonzero(counts)
    # simulated: consecutive ranges covering every coordinate once, inside their part
    assert bounds[0, 0] == 0
    assert bounds[-1, 1] == dim
    np.testing.assert_array_equal(bounds[1:, 0], bounds[:-1, 1])
    assert np.all(bounds[:, 0] >= (stops - counts)[reducer])
    assert np.all(bounds[:, 1] <= stops[reducer])


@settings(max_examples=50)
@given(seed=st.integers(0, 2**16), g=st.integers(2, 5), runs=st.integers(1, 4))
def test_merged_pieces_give_the_piece_by_piece_arithmetic(seed, g, runs):
    rng = np.random.default_rng(seed)
    dim = 8 * g
    counts = np.full(g, 8)
    bounds, reducer, _ = pieces_of(counts, 2)  # 4 pieces of 2 per part
    n_pieces = bounds.shape[0]
    # masks constant over random runs of pieces, as a lost stream makes them
    cuts = np.sort(rng.choice(np.arange(1, n_pieces), size=runs - 1, replace=False))
    run_of = np.searchsorted(cuts, np.arange(n_pieces), side="right")
    contributes = rng.random((runs, g)) < 0.7
    receives = rng.random((runs, g)) < 0.7
    contributes, receives = contributes[run_of], receives[run_of]
    contributes[np.arange(n_pieces), reducer] = True
    x = rng.standard_normal((g + 1, dim))
    members = rng.permutation(g + 1)[:g]
    expected, _ = butterfly_pieces(x.copy(), members, bounds, reducer, contributes, receives)
    setup = ButterflySetup(dim, 8, 16, IDENTITY, wire_coords=dim * 3)
    got, _ = apply_pieces(x.copy(), members, bounds, reducer, contributes, receives, setup)
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=0)
    fewer = merged(bounds, reducer, contributes, receives)[0]
    assert fewer.shape[0] <= min(runs + g, n_pieces)


# -- resources -------------------------------------------------------------------------------


def network(**vector):
    data = {
        **BASE,
        "clock": "network",
        "peers": {"count": 64},
        "vector": {"dim": 4096, **vector},
        "stop": {"max_time": "1 h"},
    }
    return scenario_from_mapping(data)


def test_memory_counts_dim_and_flows_count_the_wire():
    plain, wide = network(), network(wire_bytes=4096 * 8 * 1000)
    assert memory_parts(wide).parts["state"] == memory_parts(plain).parts["state"]
    fp_plain, fp_wide = footprint(plain), footprint(wide)
    assert fp_wide.state_arrays == fp_plain.state_arrays
    assert fp_wide.round_bytes_per_peer == pytest.approx(1000 * fp_plain.round_bytes_per_peer)
    # 1024 coordinates per part on the wire become 1000 pieces of 512 KiB (65536 float64)
    part = 4096 * 1000 // 4
    assert fp_wide.flows_per_round == pytest.approx(2 * 64 * 3 * math.ceil(part / 65536))
    assert memory_parts(wide).parts["network"] > memory_parts(plain).parts["network"]


def test_the_slow_run_estimate_uses_the_wire_size():
    plain_events, _, _ = estimate_events(network())
    wide_events, _, _ = estimate_events(network(wire_bytes="1 GB"))
    # rounds of 1 GB take longer: fewer rounds in the hour, each with more pieces
    assert wide_events != plain_events
    rounds_plain = plain_events / footprint(network()).flows_per_round
    rounds_wide = wide_events / footprint(network(wire_bytes="1 GB")).flows_per_round
    assert rounds_wide < rounds_plain


def test_a_wire_whose_pieces_drive_the_memory_is_blamed():
    sc = network(wire_bytes=2**53)
    assert culprit(sc).key == "vector.wire_bytes"
    assert culprit(network()).key != "vector.wire_bytes"
