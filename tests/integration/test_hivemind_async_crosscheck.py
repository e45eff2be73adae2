"""Cross-check of ``schedule: async`` moshpit against an asynchronous swarm of real hivemind.

hivemind 1.1.12 (with CPU torch) lives in ``.venv-hivemind`` (``make crosscheck``
installs it); without it these tests skip. Until avsim has ``schedule: async`` (issue 12:
``schedule`` in ``sim/model/scenario/models.py`` and ``sim/engine/asynchronous.py``)
the comparison tests skip with that reason and only hivemind's side runs.

The swarm. ``hivemind_async_runner.py`` starts 12 real ``DecentralizedAverager`` peers
on loopback, each with its own DHT node, and runs every peer's own loop for 60 s, with
no barrier: sleep its compute time, then ``step()``. ``target_group_size`` 4,
``min_group_size`` 2, 2 group bits (a 4×4 grid: each step replaces the whole key by the
member's 2-bit generalized index), ``min_matchmaking_time`` 2 s, ``request_timeout``
1 s, a step timeout (``averaging_timeout``) of 6 s, ``allreduce_timeout`` 6 s,
float32 vectors of 16. Not the barrier cross-check's group size 2: with
``min_group_size`` 2 every group would have exactly 2 members and the mean group size
could not disagree. 12 peers on 4 keys leave groups under-filled often enough for
``matchmaking_time`` to matter, and the variance takes ~25 s to fall to 1e-8 (a full
16-peer grid holds the exact mean after two steps, 6 s into a run: no curve to compare).
12 rather than 16 also because the swarm alone keeps ~1.3 cores busy.

Mapping. The problem is avsim's own initial state for seed 0 (:func:`build_problem`):
per-peer compute times drawn by ``peers.compute: uniform 0.2–1.5 s``, the initial
vectors, and moshpit's initial keys (3 peers per key; key k is hivemind's bits
``format(k, "02b")``), so hivemind peer i is simulated peer i. The scenario
(:func:`scenario_mapping`, :func:`sim_inputs`): ``clock: network``, ``schedule:
async``, 1 GB/s up and down (loopback: the 64-byte vector's transfer time is nil),
``peers.latency`` = the median RPC ping between DHT nodes / 4 (a ping is two routes, a
route is latency_i + latency_j), ``matchmaking_latency`` = the median of timed DHT
stores and gets (as ``declare_averager`` and ``get_averagers`` make them),
``peers.delay`` = hivemind's overhead per step (below), ``group_size`` 4,
``grid_dims`` 2, ``min_group_size`` 2, ``matchmaking_time`` 2 s, ``averaging_timeout``
6 s, 60 s, rows every 0.25 s (the runner samples every vector every 0.25 s). The delays
are the ones measured *while the swarm runs* (one store, get and ping per second): the
swarm's own load makes the DHT 6–9× slower than idle (0.09–0.14 s against 0.015 s).

Overhead. hivemind spends CPU time in every step that the simulation has no part for;
on this machine (2 cores, the swarm's ~36 processes, other test suites) it is large.
hivemind's own timing (:func:`hivemind_timing`, from the step records; medians over
runs 1–6) puts an under-filled group's all-reduce 0.13–0.19 s after its leader's
expiration (simulated: 0), the last joiner of a full group 0.20–0.35 s after its
``step()`` call (simulated: L + 2 routes ≈ 0.1 s), and the all-reduce of 64 bytes at
0.08–0.16 s (simulated: ~0.01 s). Without it, the async simulator (the working tree of
issue 12, 2026-12-04) did 11–22 % more steps than hivemind in all six runs (367–390
against 301–336) and formed larger groups (3.37–3.45 against 3.11–3.29), and failed
the per-peer test against two runs (gaps of 13 and 10 steps, fastest peers). The test
therefore gives the simulation that overhead as ``peers.delay`` (local work added to
each step): the median expiration lag plus the median all-reduce duration of the same
run (0.21–0.35 s). With it the simulation's steps are within −1.1 … +0.4 per peer of
hivemind's on average in all six runs and its group sizes within 0.15. The overhead
is measured on every run, so on an idle machine it shrinks by itself.

Figures: the steps each peer completed by 60 s; the mean group size (per group); the
first sample time at which ``var`` (mean over peers and coordinates of the squared
distance to the mean) is ≤ 1e-2, 1e-4, 1e-6, 1e-8.

Tolerance. hivemind runs in real time on a shared machine, so its figures vary from run
to run. Five runs of the same problem (2026-12-04, on the project's 2-core machine
with other test suites running: 1-minute load 9.6–14.8 during the runs) gave:

==================  ===========================================  ==========  ====
figure              runs 1–5                                     sd          dof
==================  ===========================================  ==========  ====
steps (sum)         323, 311, 317, 301, 336                      —           —
steps per peer      pooled per-peer sd (shift between runs in)  1.844       48
mean steps/peer     26.92, 25.92, 26.42, 25.08, 28.00            1.092       4
mean group size     3.230, 3.141, 3.108, 3.168, 3.294            0.0742      4
var ≤ 1e-2 (s)      8.00, 8.25, 7.25, 8.76, 7.00                 pooled      16
var ≤ 1e-4 (s)      13.25, 13.26, 11.50, 11.75, 12.00            over the    "
var ≤ 1e-6 (s)      16.33, 18.00, 17.25, 18.75, 17.00            4 levels:   "
var ≤ 1e-8 (s)      22.00, 24.50, 23.26, 23.75, 21.75            0.930       "
==================  ===========================================  ==========  ====

(:func:`spread` computes these from the runs.) If avsim reproduces hivemind, a
simulated figure is one more draw from the distribution hivemind's runs come from, so
its difference from the one fresh hivemind run has sd √2·σ. With σ estimated on ``dof``
degrees of freedom that difference over √2·σ̂ follows Student's t, and a test over k
figures at a family-wise false-alarm rate ALPHA = 1 % allows |avsim − hivemind| ≤
t(1 − ALPHA/(2k); dof)·√2·σ̂ (:func:`tolerance`):

- steps per peer: k = 12, t = 3.57 → 9.3 steps (~35 % of the mean: the runs' common
  shift, set by how much CPU the swarm got, dominates the per-peer sd);
- mean steps per peer: k = 1, t = 4.60 → 7.1 steps;
- mean group size: k = 1, t = 4.60 → 0.48;
- time to each var level: k = 4, t = 3.58 → 4.7 s.

Each comparison test thus fails by chance with probability ≤ 1 %. The spread is that of
a loaded machine; on an idle one, re-measure it (5 runs, :func:`spread`) before
trusting these numbers there, and never widen them to make a comparison pass. Known
disagreement: against run 4 (the most CPU-starved, overhead 0.35 s) the simulation's
variance reaches 1e-6 and 1e-8 6.0 and 7.2 s later than hivemind's; a large overhead
spent as local work before declaring slows the simulated mixing more than hivemind's
(whose overhead falls inside the matchmaking and the all-reduce).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.crosscheck

ROOT = Path(__file__).resolve().parents[2]
HIVEMIND_PYTHON = ROOT / ".venv-hivemind" / "bin" / "python"
RUNNER = Path(__file__).with_name("hivemind_async_runner.py")
#: a finished run to reuse instead of running hivemind (it must hold the same problem)
REUSE_ENV = "AVSIM_HIVEMIND_ASYNC_RUN"

SEED = 0
N_PEERS, GROUP_SIZE, MIN_GROUP_SIZE, GROUP_BITS, DIM = 12, 4, 2, 2, 16
BITS_PER_STEP = int(math.log2(GROUP_SIZE))
GRID_DIMS = GROUP_BITS // BITS_PER_STEP + 1  # the key holds d - 1 base-M digits
COMPUTE = {"dist": "uniform", "low": 0.2, "high": 1.5}  # seconds
MATCHMAKING_TIME, REQUEST_TIMEOUT = 2.0, 1.0
AVERAGING_TIMEOUT = ALLREDUCE_TIMEOUT = 6.0
DURATION_S, SAMPLE_EVERY_S = 60.0, 0.25
#: loopback: a 64-byte vector moves in well under a microsecond at any such rate
LOOPBACK_BYTES_PER_S = 1e9
VAR_LEVELS = (1e-2, 1e-4, 1e-6, 1e-8)
#: family-wise false-alarm rate of each comparison test
ALPHA = 0.01
#: hivemind's run-to-run spread (sd, degrees of freedom), measured: see the docstring
SPREAD = {
    "steps_per_peer": (1.844, 48),
    "mean_steps": (1.092, 4),
    "group_size_mean": (0.0742, 4),
    "level_s": (0.930, 16),
}


def scenario_mapping(
    latency_s: float,
    matchmaking_latency_s: float | None,
    asynchronous: bool,
    overhead_s: float = 0.0,
) -> dict[str, Any]:
    """The avsim scenario of the hivemind swarm (``asynchronous``: with ``schedule: async``;
    ``overhead_s``: hivemind's processing time per step, as ``peers.delay``)."""
    protocol: dict[str, Any] = {
        "name": "moshpit",
        "group_size": GROUP_SIZE,
        "grid_dims": GRID_DIMS,
        "min_group_size": MIN_GROUP_SIZE,
        "matchmaking_time": MATCHMAKING_TIME,
        "fault_model": "idealized",
    }
    data: dict[str, Any] = {
        "name": "hivemind-async-crosscheck",
        "seed": SEED,
        "clock": "network",
        "peers": {
            "count": N_PEERS,
            "upload": LOOPBACK_BYTES_PER_S,
            "download": LOOPBACK_BYTES_PER_S,
            "latency": latency_s,
            "compute": COMPUTE,
            "delay": overhead_s,
        },
        "vector": {"dim": DIM, "dtype": "float32", "init": "normal"},
        "protocol": protocol,
        "stop": {"max_time": DURATION_S, "target_var": 0},
        "metrics": {"every": SAMPLE_EVERY_S},
    }
    if asynchronous:
        data["schedule"] = "async"
        protocol["averaging_timeout"] = AVERAGING_TIMEOUT
        protocol["matchmaking_latency"] = matchmaking_latency_s
    return data


def key_bits(key: int) -> str:
    """An avsim moshpit key as hivemind group bits (oldest base-M digit first)."""
    return format(int(key), f"0{GROUP_BITS}b")


def build_problem() -> dict[str, Any]:
    """The hivemind runner's input: avsim's initial state for the scenario.

    Per-peer compute times, initial vectors and initial keys are avsim's own draws for
    ``SEED`` (the engine's constructor makes them; nothing runs), so hivemind peer i
    and simulated peer i start alike. Latencies and the delay are constants, which draw
    nothing: the placeholders here do not change the draws (``sim_result`` checks the
    compute times).
    """
    from sim.engine.schedules import engine_for
    from sim.model.scenario import scenario_from_mapping

    engine = engine_for(scenario_from_mapping(scenario_mapping(0.0, None, False)), SEED)
    return {
        "vectors": np.asarray(engine.state.x, dtype=np.float32).tolist(),
        "compute_s": engine.peers["compute"].astype(float).tolist(),
        "group_bits": [key_bits(k) for k in engine.protocol.keys],  # type: ignore[attr-defined]
        "target_group_size": GROUP_SIZE,
        "min_group_size": MIN_GROUP_SIZE,
        "min_matchmaking_time": MATCHMAKING_TIME,
        "request_timeout": REQUEST_TIMEOUT,
        "averaging_timeout": AVERAGING_TIMEOUT,
        "allreduce_timeout": ALLREDUCE_TIMEOUT,
        "duration_s": DURATION_S,
        "sample_every_s": SAMPLE_EVERY_S,
        "probe_ops": 200,
        "in_run_probe_every_s": 1.0,
    }


# -- figures, computed alike from a hivemind run and from a simulated run -----------------


def level_times(times: np.ndarray, var: np.ndarray) -> dict[float, float]:
    """For each level of ``VAR_LEVELS``: the first sample time with var <= level (inf: never)."""
    out = {}
    for level in VAR_LEVELS:
        below = np.flatnonzero(var <= level)
        out[level] = float(times[below[0]]) if below.size else math.inf
    return out


def completed(run: dict[str, Any]) -> list[dict[str, Any]]:
    """hivemind's step records that ended by the run's duration (the simulation's stop)."""
    return [s for s in run["steps"] if s["end_s"] <= run["problem"]["duration_s"]]


def hivemind_figures(run: dict[str, Any]) -> dict[str, Any]:
    """Steps per peer, mean group size (per group), failed steps, times to VAR_LEVELS."""
    steps = np.zeros(N_PEERS, dtype=np.int64)
    failed = np.zeros(N_PEERS, dtype=np.int64)
    groups = members = 0.0
    for step in completed(run):
        if step["ok"]:
            steps[step["peer"]] += 1
            groups += 1 / step["group_size"]  # a group of g has g member records
            members += 1
        else:
            failed[step["peer"]] += 1
    samples = run["samples"]
    times = np.array([s["t_s"] for s in samples])
    var = np.array([s["var"] for s in samples])
    return {
        "steps": steps,
        "failed": failed,
        "group_size_mean": members / groups if groups else math.nan,
        "levels": level_times(times, var),
    }


def sim_figures(result: Any) -> dict[str, Any]:
    """The same figures from a simulated run (``schedule: async`` outputs, design §8)."""
    table = result.extra_tables["steps"].set_index("peer").sort_index()
    metrics = result.metrics
    return {
        "steps": table["steps"].to_numpy(np.int64),
        "failed": table["steps_failed"].to_numpy(np.int64),
        "group_size_mean": float(result.summary["group_size_mean"]),
        "levels": level_times(metrics["time_s"].to_numpy(), metrics["var"].to_numpy()),
    }


def spread(runs: list[dict[str, Any]]) -> dict[str, tuple[float, int]]:
    """Run-to-run standard deviations of hivemind's figures over ``runs`` (same problem),
    with their degrees of freedom: the source of the tolerances (module docstring)."""
    figures = [hivemind_figures(run) for run in runs]
    r = len(runs)
    steps = np.array([f["steps"] for f in figures], dtype=np.float64)  # (runs, peers)
    levels = np.array([[f["levels"][lv] for lv in VAR_LEVELS] for f in figures])
    sizes = np.array([f["group_size_mean"] for f in figures])

    def pooled(x: np.ndarray) -> tuple[float, int]:
        dof = x.shape[1] * (r - 1)
        return float(np.sqrt(((x - x.mean(axis=0)) ** 2).sum() / dof)), dof

    return {
        "steps_per_peer": pooled(steps),
        "mean_steps": (float(steps.mean(axis=1).std(ddof=1)), r - 1),
        "group_size_mean": (float(sizes.std(ddof=1)), r - 1),
        "level_s": pooled(levels),
    }


def tolerance(sd: float, dof: int, comparisons: int = 1) -> float:
    """Largest |avsim − hivemind| for a figure whose run-to-run spread is ``sd`` (``dof``
    degrees of freedom), over ``comparisons`` figures at a family-wise ALPHA (two-sided)."""
    from scipy import stats

    return float(stats.t.ppf(1 - ALPHA / (2 * comparisons), dof) * math.sqrt(2) * sd)


# -- hivemind's groups, read back from the step records ------------------------------------


def records_by_peer(run: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """Every peer's step records, in step order."""
    out: dict[int, list[dict[str, Any]]] = {p: [] for p in range(N_PEERS)}
    for step in run["steps"]:
        out[step["peer"]].append(step)
    for peer, steps in out.items():
        steps.sort(key=lambda s: s["index"])
        assert [s["index"] for s in steps] == list(range(len(steps))), f"peer {peer}: gaps"
    return out


def hivemind_groups(run: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Each group once, as its members' step records (in the group's peer order).

    A member's record of a group lists the group's peers in hivemind's order (the
    gathered data); the other members' records of the same group list the same peers
    in the same order, and their steps overlap in time.
    """
    by_peer = records_by_peer(run)
    seen: set[tuple[int, int]] = set()
    groups = []
    for step in run["steps"]:
        if not step["ok"] or (step["peer"], step["index"]) in seen:
            continue
        members = []
        for peer in step["group"]:
            match = [
                s
                for s in by_peer[peer]
                if s["ok"]
                and s["group"] == step["group"]
                and s["start_s"] <= step["end_s"]
                and step["start_s"] <= s["end_s"]
            ]
            assert len(match) == 1, f"group {step['group']} at {step['end_s']:.2f} s: {match}"
            members.append(match[0])
            seen.add((peer, match[0]["index"]))
        groups.append(members)
    return groups


def vector_before(run: dict[str, Any], step: dict[str, Any]) -> np.ndarray:
    """A peer's vector when ``step`` began: after its previous step, or the initial one."""
    if step["index"] == 0:
        return np.array(run["problem"]["vectors"][step["peer"]], dtype=np.float64)
    previous = records_by_peer(run)[step["peer"]][step["index"] - 1]
    return np.array(previous["vector"], dtype=np.float64)


def hivemind_timing(run: dict[str, Any]) -> dict[str, float]:
    """Medians of hivemind's own timing, read from the step records (for diagnosis).

    - ``join_s``: in full groups, the last member's ``step()`` call to the group's
      all-reduce (the simulation's L + 2 routes);
    - ``expiry_lag_s``: in under-filled groups, the leader's expiration (its call +
      ``min_matchmaking_time``) to the all-reduce (the simulation's 0);
    - ``allreduce_s``: the all-reduce stage seen first to the last member's return.

    The all-reduce stage is polled every 10 ms; a step whose stage was never seen is left
    out.
    """
    join, lag, allreduce = [], [], []
    for members in hivemind_groups(run):
        seen = [m["allreduce_s"][-1] for m in members if m.get("allreduce_s")]
        if not seen:
            continue
        begin = min(seen)
        allreduce.append(max(m["end_s"] for m in members) - begin)
        starts = [m["start_s"] for m in members]
        if len(members) == GROUP_SIZE:
            join.append(begin - max(starts))
        elif min(starts) + MATCHMAKING_TIME > max(starts):  # the first declaration's group
            lag.append(begin - min(starts) - MATCHMAKING_TIME)
    return {
        "join_s": float(np.median(join)) if join else math.nan,
        "expiry_lag_s": float(np.median(lag)) if lag else math.nan,
        "allreduce_s": float(np.median(allreduce)) if allreduce else math.nan,
    }


# -- the runs --------------------------------------------------------------------------------


def hivemind_available() -> str | None:
    """None when hivemind can be used, else why not."""
    try:
        probe = subprocess.run(
            [str(HIVEMIND_PYTHON), "-c", "import hivemind"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{HIVEMIND_PYTHON} cannot run ({error}); `make crosscheck` installs hivemind"
    if probe.returncode != 0:
        last = probe.stderr.strip().splitlines()[-1:] or ["no output"]
        return f"hivemind is not importable by {HIVEMIND_PYTHON}: {last[0]}"
    return None


def async_missing() -> str | None:
    """None when avsim has ``schedule: async`` (issue 12), else why the comparison waits."""
    from sim.model.scenario.models import Scenario

    if "schedule" not in Scenario.model_fields:
        return "avsim has no `schedule` key yet (issue 12): only hivemind's side runs"
    if not (ROOT / "sim" / "engine" / "asynchronous.py").exists():
        return "avsim has no sim/engine/asynchronous.py yet (issue 12): only hivemind's side runs"
    return None


@pytest.fixture(scope="module")
def problem() -> dict[str, Any]:
    return build_problem()


@pytest.fixture(scope="module")
def hivemind_run(problem: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One hivemind run of the problem (or the finished one named by $AVSIM_HIVEMIND_ASYNC_RUN)."""
    reuse = os.environ.get(REUSE_ENV)
    if reuse:
        run = json.loads(Path(reuse).read_text())
        assert run["problem"] == problem, f"{reuse} ran another problem; unset {REUSE_ENV}"
        return run
    reason = hivemind_available()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("hivemind_async")
    (folder / "problem.json").write_text(json.dumps(problem))
    done = subprocess.run(
        [str(HIVEMIND_PYTHON), str(RUNNER), "--problem", str(folder / "problem.json"),
         "--out", str(folder / "run.json")],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, f"hivemind runner failed:\n{done.stderr[-4000:]}"
    run = json.loads((folder / "run.json").read_text())
    assert run["version"] == "1.1.12"
    return run


def sim_inputs(run: dict[str, Any]) -> tuple[float, float, float]:
    """(peers.latency, protocol.matchmaking_latency, peers.delay) measured by the hivemind run.

    - latency: a ping is one RPC round trip = two routes; a route is latency_i + latency_j;
    - matchmaking_latency: the median DHT store or get while the swarm ran;
    - delay: hivemind's processing time per step that the simulation has no part for,
      from hivemind's own timing (:func:`hivemind_timing`): the leaders' lag behind
      their expiration plus the all-reduce's duration (module docstring, "Overhead").
    """
    probe, timing = run["in_run_probe"], hivemind_timing(run)
    overhead_s = timing["expiry_lag_s"] + timing["allreduce_s"]
    return probe["ping_median_s"] / 4, probe["matchmaking_latency_s"], overhead_s


@pytest.fixture(scope="module")
def sim_result(hivemind_run: dict[str, Any], problem: dict[str, Any]) -> Any:
    reason = async_missing()
    if reason is not None:
        pytest.skip(reason)
    import sim

    latency_s, matchmaking_latency_s, overhead_s = sim_inputs(hivemind_run)
    data = scenario_mapping(latency_s, matchmaking_latency_s, True, overhead_s)
    result = sim.run(sim.scenario_from_mapping(data), seed=SEED)
    np.testing.assert_array_equal(result.peers["compute"].to_numpy(), problem["compute_s"])
    return result


# -- hivemind's side: the swarm behaved as the simulation's rules say ----------------------


def test_hivemind_groups_follow_the_matchmaking_rules(hivemind_run: dict[str, Any]) -> None:
    groups = hivemind_groups(hivemind_run)
    assert len(groups) >= N_PEERS, "the swarm hardly averaged"
    for members in groups:
        size = len(members)
        where = f"group {members[0]['group']} ending {members[0]['end_s']:.2f} s"
        assert MIN_GROUP_SIZE <= size <= GROUP_SIZE, f"{where}: {size} members"
        assert len({m["key"] for m in members}) == 1, f"{where}: declared under several keys"
        # hivemind's generalized index: distinct new bits for the members of one group
        new_bits = [m["key_after"][-BITS_PER_STEP:] for m in members]
        assert len(set(new_bits)) == size, f"{where}: new bits {new_bits}"


def test_hivemind_groups_hold_their_members_mean(hivemind_run: dict[str, Any]) -> None:
    """Each member ends its step with the mean of the members' vectors at their step's
    start (float32 arithmetic on O(1) values: atol 1e-5)."""
    for members in hivemind_groups(hivemind_run):
        mean = np.mean([vector_before(hivemind_run, m) for m in members], axis=0)
        for m in members:
            np.testing.assert_allclose(m["vector"], mean, rtol=0, atol=1e-5)


def test_hivemind_failed_steps_keep_the_vector(hivemind_run: dict[str, Any]) -> None:
    for step in hivemind_run["steps"]:
        if not step["ok"]:
            np.testing.assert_array_equal(step["vector"], vector_before(hivemind_run, step))
            assert step["key_after"] == step["key"]
            # a step without a group ends at its deadline (a few hundred ms late at most)
            assert step["end_s"] - step["start_s"] >= AVERAGING_TIMEOUT


def test_hivemind_probes_measured_the_dht(hivemind_run: dict[str, Any]) -> None:
    for probe in (hivemind_run["probe"], hivemind_run["in_run_probe"]):
        assert 0 < probe["matchmaking_latency_s"] < MATCHMAKING_TIME
        assert 0 < probe["ping_median_s"] < REQUEST_TIMEOUT


# -- the comparison: avsim's schedule: async against hivemind ------------------------------


def differences(run: dict[str, Any], hm: dict[str, Any], sm: dict[str, Any]) -> str:
    """The figures side by side, with hivemind's own timing, for failure messages."""
    compute = run["problem"]["compute_s"]
    lines = [f"{'peer':>4} {'compute':>8} {'hivemind':>8} {'avsim':>6}"]
    for p in range(N_PEERS):
        lines.append(f"{p:>4} {compute[p]:>8.3f} {hm['steps'][p]:>8} {sm['steps'][p]:>6}")
    lines.append(f"group size mean: hivemind {hm['group_size_mean']:.3f}, "
                 f"avsim {sm['group_size_mean']:.3f}")  # fmt: skip
    for level in VAR_LEVELS:
        lines.append(f"var <= {level:g} at: hivemind {hm['levels'][level]:.2f} s, "
                     f"avsim {sm['levels'][level]:.2f} s")  # fmt: skip
    latency_s, matchmaking_latency_s, overhead_s = sim_inputs(run)
    timing = ", ".join(f"{k} {v:.3f}" for k, v in hivemind_timing(run).items())
    lines.append(f"avsim's inputs: latency {latency_s:.5f} s, matchmaking_latency "
                 f"{matchmaking_latency_s:.4f} s, delay {overhead_s:.3f} s; "
                 f"hivemind's timing (medians, s): {timing}; "
                 f"load average during the run {run['host']['load1_mean_in_run']:.1f}")  # fmt: skip
    return "\n".join(lines)


def test_steps_per_peer_agree_with_hivemind(hivemind_run: dict[str, Any], sim_result: Any) -> None:
    hm, sm = hivemind_figures(hivemind_run), sim_figures(sim_result)
    gap = sm["steps"] - hm["steps"]
    assert np.all(np.abs(gap) <= tolerance(*SPREAD["steps_per_peer"], N_PEERS)), differences(
        hivemind_run, hm, sm
    )


def test_mean_steps_per_peer_agree_with_hivemind(
    hivemind_run: dict[str, Any], sim_result: Any
) -> None:
    hm, sm = hivemind_figures(hivemind_run), sim_figures(sim_result)
    gap = float(sm["steps"].mean() - hm["steps"].mean())
    assert abs(gap) <= tolerance(*SPREAD["mean_steps"]), differences(hivemind_run, hm, sm)


def test_mean_group_size_agrees_with_hivemind(
    hivemind_run: dict[str, Any], sim_result: Any
) -> None:
    hm, sm = hivemind_figures(hivemind_run), sim_figures(sim_result)
    gap = sm["group_size_mean"] - hm["group_size_mean"]
    assert abs(gap) <= tolerance(*SPREAD["group_size_mean"]), differences(hivemind_run, hm, sm)


@pytest.mark.parametrize("level", VAR_LEVELS)
def test_variance_decays_like_hivemind(
    hivemind_run: dict[str, Any], sim_result: Any, level: float
) -> None:
    hm, sm = hivemind_figures(hivemind_run), sim_figures(sim_result)
    assert math.isfinite(hm["levels"][level]), f"hivemind never reached var <= {level:g}"
    gap = sm["levels"][level] - hm["levels"][level]
    assert abs(gap) <= tolerance(*SPREAD["level_s"], len(VAR_LEVELS)), differences(
        hivemind_run, hm, sm
    )
