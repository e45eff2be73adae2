"""Input fuzzing (issue 9): malformed and borderline scenario and sweep files, through the
real command line.

Each case is a folder: a scenario or sweep file, perhaps broken side files (a churn
trace, an edge list, a ``.npy`` of initial vectors) and perhaps ``--set`` options. It goes
through ``avsim validate``; when that passes, through ``avsim info`` and ``avsim run``
(``--repeats 1``) or ``avsim sweep`` (``--workers 1``), and a sweep file through ``avsim
run`` too. Every command runs in this process (:func:`sim.cli.main`, ``sys.argv``
patched, warnings are errors as everywhere in the suite) and must end with exit 0, or
exit 2 and exactly one stderr line ``error: <key or file>: ...``: never a traceback,
another exit code, or a hang (:data:`COMMAND_LIMIT_S` per command).

Cases are single mutations of small valid bases (8 peers, a few rounds or seconds), so a
valid case runs in about a second: one field (found in the JSON Schema, so new fields
are fuzzed too) set to a wrong or borderline value (negative, zero, NaN, inf, huge,
another type, a unit of another kind) in the file or with ``--set``, an unknown or a
missing key, class fractions that do not add up, a broken side file, a whole file of
garbage (binary, non-UTF-8, alias bombs, deep nesting, Python tags, non-mappings).

Examples per test: ``AVSIM_FUZZ_EXAMPLES`` (default 20: ``make test``; ``make fuzz`` runs
2000). The counts tried are printed in pytest's terminal summary and recorded as the
``fuzz_cases`` property (JUnit XML).
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import re
import signal
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.model.scenario import Replace, json_schema
from tests.strategies import (
    EDGE_NUMBERS,
    SchemaLeaf,
    broken_edge_lists,
    broken_npy,
    broken_traces,
    edge_values,
    garbage_documents,
    schema_leaves,
)

EXAMPLES = int(os.environ.get("AVSIM_FUZZ_EXAMPLES", "20"))
#: Wall-clock bound of one command: valid cases take about a second; this is a hang.
COMMAND_LIMIT_S = 60.0
#: ``error: `` then a key (dotted, or a file, or ``--set key``), maybe a line and column;
#: in a sweep, maybe after the grid cell at fault (``grid cell peers.count=4: ``), or with
#: the case that makes a ``--set`` key fail (``cases[1] with --set protocol.group_size``).
NAMES_A_KEY = re.compile(
    r"^error: (grid cell .*?: )?(cases\[\d+\] with )?(--set )?[^\s:]+"
    r"( line \d+(, column \d+)?)?: \S"
)

N_PEERS = 8
ROUNDS_BASE: dict[str, Any] = {
    "name": "fuzz",
    "clock": "rounds",
    "peers": {
        "count": N_PEERS,
        "classes": [
            {"name": "fast", "fraction": 0.5, "upload": "100 Mbit/s"},
            {"name": "slow", "fraction": 0.5, "upload": "10 Mbit/s"},
        ],
    },
    "churn": {"model": "bernoulli", "p": 0.1},
    "vector": {"dim": 4},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 5, "max_time": 5, "target_var": 1e-6},
}
NETWORK_BASE: dict[str, Any] = {
    "name": "fuzz-net",
    "clock": "network",
    "peers": {
        "count": N_PEERS,
        "classes": [
            {"name": "fast", "fraction": 0.5, "upload": "100 Mbit/s", "latency": "5 ms"},
            {"name": "slow", "fraction": 0.5, "upload": "10 Mbit/s", "latency": "20 ms"},
        ],
    },
    "network": {
        "sites": {"fast": "east", "slow": "west"},
        "links": [{"a": "east", "b": "west", "capacity": "1 Gbit/s", "latency": "10 ms"}],
    },
    "churn": {"model": "exponential", "mtbf": "20 s", "mttr": "2 s"},
    "vector": {"dim": 16, "dtype": "float32"},
    "protocol": {"name": "moshpit", "group_size": 4, "matchmaking_time": "0.1 s"},
    "stop": {"max_time": "3 s", "max_rounds": 6, "target_var": 1e-6},
    "metrics": {"every": "0.5 s"},
}
#: Values of required string fields when a mutation needs their section to exist.
STRINGS = {"churn.file": "trace.csv", "network.links.0.a": "east", "network.links.0.b": "west"}
VALID_TRACE = b"peer,down_s,up_s\n0,1,2\n3,0.5,inf\n"
VALID_EDGES = "".join(f"{k} {(k + 1) % N_PEERS}\n" for k in range(N_PEERS)).encode()

#: Outcomes by kind of case and command result, for the summary.
TRIED: Counter[str] = Counter()


@dataclass
class Case:
    """A folder to write and the command line to try on it."""

    kind: str
    files: dict[str, bytes]
    sweep: bool = False
    sets: list[str] = field(default_factory=list)

    def __repr__(self) -> str:  # what Hypothesis prints for a failing case
        shown = {name: data[:600] for name, data in self.files.items()}
        return f"Case({self.kind!r}, sets={self.sets!r}, files={shown!r})"


class Hang(BaseException):
    """A command ran past COMMAND_LIMIT_S (BaseException: no ``except Exception`` eats it)."""


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


def avsim(args: list[str], folder: Path) -> Outcome:
    """Run ``avsim <args>`` in this process, in ``folder``, within COMMAND_LIMIT_S."""
    import sim.cli

    def alarm(signum: int, frame: Any) -> None:
        raise Hang(f"avsim {' '.join(args)} ran past {COMMAND_LIMIT_S} s")

    out, err = io.StringIO(), io.StringIO()
    argv, previous = sys.argv, signal.signal(signal.SIGALRM, alarm)
    sys.argv = ["avsim", *args]
    signal.setitimer(signal.ITIMER_REAL, COMMAND_LIMIT_S)
    try:
        with (
            contextlib.chdir(folder),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                sim.cli.main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        sys.argv = argv
    return Outcome(code, out.getvalue(), err.getvalue())


def check(outcome: Outcome, args: list[str]) -> None:
    """Exit 0, or exit 2 with one ``error:`` line naming a key; nothing else."""
    where = f"avsim {' '.join(args)} -> exit {outcome.code}, stderr {outcome.stderr!r}"
    assert outcome.code in (0, 2), where
    lines = outcome.stderr.splitlines()
    if outcome.code == 2:
        assert len(lines) == 1, where
        assert NAMES_A_KEY.match(lines[0]), where
    else:
        assert all(line.startswith("warning") for line in lines), where


def try_case(case: Case) -> None:
    """Write the case and run its commands; count what happened."""
    with tempfile.TemporaryDirectory(prefix="avsim-fuzz-") as tmp:
        folder = Path(tmp)
        for name, data in case.files.items():
            (folder / name).write_bytes(data)
        sets = [arg for option in case.sets for arg in ("--set", option)]
        main = "sweep.yaml" if case.sweep else "scenario.yaml"
        commands = [["validate", main, *sets]]
        outcome = run_checked(commands[0], folder)
        if outcome.code == 0 and case.sweep:
            run_checked(["sweep", main, *sets, "--out", "out", "--workers", "1", "--force"], folder)
            refused = run_checked(["run", main], folder)
            assert refused.code == 2, refused
            assert "this is a sweep file" in refused.stderr, refused
        elif outcome.code == 0:
            run_checked(["info", main, *sets], folder)
            ran = run_checked(["run", main, *sets, "--out", "out", "--repeats", "1", "--force"],
                              folder)  # fmt: skip
            TRIED[f"{case.kind}: ran (exit {ran.code})"] += 1
        TRIED[f"{case.kind}: validate exit {outcome.code}"] += 1
        TRIED["cases"] += 1


def run_checked(args: list[str], folder: Path) -> Outcome:
    outcome = avsim(args, folder)
    check(outcome, args)
    return outcome


# -- case strategies ---------------------------------------------------------------------


@cache
def scenario_leaves() -> tuple[SchemaLeaf, ...]:
    return tuple(schema_leaves(json_schema(), STRINGS))


@cache
def sweep_leaves() -> tuple[SchemaLeaf, ...]:
    from sim.output.sweeps.spec import SweepSpec

    return tuple(schema_leaves(SweepSpec.model_json_schema(mode="validation"), {}))


def set_key(mapping: dict[str, Any], key: str, value: Any) -> None:
    """Set a dotted key in a plain mapping (the fuzzer's own, independent of avsim's
    overrides): missing mappings are made, list entries indexed."""
    parts = key.split(".")
    node: Any = mapping
    for part in parts[:-1]:
        if isinstance(node, list):
            node = node[int(part)]
        else:
            if not isinstance(node.get(part), dict | list):
                node[part] = {}
            node = node[part]
    if isinstance(node, list):
        node[int(parts[-1])] = value
    else:
        node[parts[-1]] = value


def with_needs(mapping: dict[str, Any], leaf: SchemaLeaf) -> None:
    """Make ``leaf.key`` exist in ``mapping`` (copies: the leaves are shared)."""
    for key, value in leaf.needs:
        set_key(mapping, key, copy.deepcopy(value))


def dump(mapping: dict[str, Any]) -> bytes:
    return yaml.safe_dump(mapping, sort_keys=False, allow_unicode=True).encode()


def yaml_value(value: Any) -> str:
    """``value`` as one line of YAML (what a user types after ``--set key=``)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def side_files(base: dict[str, Any]) -> dict[str, bytes]:
    """Valid side files for ``base``: a trace, an edge list and initial vectors."""
    buffer = io.BytesIO()
    np.save(buffer, np.ones((N_PEERS, base["vector"]["dim"])))
    return {"trace.csv": VALID_TRACE, "edges.txt": VALID_EDGES, "init.npy": buffer.getvalue()}


bases = st.sampled_from((ROUNDS_BASE, NETWORK_BASE))


@st.composite
def field_cases(draw: st.DrawFn) -> Case:
    """One field of the format set to a wrong or borderline value, in the file or by --set."""
    base = draw(bases)
    mapping = yaml.safe_load(dump(base))  # a deep copy
    leaf = draw(st.sampled_from(scenario_leaves()))
    with_needs(mapping, leaf)
    value = draw(edge_values(leaf))
    files = side_files(base)
    if draw(st.booleans()):
        set_key(mapping, leaf.key, value)
        return Case("field", {"scenario.yaml": dump(mapping), **files})
    operator = draw(st.sampled_from(("=", ":=")))
    option = f"{leaf.key}{operator}{yaml_value(value)}"
    return Case("field --set", {"scenario.yaml": dump(mapping), **files}, sets=[option])


@st.composite
def key_cases(draw: st.DrawFn) -> Case:
    """An unknown key, a missing required key, or a --set key that cannot be followed."""
    base = draw(bases)
    mapping = yaml.safe_load(dump(base))
    leaf = draw(st.sampled_from(scenario_leaves()))
    with_needs(mapping, leaf)
    how = draw(st.sampled_from(("unknown", "missing", "bad --set key")))
    files = side_files(base)
    if how == "unknown":
        parent = leaf.key.rpartition(".")[0]
        set_key(mapping, f"{parent}.bogus_key" if parent else "bogus_key", 1)
    elif how == "missing" and leaf.needs:
        key, whole = leaf.needs[-1]
        if isinstance(whole, dict) and whole:
            whole = dict(whole)
            whole.pop(draw(st.sampled_from(sorted(whole))))
        set_key(mapping, key, copy.deepcopy(whole))
    elif how == "missing":
        mapping.pop(draw(st.sampled_from(sorted(mapping))))
    else:
        parts = leaf.key.split(".")
        where = draw(st.integers(0, len(parts)))
        index = draw(st.sampled_from(("0", "1", "7", "-1", "", "x")))
        option = ".".join([*parts[:where], index, *parts[where:]])
        operator = draw(st.sampled_from(("=", ":=", "")))
        return Case("bad --set key", {"scenario.yaml": dump(mapping), **files},
                    sets=[f"{option}{operator}1"])  # fmt: skip
    return Case(f"{how} key", {"scenario.yaml": dump(mapping), **files})


@st.composite
def fraction_cases(draw: st.DrawFn) -> Case:
    """Peer classes whose fractions may not add up (numbers or percentages)."""
    base = draw(bases)
    mapping = yaml.safe_load(dump(base))
    number = st.one_of(st.floats(-0.5, 1.5), st.sampled_from(EDGE_NUMBERS))
    fraction = st.one_of(number, number.map(lambda f: f"{f * 100:g}%"))
    cuts = st.lists(st.integers(1, 99), max_size=3, unique=True).map(sorted)
    partition = cuts.map(lambda c: [b - a for a, b in zip([0, *c], [*c, 100], strict=True)])
    fractions = draw(st.one_of(
        st.lists(fraction, min_size=0, max_size=4),
        partition.map(lambda parts: [p / 100 for p in parts]),  # adds up (to round-off)
        partition.map(lambda parts: [f"{p}%" for p in parts]),
    ))  # fmt: skip
    mapping["peers"]["classes"] = [{"fraction": f} for f in fractions]
    mapping.get("network", {}).pop("sites", None)
    return Case("fractions", {"scenario.yaml": dump(mapping), **side_files(base)})


@st.composite
def side_file_cases(draw: st.DrawFn) -> Case:
    """A broken churn trace, edge list or initial-vectors file."""
    base = draw(bases)
    mapping = yaml.safe_load(dump(base))
    files = side_files(base)
    which = draw(st.sampled_from(("trace", "edges", "vectors")))
    if which == "trace":
        mapping["churn"] = {"model": "trace", "file": "trace.csv"}
        files["trace.csv"] = draw(broken_traces())
    elif which == "edges":
        name = "gossip" if base is ROUNDS_BASE else "pairwise_gossip"
        mapping["protocol"] = {"name": name, "topology": "file", "file": "edges.txt"}
        files["edges.txt"] = draw(broken_edge_lists())
    else:
        mapping["vector"].update({"init": "file", "file": "init.npy"})
        files["init.npy"] = draw(broken_npy((N_PEERS, base["vector"]["dim"])))
    return Case(f"broken {which} file", {"scenario.yaml": dump(mapping), **files})


def garbage_cases() -> st.SearchStrategy[Case]:
    return garbage_documents().map(lambda data: Case("garbage file", {"scenario.yaml": data}))


#: Kinds of scenario case, with their share of the examples (fields count thrice).
SCENARIO_KINDS = (field_cases, field_cases, field_cases, key_cases, fraction_cases,
                  side_file_cases, garbage_cases)  # fmt: skip


@st.composite
def scenario_cases(draw: st.DrawFn) -> Case:
    """A case of a kind drawn first (so that every kind gets its share)."""
    kind = draw(st.sampled_from(SCENARIO_KINDS))
    return draw(kind())


SWEEP_BASE: dict[str, Any] = {
    "name": "fuzz-sweep",
    "scenario": ROUNDS_BASE,
    "repeats": 1,
    "cases": [{"label": "small", "protocol.group_size": 2}, {"protocol": {"name": "gossip"}}],
    "grid": {"peers.count": [4, 8]},
    "report": ["rounds_to_target", "bytes_sent"],
}


@st.composite
def sweep_cases(draw: st.DrawFn) -> Case:
    """A sweep file with one sweep key, one case or one grid value broken, or garbage."""
    mapping = yaml.safe_load(dump(SWEEP_BASE))
    files = side_files(ROUNDS_BASE)
    how = draw(st.sampled_from(("sweep key", "case", "grid", "--set", "base file", "garbage")))
    if how == "garbage":
        return Case("sweep: garbage", {"sweep.yaml": draw(garbage_documents())}, sweep=True)
    if how == "sweep key":
        leaf = draw(st.sampled_from(sweep_leaves()))
        set_key(mapping, leaf.key, draw(edge_values(leaf)))
    elif how == "base file":
        mapping.pop("scenario")
        mapping["base"] = draw(st.sampled_from(("base.yaml", "missing.yaml", "", ".")))
        valid = draw(st.booleans())
        files["base.yaml"] = dump(ROUNDS_BASE) if valid else draw(garbage_documents())
    else:
        leaf = draw(st.sampled_from(scenario_leaves()))
        value = draw(edge_values(leaf))
        if draw(st.booleans()):  # as a replacement (the !replace tag) rather than a merge
            value = Replace(value)
        if how == "case":
            case = {**copy.deepcopy(dict(leaf.needs)), leaf.key: value}
            mapping["cases"][draw(st.integers(0, 1))] = case
        elif how == "grid":
            mapping["grid"] = {leaf.key: [value]}
        else:
            option = f"{leaf.key}{':=' if isinstance(value, Replace) else '='}"
            shown = value.value if isinstance(value, Replace) else value
            sets = [f"{option}{yaml_value(shown)}"]
            return Case("sweep: --set", {"sweep.yaml": dump(mapping), **files}, True, sets)
    return Case(f"sweep: {how}", {"sweep.yaml": dump(mapping), **files}, sweep=True)


# -- tests -------------------------------------------------------------------------------

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class _Summary:
    """A pytest plugin printing how many cases were tried, once, at the end."""

    @staticmethod
    def pytest_terminal_summary(terminalreporter: Any) -> None:
        if TRIED:
            terminalreporter.write_sep("-", f"input fuzzing: {TRIED['cases']} cases")
            for label, count in sorted(TRIED.items()):
                if label != "cases":
                    terminalreporter.write_line(f"{count:6d}  {label}")


@pytest.fixture(autouse=True)
def _report_counts(request: pytest.FixtureRequest, record_property: Any) -> Any:
    plugins = request.config.pluginmanager
    if not plugins.has_plugin("avsim-fuzz-summary"):
        plugins.register(_Summary(), "avsim-fuzz-summary")
    before = TRIED["cases"]
    yield
    tried = TRIED["cases"] - before
    record_property("fuzz_cases", tried)
    print(f"{request.node.name}: {tried} cases")


def fuzz(cases: st.SearchStrategy[Case]) -> None:
    """Try ``EXAMPLES`` cases drawn from ``cases``."""

    @FUZZ
    @given(cases)
    def each(case: Case) -> None:
        try_case(case)

    each()


def test_fuzzed_scenario_files_end_in_a_run_or_one_line_naming_a_key() -> None:
    fuzz(scenario_cases())


def test_fuzzed_sweep_files_end_in_a_sweep_or_one_line_naming_a_key() -> None:
    fuzz(sweep_cases())
