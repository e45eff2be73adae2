"""``NUMBA_DISABLE_JIT=1`` (numba's switch to run its functions as Python): a run takes
the paths it takes without numba and gives the same results. Its kernels run as Python
would be hundreds of times slower, and those that take array addresses cannot run at all
(``<intrinsic _pointer_of> is not usable in pure-python``: a traceback, before
sim.core.optional looked at the switch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import sim
from sim.network import compiled

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba not installed")

MAPPING: dict[str, Any] = {
    "name": "no-jit",
    "seed": 4,
    "clock": "network",
    # enough peers for the compiled flow network (COMPILED_MIN_PEERS) and churn
    "peers": {"count": 256, "upload": {"dist": "lognormal", "median": "100 Mbit/s",
                                       "sigma": 1.0}, "latency": "10 ms"},
    "churn": {"model": "exponential", "mtbf": "30 s", "mttr": "5 s", "rejoin": "fetch"},
    "vector": {"dim": 512, "dtype": "float32"},
    "protocol": {"name": "moshpit", "group_size": 16, "grid_dims": 2},
    "stop": {"max_rounds": 3, "target_var": 0},
}  # fmt: skip

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import sim
    from sim.network import compiled
    result = sim.run(sim.scenario_from_mapping(json.loads(sys.argv[1])))
    summary = {k: v for k, v in result.summary.items() if k != "wall_time_s"}
    print(json.dumps({"compiled": compiled.available(), "summary": summary}))
    """
)


def test_a_run_with_the_jit_disabled_takes_the_paths_without_numba():
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(MAPPING)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["compiled"] is False
    result = sim.run(sim.scenario_from_mapping(MAPPING))  # numba's paths, here
    expected = {k: v for k, v in result.summary.items() if k != "wall_time_s"}
    assert out["summary"] == json.loads(json.dumps(expected))
