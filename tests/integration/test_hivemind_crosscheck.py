"""Cross-check of ``moshpit`` against hivemind's averager (the Moshpit reference code).

hivemind 1.1.12 (with CPU torch) lives in its own virtualenv, ``.venv-hivemind``, so
it runs in a subprocess: ``hivemind_runner.py`` next to this file starts 8 real
``DecentralizedAverager`` peers on loopback on a 2×2×2 grid (group size 2, 2 group
bits) and runs 3 rounds. ``make crosscheck`` installs it; without it these tests skip.

Mapping. hivemind's group key is ``prefix.0b<bits>`` with the oldest bit first: our
key code with the oldest coordinate as the most significant digit. Peer i starts with
the bits of i // 2 (our full-grid initial keys). When a group assembles, each member
drops its oldest bit and appends its "generalized index": a permutation, seeded by the
random group id, of its position in the group's peer order — so hivemind's group order
cannot be forced, but it can be read back: our chunk index is a member's position in
the group's member order, and listing each group's members by the bit they appended
gives ``moshpit`` the same group order. With that order (fed through the protocol's
``rng.permutation``), ``moshpit`` must predict every peer's key and vector each round.

Tolerance. hivemind averages float32 (its reducer accumulates in float32, then each
peer adds ``mean − own`` to its vector), we average in float64: a few float32 ulps per
round, so rtol = atol = 1e-6 on O(1) values.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from protocols.contract import Context, State
from protocols.moshpit import Moshpit, MoshpitParams
from tests.integration.hivemind_env import HIVEMIND_PYTHON, hivemind_available

pytestmark = pytest.mark.crosscheck

RUNNER = Path(__file__).with_name("hivemind_runner.py")
N_PEERS, SIZE, DIMS, DIM, ROUNDS = 8, 2, 3, 16, 3
RTOL = ATOL = 1e-6


def initial_vectors() -> np.ndarray:
    """(8, 16) float32 vectors, the same on both sides."""
    return np.random.default_rng(2021).standard_normal((N_PEERS, DIM)).astype(np.float32)


def initial_bits() -> list[str]:
    """Peer i starts in group i // M: our full-grid initial keys, as hivemind bits."""
    return [format(i // SIZE, f"0{DIMS - 1}b") for i in range(N_PEERS)]


@pytest.fixture(scope="module")
def hivemind_rounds() -> list[dict[str, Any]]:
    reason = hivemind_available()
    if reason is not None:
        pytest.skip(reason)
    problem = {
        "vectors": initial_vectors().tolist(),
        "group_bits": initial_bits(),
        "target_group_size": SIZE,
        "rounds": ROUNDS,
        "min_matchmaking_time": 5.0,
        "request_timeout": 3.0,
        "step_timeout": 120.0,
    }
    done = subprocess.run(
        [str(HIVEMIND_PYTHON), str(RUNNER)],
        input=json.dumps(problem),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"hivemind runner failed:\n{done.stderr[-4000:]}"
    rounds = json.loads(done.stdout)["rounds"]
    assert len(rounds) == ROUNDS
    return cast(list[dict[str, Any]], rounds)


def before_round(rounds: list[dict[str, Any]], t: int) -> np.ndarray:
    """hivemind's vectors when round t starts (float64)."""
    return np.array(rounds[t - 1]["vectors"] if t else initial_vectors(), dtype=np.float64)


def distinct_groups(groups: list[list[int]]) -> list[list[int]]:
    """The round's groups, each once (as hivemind ordered it)."""
    return list({tuple(sorted(g)): g for g in groups}.values())


def test_every_peer_holds_the_exact_mean_after_three_rounds(
    hivemind_rounds: list[dict[str, Any]],
) -> None:
    mean = initial_vectors().astype(np.float64).mean(axis=0)
    final = np.array(hivemind_rounds[-1]["vectors"])
    np.testing.assert_allclose(final, np.broadcast_to(mean, final.shape), rtol=RTOL, atol=ATOL)
    # ... and not before: after round 2 the peers still disagree
    spread = np.ptp(np.array(hivemind_rounds[-2]["vectors"]), axis=0)
    assert spread.max() > 1e-2


@pytest.mark.parametrize("t", range(ROUNDS))
def test_each_group_holds_the_mean_of_its_members_pre_round_vectors(
    hivemind_rounds: list[dict[str, Any]], t: int
) -> None:
    groups = hivemind_rounds[t]["groups"]
    for peer, group in enumerate(groups):
        assert peer in group, f"round {t}: peer {peer} not in its group {group}"
        assert len(group) == SIZE, f"round {t}: peer {peer} in a group of {len(group)}"
        for other in group:
            assert sorted(groups[other]) == sorted(group), f"round {t}: groups disagree"
    before = before_round(hivemind_rounds, t)
    after = np.array(hivemind_rounds[t]["vectors"])
    for group in distinct_groups(groups):
        mean = before[group].mean(axis=0)
        for peer in group:
            np.testing.assert_allclose(after[peer], mean, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("t", range(ROUNDS))
def test_groups_are_the_peers_with_equal_keys(
    hivemind_rounds: list[dict[str, Any]], t: int
) -> None:
    bits = hivemind_rounds[t]["bits_before"]
    for group in hivemind_rounds[t]["groups"]:
        assert len({bits[peer] for peer in group}) == 1
    assert len(distinct_groups(hivemind_rounds[t]["groups"])) == SIZE ** (DIMS - 1)


class ScriptedRng:
    """Stands in for the protocol's generator: ``permutation`` returns given visit orders."""

    def __init__(self, visits: list[np.ndarray]) -> None:
        self.visits = iter(visits)

    def permutation(self, n: int) -> np.ndarray:
        visit = next(self.visits)
        assert sorted(visit.tolist()) == list(range(n))
        return visit


def hivemind_visit(round_: dict[str, Any]) -> np.ndarray:
    """Every group's members by the bit they appended: hivemind's chunk index order."""
    new_bit = [int(bits[-1]) for bits in round_["bits_after"]]
    visit = []
    for group in distinct_groups(round_["groups"]):
        ordered = sorted(group, key=lambda peer: new_bit[peer])
        assert [new_bit[peer] for peer in ordered] == list(range(SIZE)), "bits not a permutation"
        visit.extend(ordered)
    return np.array(visit)


def test_moshpit_with_hivemind_group_order_predicts_every_round(
    hivemind_rounds: list[dict[str, Any]],
) -> None:
    rng = ScriptedRng([hivemind_visit(r) for r in hivemind_rounds])
    ctx = Context(N_PEERS, DIM, 4, cast(np.random.Generator, rng))
    protocol = Moshpit(MoshpitParams(group_size=SIZE, grid_dims=DIMS), ctx)
    assert protocol.keys.tolist() == [int(bits, 2) for bits in initial_bits()]
    state = State(x=initial_vectors().astype(np.float64))
    present = np.ones(N_PEERS, dtype=bool)
    for t, round_ in enumerate(hivemind_rounds):
        protocol.round(state, present, t)
        theirs = np.array(round_["vectors"])
        np.testing.assert_allclose(state.x, theirs, rtol=RTOL, atol=ATOL, err_msg=f"round {t}")
        keys = [int(bits, 2) for bits in round_["bits_after"]]
        assert protocol.keys.tolist() == keys, f"round {t}: keys differ"
