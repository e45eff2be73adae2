"""Resource guards on the command line: an instant one-line refusal for a run that cannot
fit, ``--max-memory``, one warning line for a run that may take hours, and an out of
memory that still happens as ``error: out of memory while …`` with exit code 2."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

AVSIM = Path(sys.executable).with_name("avsim")
TINY = """\
name: tiny
peers: {count: 16}
vector: {dim: 4}
protocol: {name: random_groups, group_size: 4}
stop: {max_rounds: 5}
"""
#: A network-clock run whose bound is days of simulated time, but which reaches its
#: target in seconds: the warning is due, the run itself is short.
LONG_BOUND = """\
name: long
clock: network
repeats: 2
peers: {count: 16}
vector: {dim: 4}
protocol: {name: pairwise_gossip, topology: complete}
stop: {max_rounds: null, max_time: 10000000, target_var: 1.0e-3}
"""


def avsim(
    tmp_path: Path, *args: str, limit_bytes: int | None = None
) -> subprocess.CompletedProcess:
    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "long.yaml").write_text(LONG_BOUND)

    def address_space() -> None:
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return subprocess.run(
        [str(AVSIM), *args], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        check=False, preexec_fn=address_space,
    )  # fmt: skip


def test_a_vector_that_cannot_fit_is_refused_at_once(tmp_path: Path):
    done = avsim(tmp_path, "run", "tiny.yaml", "--set", "vector.dim=1000000000", "-o", "out")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("error: vector.dim: 1000000000 needs about ")
    assert "GiB of memory (16 peers × 1000000000 float64 coordinates)" in line
    assert line.endswith("lower vector.dim, or raise the limit with --max-memory")
    assert not (tmp_path / "out").exists()


def test_too_many_peers_are_refused_naming_peers_count(tmp_path: Path):
    done = avsim(tmp_path, "run", "tiny.yaml", "--set", "peers.count=1000000000")
    assert done.returncode == 2
    assert done.stderr.startswith("error: peers.count: 1000000000 needs about ")
    assert len(done.stderr.splitlines()) == 1


def test_max_memory_sets_the_limit(tmp_path: Path):
    done = avsim(tmp_path, "run", "tiny.yaml", "--max-memory", "1 MiB", "-o", "out")
    assert done.returncode == 2
    assert "more than the 1 MiB limit set by --max-memory" in done.stderr
    ok = avsim(tmp_path, "run", "tiny.yaml", "--max-memory", "8GiB", "-o", "out")
    assert ok.returncode == 0, ok.stderr
    bad = avsim(tmp_path, "run", "tiny.yaml", "--max-memory", "plenty")
    assert bad.returncode == 2
    expected = "error: --max-memory: expected a size like '32GiB' or 'none', got 'plenty'\n"
    assert bad.stderr == expected


def test_a_run_that_may_take_hours_warns_once_on_one_line(tmp_path: Path):
    done = avsim(tmp_path, "run", "long.yaml", "-o", "out")
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("warning: this run may take up to ")
    assert "peers.count 16" in line
    assert line.endswith("it ends earlier once stop.target_var is reached")


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS as on Linux")
def test_an_out_of_memory_that_still_happens_is_one_line_and_exit_2(tmp_path: Path):
    huge = ["--set", "vector.dim=400000000", "--max-memory", "none", "-o", "out"]  # 51 GB
    done = avsim(tmp_path, "run", "tiny.yaml", *huge, limit_bytes=6 * 2**30)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "error: out of memory while building the state\n"
    assert not (tmp_path / "out").exists()
