"""random_pairs, the example of ``docs/adding-a-protocol.md``: the tests a protocol's
author writes by hand.

The stateful property tests (``tests/property/test_stateful_rounds.py``,
``test_stateful_network.py``) already check the invariants random_pairs declares, under
any churn and on both clocks, because they run every registered protocol. What is left
is what only this protocol promises: its pairs, its expected variance factor, the same
arithmetic on both clocks, a broken pair, and a run from a scenario file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import protocols
import sim
from protocols.contract import Context, State
from sim.cli import app
from tests.integration.test_network_clock import S_BYTES, UP, scenario

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "adding-a-protocol.md"

SCENARIO = """\
name: pairs
peers: {count: 16}
vector: {dim: 4}
protocol: {name: random_pairs}
stop: {max_rounds: 10, target_var: 0}
"""


def build(n: int, dim: int = 3, seed: int = 0, **params: str) -> tuple[protocols.Protocol, State]:
    """A random_pairs protocol on n peers and a state of normal vectors."""
    cls = protocols.get("random_pairs")
    protocol = cls(cls.Params(**params), Context(n, dim, 8, np.random.default_rng(seed)))
    return protocol, State(np.random.default_rng(seed + 1).normal(size=(n, dim)))


def var(x: np.ndarray) -> float:
    """Population variance over peers, averaged over coordinates (the ``var`` metric)."""
    return float(((x - x.mean(axis=0)) ** 2).mean())


@pytest.mark.parametrize("n_present", [8, 7])
def test_each_present_peer_is_in_at_most_one_pair_which_holds_its_mean(n_present):
    protocol, state = build(10)
    present = np.zeros(10, dtype=bool)
    present[:n_present] = True
    plan = protocol.plan(present, 0)
    flows = plan.flows()
    assert sorted(flows.src) == sorted(flows.dst)  # both ends send: 2 flows per pair
    assert np.unique(flows.src).size == flows.src.size == 2 * (n_present // 2)
    assert present[flows.src].all()
    x0 = state.x.copy()
    plan.finish(state, np.zeros(10, dtype=bool))
    half = flows.src.size // 2
    for i, j in zip(flows.src[:half], flows.dst[:half], strict=True):
        np.testing.assert_allclose(state.x[[i, j]], [(x0[i] + x0[j]) / 2] * 2, rtol=1e-15)
    left_out = np.setdiff1d(np.arange(10), flows.src)
    np.testing.assert_array_equal(state.x[left_out], x0[left_out])


def test_the_mean_is_conserved_whoever_is_present():
    protocol, state = build(12)
    mean0 = state.x.mean(axis=0)
    presence = np.random.default_rng(7)
    for t in range(30):
        protocol.round(state, presence.random(12) < 0.8, t)
    np.testing.assert_allclose(state.x.mean(axis=0), mean0, rtol=1e-12, atol=1e-15)


def expected_factor(n: int) -> float:
    """E[var after] / var before for one round with all n peers present.

    With y_i = x_i − x̄ (so Σ y_i = 0), averaging a pair (i, j) lowers Σ_k ‖y_k‖² by
    ‖y_i − y_j‖²/2, and Σ_{i<j} ‖y_i − y_j‖² = n·Σ_k ‖y_k‖². A uniform random matching
    pairs two given peers with probability p = 1/(n−1) when n is even; when n is odd one
    peer sits out and p = (n−2)/n · 1/(n−2) = 1/n. So the factor is 1 − n·p/2:
    (n−2)/(2(n−1)) for n even (7/15 for 16 peers), exactly 1/2 for n odd.
    """
    p = 1 / (n - 1) if n % 2 == 0 else 1 / n
    return 1 - n * p / 2


@pytest.mark.parametrize("n", [16, 15])
def test_one_round_shrinks_var_by_the_expected_factor(n):
    """The mean of 4000 one-round ratios from the same x is within 5 standard errors of
    the factor (a false alarm 6e-7 of the time; the seed is fixed anyway), and the
    other parity's formula is outside that band: the check tells the two apart."""
    protocol, state = build(n, dim=4, seed=3)
    x0, everyone = state.x.copy(), np.ones(n, dtype=bool)
    ratios = []
    for t in range(4000):
        state.x = x0.copy()
        protocol.round(state, everyone, t)
        ratios.append(var(state.x) / var(x0))
    tolerance = 5 * np.std(ratios) / np.sqrt(len(ratios))
    assert abs(np.mean(ratios) - expected_factor(n)) < tolerance
    other_parity = expected_factor(n + 1) if n % 2 == 0 else (n - 2) / (2 * (n - 1))
    assert abs(np.mean(ratios) - other_parity) > tolerance


@pytest.mark.parametrize("compression", ["none", "uniform8"])
def test_without_churn_both_clocks_give_bit_identical_vectors(compression):
    protocol = {"name": "random_pairs", "compression": compression}
    net = sim.run(scenario(protocol))
    rounds = sim.run(scenario(protocol, clock="rounds"))
    np.testing.assert_array_equal(net.state.x, rounds.state.x)
    assert net.summary["bytes_sent"] == rounds.summary["bytes_sent"]
    assert net.summary["pairs_averaged"] == rounds.summary["pairs_averaged"] == 5 * 8


def test_a_network_round_takes_the_latency_plus_one_vector_over_the_uplink():
    result = sim.run(scenario({"name": "random_pairs"}))
    per_round = 0.020 + S_BYTES / UP  # each peer sends one vector and receives one
    assert result.summary["sim_time_s"] == pytest.approx(5 * per_round, rel=1e-12)


def test_a_pair_with_a_lost_end_is_not_averaged():
    protocol, state = build(8)
    plan = protocol.plan(np.ones(8, dtype=bool), 0)
    flows = plan.flows()
    src, dst = flows.src, flows.dst
    lost = np.zeros(8, dtype=bool)
    lost[src[0]] = True
    x0 = state.x.copy()
    stats = plan.finish(state, lost)
    unchanged = np.all(state.x == x0, axis=1)
    assert set(np.flatnonzero(unchanged)) == {src[0], dst[0]}  # the lost peer and its partner
    assert protocol.counters == {"pairs_averaged": 3, "pairs_broken": 1}
    assert stats.messages == 8  # what was sent, the broken pair included
    assert stats.mean_drift == 0.0


def test_a_peer_preempted_mid_round_on_the_network_clock_breaks_its_pair(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("peer,down_s,up_s\n3,0.015,10\n")
    one_round = {"stop.max_rounds": 1}
    hit = sim.run(scenario({"name": "random_pairs"}, churn={"model": "trace", "file": str(trace)},
                           **one_round))  # fmt: skip
    x0 = sim.run(scenario({"name": "random_pairs"}, **{"stop.max_rounds": 0})).state.x
    unchanged = np.flatnonzero(np.all(hit.state.x == x0, axis=1))
    assert unchanged.size == 2
    assert 3 in unchanged
    assert hit.summary["pairs_broken"] == 1
    np.testing.assert_allclose(hit.state.x.mean(axis=0), x0.mean(axis=0), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("compression", ["none", "quantile8"])
def test_the_arithmetic_is_the_same_on_another_array_backend(compression):
    xps = pytest.importorskip("array_api_strict")
    on_numpy, state = build(9, dim=300, compression=compression)
    on_strict, _ = build(9, dim=300, compression=compression)
    other = State(xps.asarray(state.x.copy()))
    present = np.arange(9) != 2
    for t in range(3):
        expected = on_numpy.round(state, present, t)
        assert on_strict.round(other, present, t) == expected
    np.testing.assert_array_equal(np.asarray(other.x), state.x)


def test_a_scenario_file_runs_through_sim_run_and_the_cli(tmp_path):
    path = tmp_path / "pairs.yaml"
    path.write_text(SCENARIO)
    result = sim.run(sim.load_scenario(path), seed=0)
    assert result.summary["rounds"] == 10
    assert result.metrics["var"].iloc[-1] < result.metrics["var"].iloc[0] / 2**5

    runner = CliRunner()
    cli = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "out"), "--seed", "0"])
    assert cli.exit_code == 0, cli.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["protocol"] == "random_pairs"
    assert summary["runs"][0]["final_var"] == result.summary["final_var"]
    assert "random_pairs: each round the present peers" in runner.invoke(app, ["list"]).stdout
    assert '"random_pairs"' in runner.invoke(app, ["schema"]).stdout


# -- the guide shows the code it describes ------------------------------------------------

EXCERPT = re.compile(r"<!-- excerpt: (\S+) -->\n```[a-z]*\n(.*?)```", re.DOTALL)


def excerpts() -> dict[str, list[list[str]]]:
    """The guide's code blocks marked ``<!-- excerpt: PATH -->``, by path, in order."""
    found: dict[str, list[list[str]]] = {}
    for path, block in EXCERPT.findall(GUIDE.read_text()):
        found.setdefault(path, []).append(block.splitlines())
    return found


def find_slice(lines: list[str], block: list[str], start: int) -> int:
    """Where ``block`` starts as consecutive lines of ``lines``, at ``start`` or later."""
    for k in range(start, len(lines) - len(block) + 1):
        if lines[k : k + len(block)] == block:
            return k
    raise AssertionError(f"not found verbatim after line {start + 1}: {block[0]!r}")


def test_every_python_block_of_the_guide_is_verbatim_from_its_file():
    found = excerpts()
    assert {"protocols/random_pairs.py", "tests/unit/test_random_pairs.py"} <= set(found)
    assert GUIDE.read_text().count("```python") == sum(len(b) for b in found.values())
    for path, blocks in found.items():
        lines = (ROOT / path).read_text().splitlines()
        for block in blocks:
            find_slice(lines, block, 0)


def test_the_guide_shows_all_of_random_pairs_in_order():
    """The module's excerpts, in order, leave out no line but blank ones: a change to
    the module is a change to the guide."""
    lines = (ROOT / "protocols" / "random_pairs.py").read_text().splitlines()
    position = 0
    for block in excerpts()["protocols/random_pairs.py"]:
        start = find_slice(lines, block, position)
        skipped = [line for line in lines[position:start] if line.strip()]
        assert not skipped, f"the guide leaves out {skipped}"
        position = start + len(block)
    assert not [line for line in lines[position:] if line.strip()], "the guide stops early"
