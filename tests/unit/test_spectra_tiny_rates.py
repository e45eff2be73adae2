"""A tiny positive exchange rate is a valid rate: a²cid²'s graph constants χ₁, χ₂ scale
as 1/rate, are ``inf`` once that exceeds the largest float, and a rate that underflows to
0 on every edge (``5e-324``) leaves nothing that mixes. Never a ZeroDivisionError, a
numpy warning or a wrong finite value (χ₂ = 0 for a subnormal rate)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from protocols._spectra import graph_constants
from sim.cli import app


def ring(n: int) -> np.ndarray:
    return np.sort(np.array([[i, (i + 1) % n] for i in range(n)], dtype=np.intp), axis=1)


def constants(edges: np.ndarray, rates: np.ndarray, n: int, transitive: bool = False):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy overflow or divide warning fails
        return graph_constants(edges, rates, n, transitive)


@pytest.mark.parametrize("rate", [1e6, 3.0, 1e-150, 1e-300])
def test_constants_scale_as_one_over_the_rate(rate):
    unit = constants(ring(6), np.full(6, 0.5), 6, transitive=True)
    scaled = constants(ring(6), np.full(6, 0.5 * rate), 6, transitive=True)
    assert unit.chi1 == pytest.approx(2.0, rel=1e-12)  # λ₂ = 2·½·(1 − cos(2π/6)) = ½
    assert scaled.chi1 == pytest.approx(unit.chi1 / rate, rel=1e-12)
    assert scaled.chi2 == pytest.approx(unit.chi2 / rate, rel=1e-12)


@pytest.mark.parametrize("rate", [1e-310, 1e-320])
def test_subnormal_rates_give_constants_beyond_the_largest_float(rate):
    got = constants(ring(6), np.full(6, 0.5 * rate), 6, transitive=True)
    assert got.chi1 == math.inf
    assert got.chi2 == math.inf
    assert got.method == "circulant"


def test_rates_that_underflowed_to_zero_mix_nothing():
    got = constants(ring(4), np.zeros(4), 4, transitive=True)
    assert (got.chi1, got.chi2, got.method) == (math.inf, math.inf, "rates 0")


def test_an_edge_whose_rate_is_zero_is_left_out_and_the_graph_is_no_longer_a_ring():
    edges = ring(5)  # (0,1) (1,2) (2,3) (3,4) and (0,4), which never rings
    rates = np.where((edges == [0, 4]).all(axis=1), 0.0, 1.0)
    got = constants(edges, rates, 5, transitive=True)  # the topology said "ring"
    path = constants(edges[rates > 0], rates[rates > 0], 5)
    assert got.chi1 == pytest.approx(path.chi1, rel=1e-12)
    assert got.chi1 == pytest.approx(1 / (2 * (1 - math.cos(math.pi / 5))), rel=1e-12)
    assert got.chi2 == pytest.approx(0.5, rel=1e-12)  # every edge of a path: R = 1


TINY = """\
name: tiny-rate
peers: {count: 4}
vector: {dim: 8}
protocol: {name: a2cid2, rate: 5.0e-324}
"""


@pytest.mark.parametrize(
    "clock",
    ["clock: rounds\nstop: {max_rounds: 5}\n", "clock: network\nstop: {max_time: 10}\n"],
    ids=["rounds", "network"],
)
def test_avsim_runs_and_describes_a_4_peer_a2cid2_at_rate_5e_324(tmp_path: Path, clock):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(TINY + clock)
    runner = CliRunner()
    done = runner.invoke(app, ["run", str(scenario), "--out", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    assert done.stderr == ""  # no traceback, no RuntimeWarning
    assert (tmp_path / "out" / "summary.json").is_file()
    info = runner.invoke(app, ["info", str(scenario)], env={"COLUMNS": "200"})
    assert info.exit_code == 0, info.output
    assert "rates 0" in info.stdout
