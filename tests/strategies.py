"""The Hypothesis strategies of the test suite (the one strategies module).

Everything a property test needs to draw: finite bounded vectors, peer counts, partitions
into groups, disjoint pairs, graphs and their neighbour tables, presence masks and
schedules, seeds. Strategies return plain numpy / networkx objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import networkx as nx
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

#: Bound on generated coordinates: large enough to matter, small enough that sums of a
#: few hundred of them never lose more than round-off.
BOUND = 1e3

seeds = st.integers(min_value=0, max_value=2**32 - 1)
dims = st.integers(min_value=1, max_value=4)


def finite_floats(bound: float = BOUND) -> st.SearchStrategy[float]:
    """Finite float64 values in [−bound, bound] (no NaN, no infinity)."""
    return st.floats(-bound, bound, allow_nan=False, allow_infinity=False, width=64)


def peer_counts(min_value: int = 1, max_value: int = 40) -> st.SearchStrategy[int]:
    """Numbers of peers N."""
    return st.integers(min_value=min_value, max_value=max_value)


@lru_cache(maxsize=512)  # strategies are immutable: build each shape once
def vectors(n_peers: int, dim: int, bound: float = BOUND) -> st.SearchStrategy[np.ndarray]:
    """An (n_peers, dim) float64 state of finite bounded coordinates."""
    return hnp.arrays(np.float64, (n_peers, dim), elements=finite_floats(bound))


@st.composite
def states(draw: st.DrawFn, min_peers: int = 1, max_peers: int = 40) -> np.ndarray:
    """An (N, dim) float64 state with N and dim drawn too."""
    n = draw(peer_counts(min_peers, max_peers))
    return draw(vectors(n, draw(dims)))


@st.composite
def partitions(draw: st.DrawFn, n_peers: int, max_groups: int | None = None) -> np.ndarray:
    """(n_peers,) group labels in [−1, k): label −1 means "in no group"."""
    k = draw(st.integers(1, max_groups or max(1, n_peers)))
    return draw(hnp.arrays(np.int64, n_peers, elements=st.integers(-1, k - 1)))


@st.composite
def permutations(draw: st.DrawFn, n: int) -> np.ndarray:
    """A permutation of 0 … n−1 as an intp array."""
    return np.array(draw(st.permutations(range(n))), dtype=np.intp)


@st.composite
def disjoint_pairs(draw: st.DrawFn, n_peers: int) -> tuple[np.ndarray, np.ndarray]:
    """(i, j): two (P,) arrays of rows, all 2P distinct."""
    order = draw(permutations(n_peers))
    n_pairs = draw(st.integers(0, n_peers // 2))
    return order[:n_pairs], order[n_pairs : 2 * n_pairs]


@lru_cache(maxsize=512)
def presence(n_peers: int, min_present: int = 0) -> st.SearchStrategy[np.ndarray]:
    """(n_peers,) boolean presence mask with at least ``min_present`` present peers."""
    masks = hnp.arrays(np.bool_, n_peers, elements=st.booleans())
    if min_present == 0:
        return masks
    return masks.filter(lambda m: int(m.sum()) >= min_present)


@lru_cache(maxsize=512)
def schedules(n_peers: int, max_rounds: int = 6) -> st.SearchStrategy[list[np.ndarray]]:
    """A list of presence masks, one per round."""
    return st.lists(presence(n_peers), min_size=1, max_size=max_rounds)


@st.composite
def graphs(draw: st.DrawFn, n_peers: int) -> nx.Graph:
    """A simple undirected graph on nodes 0 … n_peers−1 (any edge set, maybe disconnected)."""
    pairs = [(i, j) for i in range(n_peers) for j in range(i + 1, n_peers)]
    graph = nx.empty_graph(n_peers)
    if pairs:
        graph.add_edges_from(draw(st.lists(st.sampled_from(pairs), unique=True)))
    return graph


@st.composite
def row_stochastic_tables(draw: st.DrawFn, n_peers: int) -> tuple[np.ndarray, np.ndarray]:
    """(neighbours, weights): an (N, K) ELL table whose rows have weights summing to ≤ 1."""
    k = draw(st.integers(1, 4))
    neighbours = draw(hnp.arrays(np.intp, (n_peers, k), elements=st.integers(0, n_peers - 1)))
    raw = draw(hnp.arrays(np.float64, (n_peers, k), elements=st.floats(0, 1)))
    scale = draw(st.floats(0, 1))
    weights = scale * raw / np.maximum(raw.sum(axis=1, keepdims=True), 1.0)
    return neighbours, weights


@st.composite
def pair_sequences(
    draw: st.DrawFn, n_peers: int, max_size: int = 40
) -> tuple[np.ndarray, np.ndarray]:
    """(i, j): two (K,) intp arrays with i_k ≠ j_k, in event order (pairs may share peers)."""
    ends = st.integers(0, n_peers - 1)
    pairs = draw(st.lists(st.tuples(ends, ends).filter(lambda p: p[0] != p[1]), max_size=max_size))
    table = np.array(pairs, dtype=np.intp).reshape(-1, 2)
    return table[:, 0].copy(), table[:, 1].copy()


@st.composite
def event_times(draw: st.DrawFn, size: int) -> np.ndarray:
    """(size,) sorted float64 times in [0, 1) (ties allowed)."""
    times = draw(hnp.arrays(np.float64, size, elements=st.floats(0, 1, exclude_max=True)))
    return np.sort(times)


# --- load balancing and compression (issue 4) -------------------------------------------

#: A few round bandwidths (bytes/s) so that draws contain ties, plus 0 and infinity.
ROUND_BANDWIDTHS = (1.25e6, 1.25e7, 1.25e8, 1.25e9)


def bandwidth_values() -> st.SearchStrategy[float]:
    """One member's bandwidth in bytes/s: 0, ``inf``, a round value or anything in 1e5 … 1e10."""
    return st.one_of(
        st.sampled_from((0.0, float("inf"), *ROUND_BANDWIDTHS)),
        st.floats(1e5, 1e10, allow_nan=False, allow_infinity=False),
    )


@st.composite
def group_bandwidths(
    draw: st.DrawFn, min_members: int = 1, max_members: int = 8
) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth_bytes_per_s, reducer): (g,) float64 and bool, at least one member that
    can reduce (bandwidth > 0 and ``reducer`` true)."""
    g = draw(st.integers(min_members, max_members))
    bandwidth = np.array(draw(st.lists(bandwidth_values(), min_size=g, max_size=g)))
    reducer = np.array(draw(st.lists(st.booleans(), min_size=g, max_size=g)))
    lucky = draw(st.integers(0, g - 1))
    reducer[lucky] = True
    if bandwidth[lucky] == 0:
        bandwidth[lucky] = draw(st.sampled_from(ROUND_BANDWIDTHS))
    return bandwidth, reducer


@st.composite
def share_vectors(draw: st.DrawFn, max_members: int = 8) -> np.ndarray:
    """(g,) float64 shares ≥ 0 summing to 1 (up to round-off), some exactly 0."""
    g = draw(st.integers(1, max_members))
    raw = draw(hnp.arrays(np.float64, g, elements=st.one_of(st.just(0.0), st.floats(1e-3, 1.0))))
    raw[draw(st.integers(0, g - 1))] = 1.0
    return raw / raw.sum()


@st.composite
def messages(draw: st.DrawFn, max_messages: int = 3, max_coords: int = 600) -> np.ndarray:
    """An (n_messages, n_coords) float64 batch of messages (rows), with repeated values."""
    m = draw(st.integers(1, max_messages))
    n = draw(st.integers(1, max_coords))
    repeated = st.sampled_from((0.0, 1.0, -2.5))
    return draw(hnp.arrays(np.float64, (m, n), elements=st.one_of(finite_floats(), repeated)))


# -- a group's flows alone on their links (issue 13) ------------------------------------


@st.composite
def group_flow_plans(draw: st.DrawFn, max_flows: int = 14) -> dict[str, Any]:
    """A group of 2–4 peers and a plan of flows among them, as
    :class:`protocols.contract.Flows` arrays: gates in layers (a flow opens its layer's
    gate and may wait for an earlier one), ``after`` and ``previous`` an earlier flow
    (``previous`` only with ``after``, each flow the previous piece of one at most),
    streamed pieces (one continuation per piece), zero-byte flows, root starts (≤ 0:
    at once), finite timeouts; with continuous bandwidths and latencies (0 included),
    members absent at the start and preemptions at random instants."""
    g = draw(st.integers(2, 4))
    n = draw(st.integers(1, max_flows))
    ends = st.tuples(st.integers(0, g - 1), st.integers(0, g - 1)).filter(lambda e: e[0] != e[1])
    pairs = draw(st.lists(ends, min_size=n, max_size=n))
    layer = np.sort(np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))))
    opens = np.full(n, -1, dtype=np.intp)
    waits = np.full(n, -1, dtype=np.intp)
    after = np.full(n, -1, dtype=np.intp)
    previous = np.full(n, -1, dtype=np.intp)
    taken: set[int] = set()
    for i in range(n):
        if draw(st.booleans()):
            opens[i] = layer[i]
        if layer[i] > 0 and draw(st.booleans()):
            waits[i] = draw(st.integers(0, int(layer[i]) - 1))
        if i > 0 and draw(st.booleans()):
            after[i] = draw(st.integers(0, i - 1))
            free = [j for j in range(i) if j not in taken]
            if len(free) > 0 and draw(st.booleans()):
                previous[i] = draw(st.sampled_from(free))
                taken.add(int(previous[i]))
    size = st.one_of(st.just(0.0), st.floats(0.1, 60.0))
    timeout = st.one_of(st.just(float("inf")), st.floats(0.05, 10.0))
    return {
        "src": np.array([a for a, _ in pairs], dtype=np.intp),
        "dst": np.array([b for _, b in pairs], dtype=np.intp),
        "nbytes": np.array(draw(st.lists(size, min_size=n, max_size=n))),
        "opens": opens,
        "waits": waits,
        "after": after,
        "previous": previous,
        "streamed": _one_stream_each(
            np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))), after, previous
        ),
        "start_s": np.array(draw(st.lists(st.floats(-1.0, 3.0), min_size=n, max_size=n))),
        "timeout_s": np.array(draw(st.lists(timeout, min_size=n, max_size=n))),
        "up": draw(st.lists(st.floats(1.0, 100.0), min_size=g, max_size=g)),
        "down": draw(st.lists(st.floats(1.0, 100.0), min_size=g, max_size=g)),
        "latency": draw(
            st.lists(st.one_of(st.just(0.0), st.floats(0.001, 0.5)), min_size=g, max_size=g)
        ),
        "present": np.array(  # mostly present
            draw(st.lists(st.sampled_from((True, True, True, False)), min_size=g, max_size=g))
        ),
        "t0": draw(st.floats(0.0, 100.0)),
        "preemptions": sorted(
            draw(st.lists(st.tuples(st.floats(0.0, 10.0), st.integers(0, g - 1)), max_size=2))
        ),
    }


def _one_stream_each(streamed: np.ndarray, after: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """``streamed`` less the flows whose piece before them (``previous``, else
    ``after``) another streamed flow continues already: a stream goes on in one flow."""
    pred = np.where(previous >= 0, previous, after)
    seen: set[int] = set()
    for i in np.flatnonzero(streamed & (pred >= 0)).tolist():
        if pred[i] in seen:
            streamed[i] = False
        seen.add(int(pred[i]))
    return streamed


# -- churn ----------------------------------------------------------------------------


def churn_sections() -> st.SearchStrategy[object]:
    """A ``churn`` section of a random model (``none``, ``bernoulli``, ``exponential``,
    ``waves`` on all peers) with times in seconds of modest size."""
    from sim.model.scenario.churn import BernoulliChurn, ExponentialChurn, NoChurn, WavesChurn

    times = st.floats(0.05, 10.0)
    return st.one_of(
        st.just(NoChurn()),
        st.builds(
            BernoulliChurn,
            model=st.just("bernoulli"),
            p=st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)),
            period=st.one_of(st.none(), times),
        ),
        st.builds(ExponentialChurn, model=st.just("exponential"), mtbf=times, mttr=times),
        st.builds(
            WavesChurn,
            model=st.just("waves"),
            rate=st.floats(0.05, 5.0),
            fraction=st.floats(0.01, 1.0),
            duration=times,
        ),
    )


@st.composite
def trace_rows(draw: st.DrawFn, n_peers: int) -> list[tuple[int, float, float]]:
    """Rows ``(peer, down_s, up_s)`` of a valid churn trace, shuffled.

    A peer's intervals never overlap but may touch (a gap of 0: they merge on loading);
    the last may end at ``inf``. Times are multiples of 0.25 s, so changes of different
    peers often fall on the same instant.
    """
    rows: list[tuple[int, float, float]] = []
    for peer in range(n_peers):
        t = draw(st.integers(0, 8))
        for _ in range(draw(st.integers(0, 3))):
            down = t + draw(st.integers(0, 4))
            t = down + draw(st.integers(1, 4))
            rows.append((peer, down / 4, t / 4))
        if draw(st.booleans()):
            rows.append((peer, (t + draw(st.integers(0, 4))) / 4, float("inf")))
    return draw(st.permutations(rows))


# -- stateful runs (issue 9) ------------------------------------------------------------

#: Numeric protocol fields worth varying in small stateful runs, by field name (any
#: protocol with such a field gets them); other numeric fields keep their defaults, and
#: Literal and bool fields are drawn from all their values (:func:`protocol_sections`).
STATEFUL_NUMBERS: dict[str, st.SearchStrategy[object]] = {
    "group_size": st.integers(2, 4),
    "grid_dims": st.integers(1, 2),
    "min_group_size": st.integers(1, 2),
    "part_bytes": st.sampled_from([8, 24, 512 * 1024]),
    "matchmaking_time": st.sampled_from([0.0, 0.3, 1.0, 5.0]),
    "sender_timeout": st.sampled_from([None, 0.05, 0.3]),
    "pipeline_chunks": st.integers(1, 3),
    "restart_delay": st.sampled_from([0.0, 0.5]),
    "max_concurrent": st.integers(1, 2),
    "rate": st.sampled_from([0.5, 2.0, 8.0]),
}


@st.composite
def protocol_sections(draw: st.DrawFn, name: str) -> dict[str, object]:
    """A ``protocol`` section for the registered protocol ``name``, read off its
    ``Params`` model: every Literal and bool field drawn from its values, the fields of
    :data:`STATEFUL_NUMBERS` from theirs. Some draws are invalid (``topology: file``
    without a file, say): the scenario then fails to build, which callers reject."""
    import typing

    import protocols

    section: dict[str, object] = {"name": name}
    for field, info in protocols.get(name).Params.model_fields.items():
        annotation = info.annotation
        if field == "name":
            continue
        if field in STATEFUL_NUMBERS:
            section[field] = draw(STATEFUL_NUMBERS[field])
        elif typing.get_origin(annotation) is typing.Literal:
            section[field] = draw(st.sampled_from(typing.get_args(annotation)))
        elif annotation is bool:
            section[field] = draw(st.booleans())
    return section


@st.composite
def stateful_scenarios(draw: st.DrawFn, name: str, clock: str) -> dict[str, object]:
    """A small scenario mapping (4–16 peers, dim 1–8, float64) for protocol ``name`` on
    ``clock``, without churn (the state machine preempts and restores peers itself) and
    without stop rule (it advances time itself). Links are slow (400 B/s to 4 kB/s, 2 to
    20 ms) and peers straggle up to 0.5 s, so transfers, matchmaking and rounds last long
    enough to be interrupted."""
    return {
        "name": "stateful",
        "clock": clock,
        "seed": draw(st.integers(0, 2**16)),
        "peers": {
            "count": draw(st.integers(4, 16)),
            "upload": {"dist": "uniform", "low": 400, "high": 4000},
            "download": {"dist": "uniform", "low": 400, "high": 4000},
            "latency": {"dist": "uniform", "low": 0.002, "high": 0.02},
            "delay": {"dist": "uniform", "low": 0.0, "high": 0.5},
        },
        "churn": {"model": "none", "rejoin": draw(st.sampled_from(["keep", "reset", "fetch"]))},
        "vector": {
            "dim": draw(st.integers(1, 8)),
            "init": draw(st.sampled_from(["normal", "uniform", "onehot"])),
        },
        "protocol": draw(protocol_sections(name)),
        "stop": {"max_rounds": None, "max_time": 1e9, "target_var": None},
    }


# -- input fuzzing (issue 9) ------------------------------------------------------------

#: Numbers wrong or borderline in a number field: signs, zero, NaN, infinities, beyond
#: float and int64, the smallest denormal, the largest float.
EDGE_NUMBERS: tuple[object, ...] = (
    -1, -0.5, 0, -0.0, float("nan"), float("inf"), float("-inf"), 1e30, 10**30, 2**63,
    5e-324, 1.7976931348623157e308,
)  # fmt: skip
#: Values of the wrong type, and unit spellings of every kind (some wrong, some right).
ODD_VALUES: tuple[object, ...] = (
    "abc", "", True, None, [], {}, [1, 2], {"dist": "lognormal"}, {"a": 1}, "1 fortnight",
    "30%", "150%", "-3/min", "3/min", "20 Mbps", "12.5 MBps", "1 hour", "1e400", ".nan",
    "inf s", "0x10", "1,5", "-0", "5 %", "1 h 30 min", "\u00b5s", "100 Mbit",
)  # fmt: skip


@dataclass(frozen=True)
class SchemaLeaf:
    """A field of the scenario format, found in its JSON Schema.

    Attributes
    ----------
    key
        Dotted key (list entries as ``.0``), e.g. ``peers.classes.0.upload.median``.
    needs
        ``(dotted key, value)`` pairs that make the key exist: the union member
        (``protocol: {name: moshpit}``), the distribution or list around it. Values are
        whole replacements.
    types
        The JSON types the field accepts (``number``, ``integer``, ``string``, ...).
    choices
        Its ``enum``/``const`` values, if any.
    """

    key: str
    needs: tuple[tuple[str, Any], ...]
    types: frozenset[str]
    choices: tuple[Any, ...]

    @property
    def numeric(self) -> bool:
        return bool({"number", "integer"} & self.types)


def schema_leaves(schema: dict[str, Any], strings: dict[str, str]) -> list[SchemaLeaf]:
    """Every field of a JSON Schema (pydantic's: ``$defs``, ``anyOf``, discriminated
    ``oneOf``), with what each needs to exist; ``strings`` gives the value of required
    string fields by dotted key (e.g. ``churn.file``), else ``"x"``."""
    defs = schema.get("$defs", {})
    leaves: list[SchemaLeaf] = []

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def minimal(node: dict[str, Any], key: str) -> Any:
        node = resolve(node)
        if "const" in node or "enum" in node:
            return node.get("const", (node.get("enum") or [None])[0])
        alternatives = [resolve(a) for a in node.get("anyOf", node.get("oneOf", []))]
        if alternatives:
            usable = [a for a in alternatives if a.get("type") != "null"] or alternatives
            return minimal(usable[0], key)
        kind = node.get("type")
        if kind == "object":
            return {
                name: minimal(sub, f"{key}.{name}")
                for name, sub in node.get("properties", {}).items()
                if name in node.get("required", [])
            }
        if kind == "array":
            return [minimal(node.get("items", {}), f"{key}.0")] * max(1, node.get("minItems", 1))
        if kind == "string":
            return strings.get(key, "x")
        return {"boolean": False, "null": None}.get(str(kind), 1)

    def types(node: dict[str, Any]) -> set[str]:
        node = resolve(node)
        found = {node["type"]} if isinstance(node.get("type"), str) else set()
        for alternative in node.get("anyOf", []) + node.get("oneOf", []):
            found |= types(alternative)
        return found or {"any"}

    def walk(node: dict[str, Any], path: tuple[str, ...], needs: tuple) -> None:
        node = resolve(node)
        key = ".".join(path)
        tag = node.get("discriminator", {}).get("propertyName")
        if tag is not None:
            leaves.append(SchemaLeaf(key, needs, frozenset({"object"}), ()))
            for value, ref in node["discriminator"]["mapping"].items():
                member = resolve({"$ref": ref})
                whole = {tag: value, **minimal(member, key)}
                walk_members(member, path, (*needs, (key, whole)))
            return
        if "properties" in node and not path:
            walk_members(node, path, needs)
            return
        if "properties" in node:
            leaves.append(SchemaLeaf(key, needs, frozenset({"object"}), ()))
            walk_members(node, path, needs)
            return
        choices = tuple(node.get("enum", ())) + ((node["const"],) if "const" in node else ())
        leaves.append(SchemaLeaf(key, needs, frozenset(types(node)), choices))
        for alternative in [resolve(a) for a in node.get("anyOf", [node])]:
            items = resolve(alternative.get("items", {}))
            if alternative.get("type") == "object" and "properties" in alternative:
                walk_members(alternative, path, (*needs, (key, minimal(alternative, key))))
            elif alternative.get("type") == "array" and "properties" in items:
                entry = minimal(items, f"{key}.0")
                walk_members(items, (*path, "0"), (*needs, (key, [entry])))

    def walk_members(node: dict[str, Any], path: tuple[str, ...], needs: tuple) -> None:
        for name, sub in node.get("properties", {}).items():
            walk(sub, (*path, name), needs)

    walk(schema, (), ())
    return leaves


def edge_values(leaf: SchemaLeaf) -> st.SearchStrategy[object]:
    """A wrong or borderline value for ``leaf``: an edge number (number fields, also
    written with a unit), a value of another type, or a near miss of its choices."""
    options: list[st.SearchStrategy[object]] = [st.sampled_from(ODD_VALUES)]
    if leaf.numeric:
        numbers = st.sampled_from(EDGE_NUMBERS)
        units = st.sampled_from(("s", "ms", "min", "h", "Mbps", "Mbit/s", "KiB", "/min", "%"))
        options += [numbers, numbers, st.builds(lambda n, u: f"{n} {u}", numbers, units)]
    if leaf.choices:
        near = st.sampled_from(leaf.choices).map(lambda c: f"{c}".upper() + "_")
        options += [near, st.just("nonexistent")]
    return st.one_of(options)


def garbage_documents() -> st.SearchStrategy[bytes]:
    """Whole files that are not a scenario: binary, non-UTF-8 text, alias bombs, deep
    nesting, Python tags, several documents, non-mappings, empty, truncated YAML."""
    scalar_docs = st.sampled_from(
        (b"", b"\n", b"# only a comment\n", b"- 1\n- 2\n", b"42\n", b"hello\n", b"null\n",
         b"[1, {a: 2}]\n", b"a: 1\n---\nb: 2\n", b"a: !!python/object/apply:os.system [ls]\n",
         b"a: !!binary aGVsbG8=\n", b"{a: 1, a: 2}\n", b"a: *nowhere\n", b"a: &x [*x]\n",
         b"? [1, 2]\n: 3\n", b"a:\tb\n", b"a: b: c\n", b"'unterminated\n", b"a: \x07\n",
         b"\xef\xbb\xbfname: bom\n", "name: caf\u00e9\n".encode("utf-16"), b"1: 2\nnull: 3\n",
         b"peers: {count: 4}\nprotocol: {name: gossip}\nprotocol: {name: moshpit}\n")
    )  # fmt: skip
    depth = st.integers(33, 3000)
    deep = st.one_of(
        depth.map(lambda d: b"a: " + b"[" * d + b"]" * d + b"\n"),
        depth.map(lambda d: b"a: " + b"{b: " * d + b"1" + b"}" * d + b"\n"),
    )
    return st.one_of(
        scalar_docs,
        st.binary(min_size=1, max_size=300),
        st.text(min_size=1, max_size=200).map(
            lambda t: ("name: " + t).encode("latin-1", "replace")
        ),
        st.binary(min_size=1, max_size=40).map(lambda b: b"name: x\npeers: " + b + b"\xff\n"),
        alias_bombs(),
        deep,
    )


@st.composite
def alias_bombs(draw: st.DrawFn) -> bytes:
    """A "billion laughs" YAML document: ``levels`` anchors, each a list of ``fan`` aliases
    of the previous one (fan**levels values once expanded)."""
    fan = draw(st.integers(4, 12))
    levels = draw(st.integers(5, 12))
    lines = ['a0: &a0 ["lol"]']
    for k in range(1, levels + 1):
        lines.append(f"a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * fan) + "]")
    if draw(st.booleans()):  # hide it inside a scenario
        lines = ["name: bomb", "protocol: {name: gossip}", "peers:", "  x:"] + [
            "    " + line for line in lines
        ]
    return ("\n".join(lines) + "\n").encode()


def broken_traces() -> st.SearchStrategy[bytes]:
    """Churn trace CSVs, mostly broken: random rows of numbers and junk, bad headers,
    binary and non-UTF-8 bytes."""
    cell = st.one_of(
        st.integers(-3, 12).map(str),
        st.sampled_from(("", "nan", "inf", "-inf", "1e400", "x", "0.5", "1e3", " 2", "3 ")),
    )
    row = st.lists(cell, min_size=0, max_size=5).map(",".join)
    header = st.sampled_from(("peer,down_s,up_s", "peer,down,up", "", "peer;down_s;up_s",
                              "peer,down_s,up_s,extra", "\ufeffpeer,down_s,up_s"))  # fmt: skip
    text = st.builds(
        lambda h, rows: "\n".join([h, *rows]) + "\n", header, st.lists(row, max_size=8)
    )
    return st.one_of(
        text.map(str.encode), st.binary(max_size=200), text.map(lambda t: t.encode() + b"\xff")
    )


def broken_edge_lists() -> st.SearchStrategy[bytes]:
    """Edge-list files, mostly broken: lines of 0 to 3 fields of numbers and junk."""
    field = st.one_of(
        st.integers(-2, 12).map(str), st.sampled_from(("x", "1.5", "1e3", "#", "0x1", "\u0663"))
    )
    line = st.lists(field, max_size=3).map(" ".join)
    text = st.lists(line, max_size=8).map(lambda lines: "\n".join(lines) + "\n")
    return st.one_of(text.map(str.encode), st.binary(max_size=200))


@st.composite
def broken_npy(draw: st.DrawFn, shape: tuple[int, int]) -> bytes:
    """A ``vector.init: file`` payload for ``shape``, mostly broken: another shape, NaN or
    inf, complex, bool or object dtype, too large for float16, a ``.npz``, text, empty,
    truncated."""
    import io

    kind = draw(st.sampled_from(("shape", "nan", "inf", "complex", "bool", "int", "huge",
                                 "npz", "text", "empty", "truncated", "1d", "object")))  # fmt: skip
    n, dim = shape
    array: np.ndarray = np.ones(shape)
    if kind == "shape":
        other = draw(st.tuples(st.integers(0, n + 2), st.integers(0, dim + 2)))
        array = np.ones(other if other != shape else (n + 1, dim))
    elif kind in ("nan", "inf"):
        array[draw(st.integers(0, n - 1)), draw(st.integers(0, dim - 1))] = float(kind)
    elif kind == "complex":
        array = array.astype(complex)
    elif kind in ("bool", "int"):
        array = array.astype(kind)
    elif kind == "huge":
        array *= 1e300
    elif kind == "1d":
        array = np.ones(n * dim)
    buffer = io.BytesIO()
    if kind == "npz":
        np.savez(buffer, x=array)
    elif kind == "object":
        np.save(buffer, np.array([[None] * dim] * n, dtype=object), allow_pickle=True)
    else:
        np.save(buffer, array)
    data = buffer.getvalue()
    if kind == "text":
        return b"0 1 2\n3 4 5\n"
    if kind == "empty":
        return b""
    if kind == "truncated":
        return data[: draw(st.integers(1, len(data) - 1))]
    return data
