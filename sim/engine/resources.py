"""Resource guards: a run's peak memory and event count, estimated before anything is built.

:func:`estimate_memory` adds up, from the scenario alone, what a run holds at its peak
(:func:`memory_parts`): the state — x, the protocol's arrays and a round's temporaries,
as the protocol declares them (:meth:`protocols.base.Protocol.footprint`) — or the
initial draw, whichever is larger; the recorder's float64 column blocks; the per-peer
tables; the protocol's graph; on the network clock the flow network and one round's
flows; and with a training ``workload`` its data, optimizer state and a step's
temporaries (:func:`training_bytes`, both clocks). The figures are upper bounds:
``tests/integration/test_resources.py`` checks measured ≤ estimate ≤ 3 × measured on runs
of every protocol (``tests/integration/test_training_network.py`` on training runs).

:func:`check_memory` refuses a run whose estimate exceeds the limit: by default the
memory available now (psutil), else :func:`memory_limit` (the CLI's ``--max-memory``)
or the ``AVSIM_MAX_MEMORY`` environment variable (for sweep workers). The engine calls
:func:`guard` first thing in :func:`sim.engine.run`.

Before a run, :func:`guard` also warns (:class:`~sim.engine.workload.SlowRunWarning`) when
the run's flows (:func:`sim.engine.workload.estimate_events`) come to hours of wall time. A
``MemoryError`` that still happens is described by :func:`out_of_memory_while`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.core import units
from sim.core.errors import AvsimError
from sim.engine.netclock import alone_rounds
from sim.engine.netclock.alone_groups import AloneGroups
from sim.engine.recorder import BLOCK_ELEMENTS
from sim.engine.workload import SlowRunWarning, slow_run_message
from sim.model.scenario.models import Scenario
from sim.network.flows import COMPILED_MIN_PEERS

#: Bytes per peer besides its rows: the peers table, churn and presence masks, the
#: engine's and the protocol's per-peer arrays (keys, shares, clocks).
PEER_BYTES = 512
#: Bytes per peer of the flow network (network clock): in-flight and per-resource
#: dicts, byte counters, routes (measured 500 B with tracemalloc; rounded up).
NET_PEER_BYTES = 1024
#: Bytes per flow of a round's plan: its parallel arrays and the round's book-keeping.
#: Until stop 27 the book-keeping held Python lists with an int or float object per
#: flow (~500 B a flow in resident memory: the R1 hour's first round, 3.8 M planned
#: flows, peaked at 2188 MiB). Since stop 28 it reads the plan's arrays (``.item``):
#: the band test's R1 case grows by 946 MiB where the estimate's other parts are 372
#: MiB, ~160 B a planned flow. With this value the estimate is 1.38× that growth, and
#: 1.25× the "moshpit pieces" case's (tests/integration/test_resources.py). Since stop
#: 39 those groups run alone (:mod:`sim.engine.netclock.alone_groups`: the loop's plan,
#: its outputs, and its state while it runs) and the R1 case grows by 1134 MiB (the
#: estimate is 1.15× that).
PLANNED_FLOW_BYTES = 256
#: Bytes per flow in flight: the Flow object, its SimPy event, callbacks and index
#: entries (measured 700–1270 B with tracemalloc; rounded up).
FLOW_BYTES = 1536
#: Bytes per ring a closed-form segment plans (:mod:`protocols._solo_exchanges`): its
#: start, end, edge and wave in the planner's buffers and in the segment's copies, the
#: ring stream's times and picks, the commit's masks and gathers (measured ~76 B: the
#: peak resident set of 10^5 peers' gossip grew by 40 MiB from 2^18 to 12 × 2^16 rings
#: a segment; rounded up).
PLANNED_RING_BYTES = 128
#: Fixed costs of a run: the environment, recorder rows, the summary's frames.
RUNTIME_BYTES = 32 * 2**20
#: Resident memory of numba and the flow network's compiled kernels once loaded (LLVM,
#: the dispatchers, the cached code: measured 123 MiB), a fixed cost of a network-clock
#: run that takes the compiled path (:func:`takes_compiled_path`).
COMPILED_BYTES = 128 * 2**20
#: Environment variable with a memory limit (``32GiB``, or ``none``) for processes the
#: CLI does not configure (sweep workers).
LIMIT_ENV = "AVSIM_MAX_MEMORY"

_LIMIT: ContextVar[float | None] = ContextVar("avsim_memory_limit", default=None)


class ResourceError(AvsimError):
    """A run would need more memory than the limit allows (nothing was allocated)."""


@dataclass(frozen=True)
class MemoryEstimate:
    """A run's peak memory, in bytes, by part (:func:`memory_parts`)."""

    parts: dict[str, float]

    @property
    def nbytes(self) -> int:
        """The whole estimate, bytes."""
        return math.ceil(sum(self.parts.values()))


def peer_count(scenario: Scenario) -> int:
    """Every peer that will ever exist: ``peers.count`` plus the joining ones."""
    return int(scenario.peers.count + scenario.churn.joining)


def footprint(scenario: Scenario) -> Any:
    """The protocol's :class:`~protocols.footprint.Footprint` for this scenario: its
    arrays for ``vector.dim`` coordinates, its flows and bytes for the vector on the wire
    (``vector.wire_bytes``: more coordinates, more pieces, more bytes)."""
    import protocols

    vector = scenario.vector
    itemsize = np.dtype(vector.dtype).itemsize
    cls = protocols.get(scenario.protocol.name)
    n, params, clock = peer_count(scenario), scenario.protocol, scenario.clock
    simulated = cls.footprint(params, n, vector.dim, itemsize, clock)
    if vector.wire_coords == vector.dim:
        return simulated
    return simulated.with_network_of(cls.footprint(params, n, vector.wire_coords, itemsize, clock))


def memory_parts(scenario: Scenario) -> MemoryEstimate:
    """The run's peak memory by part, bytes, computed from the scenario alone.

    ``state``: the larger of the initial draw (float64, plus its cast to the state's
    dtype, or the float64 copy of the initial mean) and a round's peak (the footprint's
    arrays plus the recorder's float64 blocks: a converted block, and one more per
    restriction to existing or present peers); ``peers``; ``tables`` (the protocol's);
    ``network`` (peers' flow-network entries, a round's planned and in-flight flows, a
    closed-form segment's planned rings);
    ``training`` with a workload (:func:`training_bytes`); ``runtime``.
    """
    n, dim = peer_count(scenario), scenario.vector.dim
    itemsize = np.dtype(scenario.vector.dtype).itemsize
    fp = footprint(scenario)
    elements = float(n) * dim
    draw = elements * (8 + (itemsize if itemsize < 8 else 0))
    rounds = elements * (itemsize * fp.state_arrays + 8 * fp.float64_arrays)
    parts = {"state": max(draw, rounds + _recorder_bytes(scenario, n, dim))}
    parts["peers"] = float(PEER_BYTES * n)
    parts["tables"] = float(fp.table_bytes)
    if scenario.clock == "network":
        flows = PLANNED_FLOW_BYTES * fp.flows_per_round
        if not rounds_alone(scenario):  # (groups alone send no Flow objects)
            flows += FLOW_BYTES * fp.flows_in_flight
        flows += PLANNED_RING_BYTES * fp.planned_rings
        parts["network"] = NET_PEER_BYTES * n + flows
    if scenario.workload.name != "none":
        parts["training"] = training_bytes(scenario)
    compiled = COMPILED_BYTES if takes_compiled_path(scenario, n) else 0
    parts["runtime"] = float(RUNTIME_BYTES + compiled)
    return MemoryEstimate(parts)


def rounds_alone(scenario: Scenario) -> bool:
    """Whether the run's barrier rounds time their groups alone
    (:mod:`sim.engine.netclock.alone_rounds`): a group protocol whose groups are small
    enough, on the network clock, where nothing else can use a group's links
    (:meth:`~sim.engine.netclock.alone_groups.AloneGroups.fits`, a trace aside)."""
    import protocols
    from protocols.base import GroupProtocol

    network, params = scenario.network, scenario.protocol
    size = getattr(params, "group_size", None)
    return (
        scenario.clock == "network" and scenario.schedule == "barrier"
        and issubclass(protocols.get(params.name), GroupProtocol) and network.groups_alone
        and isinstance(size, int) and size <= alone_rounds.MAX_MEMBERS
        and AloneGroups.fits(scenario, None, traced=False)
    )  # fmt: skip


def training_bytes(scenario: Scenario) -> float:
    """A training workload's memory besides the state, bytes (an upper bound):

    - the optimizer's momentum buffers, (n, dim) in the state's dtype (``momentum`` > 0);
    - a step's temporaries: the models and the update, (n, dim) each in the state's
      dtype, plus their float64 copies for the metrics (the models of a recorded row);
    - ``logistic``: the data as loaded and standardised (float64, four copies of
      samples × (features + 1) at the peak of the set-up, one more in the state's dtype
      when it is narrower), labels, sample weights and the split's index arrays; a
      minibatch's (or the metrics' local losses') gather, three blocks of at most
      ``GATHER_ELEMENTS`` elements, its (n, batch) indices and weights, and the local
      losses' (n, largest share) padded indices and weights (a full batch pads alike);
    - ``quadratic``: H (dim², float64, and its QR's three temporaries), the local optima
      (n, dim) float64 twice (with their spread), one more copy in the state's dtype
      when it is narrower, and the noise draw.
    """
    from sim.kernels._xp import GATHER_ELEMENTS
    from sim.model.scenario.workload import LogisticWorkload

    workload = scenario.workload
    n, dim = peer_count(scenario), scenario.vector.dim
    itemsize = np.dtype(scenario.vector.dtype).itemsize
    narrow = itemsize < 8
    elements = float(n) * dim
    total = elements * (2 * itemsize + 2 * 8)  # models and update; float64 metrics copies
    if workload.optimizer.momentum > 0:  # type: ignore[union-attr]
        total += elements * itemsize
    if isinstance(workload, LogisticWorkload):
        from sim.model.training.data import data_shape

        samples, features, _classes = data_shape(workload)
        table = float(samples) * (features + 1)
        total += table * (4 * 8 + (itemsize if narrow else 0)) + 48.0 * samples + 32.0 * n
        share = samples if workload.split != "iid" else -(-samples // n) + 1  # the largest
        batch = share if workload.batch_size is None else workload.batch_size
        gather = min(float(n) * max(batch, share) * (features + 1), float(GATHER_ELEMENTS))
        # gathers; a minibatch's indices and weights, or the padded shares of a full batch
        # and of the metrics' local losses (index, weights, mask, positions), not both at once
        total += 3 * gather * 8 + 32.0 * n * max(batch, share)
    else:
        total += 4.0 * dim * dim * 8 + elements * (3 * 8 + (itemsize if narrow else 0))
    return total


def takes_compiled_path(scenario: Scenario, n: int) -> bool:
    """Whether the run's flow network takes its compiled path (``solver="auto"``: the
    network clock, numba importable, at least ``COMPILED_MIN_PEERS`` peers)."""
    if scenario.clock != "network" or n < COMPILED_MIN_PEERS:
        return False
    return importlib.util.find_spec("numba") is not None


def _recorder_bytes(scenario: Scenario, n: int, dim: int) -> float:
    width = min(dim, max(1, BLOCK_ELEMENTS // max(n, 1)))
    copies = 2 + (scenario.churn.model != "none") + (scenario.churn.joining > 0)
    return 8.0 * n * width * copies


def estimate_memory(scenario: Scenario) -> int:
    """The run's peak memory, bytes (an upper bound; see :func:`memory_parts`)."""
    return memory_parts(scenario).nbytes


@contextlib.contextmanager
def memory_limit(limit: float | str | None) -> Iterator[None]:
    """Runs started inside use ``limit`` (bytes, or a size such as ``"32GiB"``; ``"none"``
    or ``inf``: no limit) instead of the memory available (``--max-memory``)."""
    token = _LIMIT.set(parse_limit(limit))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def parse_limit(limit: float | str | None) -> float | None:
    """Bytes from ``32GiB``, a number, ``none``/``inf`` (no limit: ``inf``) or None."""
    if limit is None:
        return None
    if isinstance(limit, str) and limit.strip().lower() in ("none", "inf", "off"):
        return math.inf
    if isinstance(limit, float) and limit == math.inf:  # what limit_override() gives back
        return math.inf
    try:
        value = units.parse_size(limit)
    except ValueError:
        raise AvsimError(
            f"--max-memory: expected a size like '32GiB' or 'none', got {limit!r}"
        ) from None
    if not value > 0:
        raise AvsimError(f"--max-memory: expected a positive size, got {limit!r}")
    return value


def limit_override() -> float | None:
    """The limit set by :func:`memory_limit` in this context (bytes; ``inf``: none), or
    ``None`` when none is set."""
    return _LIMIT.get()


def limit_bytes() -> tuple[float, str]:
    """The memory limit in force and where it comes from (for the error message)."""
    chosen = _LIMIT.get()
    if chosen is not None:
        return chosen, "limit set by --max-memory"
    from_env = os.environ.get(LIMIT_ENV)
    if from_env:
        value = parse_limit(from_env)
        assert value is not None
        return value, f"limit set by {LIMIT_ENV}"
    import psutil

    return float(psutil.virtual_memory().available), "of memory available"


def check_memory(scenario: Scenario, where: str = "") -> MemoryEstimate:
    """The estimate, once checked against the limit (:func:`limit_bytes`).

    ``where`` prefixes the key the error names (a sweep's ``grid.`` or ``cases[1].``).

    Raises
    ------
    ResourceError
        When the estimate exceeds the limit: one line naming the key that drives it
        (:func:`culprit`), the estimate and the limit.
    """
    estimate = memory_parts(scenario)
    limit, source = limit_bytes()
    if estimate.nbytes > limit:
        raise ResourceError(_memory_message(scenario, estimate, limit, source, where))
    return estimate


#: A protocol parameter is blamed for a refusal when putting it back to its default
#: would make the run fit, or divides the estimate by at least this much (an order of
#: magnitude: a group of 16 rather than 8 doubles a huge swarm's flows, yet the swarm is
#: what is too large).
CULPRIT_FACTOR = 10.0


@dataclass(frozen=True)
class Culprit:
    """The scenario key that drives a memory estimate (:func:`culprit`).

    Attributes
    ----------
    key, value
        The dotted key and its value in the scenario.
    advice
        What to do with it: ``lower peers.count``, ``raise protocol.part_bytes (default
        524288)``.
    """

    key: str
    value: Any
    advice: str


def culprit(
    scenario: Scenario, estimate: MemoryEstimate | None = None, limit: float = math.inf
) -> Culprit:
    """The key whose value makes ``scenario`` need the memory it needs.

    First a protocol parameter the scenario sets away from its default, when putting it
    back would bring the estimate under ``limit`` or divides it by
    :data:`CULPRIT_FACTOR` or more (of those, the one that divides it most): a
    ``part_bytes`` of a few bytes, a ``group_size`` in the thousands, a complete graph.
    Then ``vector.wire_bytes`` on the same terms (its pieces are flows). Otherwise the
    peers or the vectors: ``vector.dim`` when the state dominates and the
    vectors are longer than there are peers, else ``peers.count``.
    """
    estimate = memory_parts(scenario) if estimate is None else estimate
    found = _protocol_culprit(scenario, estimate, limit) or _wire_culprit(scenario, estimate, limit)
    if found is not None:
        return found
    n, dim = peer_count(scenario), scenario.vector.dim
    training = _training_culprit(scenario, estimate)
    if training is not None:
        return training
    if dim > n and estimate.parts["state"] >= _variable(estimate) / 2:
        return Culprit("vector.dim", dim, "lower vector.dim")
    return Culprit("peers.count", scenario.peers.count, "lower peers.count")


def _protocol_culprit(scenario: Scenario, estimate: MemoryEstimate, limit: float) -> Culprit | None:
    """The protocol parameter to blame (see :func:`culprit`), or None."""
    params = scenario.protocol
    variable = _variable(estimate)
    best: tuple[float, Culprit] | None = None
    for name, field in type(params).model_fields.items():
        value = getattr(params, name)
        if name == "name" or field.is_required():
            continue
        default = field.get_default(call_default_factory=True)
        if value == default:
            continue
        reset = params.model_copy(update={name: default})
        try:
            parts = memory_parts(scenario.model_copy(update={"protocol": reset}))
        except (TypeError, ValueError, ArithmeticError):  # a default other fields exclude
            continue
        ratio = variable / max(_variable(parts), 1.0)
        if (ratio >= CULPRIT_FACTOR or parts.nbytes <= limit < estimate.nbytes) and (
            best is None or ratio > best[0]
        ):
            best = (ratio, Culprit(f"protocol.{name}", value, _advice(name, value, default)))
    return None if best is None else best[1]


def _wire_culprit(scenario: Scenario, estimate: MemoryEstimate, limit: float) -> Culprit | None:
    """``vector.wire_bytes`` when its pieces' flows drive the estimate (as for a
    protocol parameter, :func:`culprit`), or None."""
    size = scenario.vector.wire_bytes
    if size is None:
        return None
    plain = scenario.vector.model_copy(update={"wire_bytes": None})
    parts = memory_parts(scenario.model_copy(update={"vector": plain}))
    ratio = _variable(estimate) / max(_variable(parts), 1.0)
    if ratio >= CULPRIT_FACTOR or parts.nbytes <= limit < estimate.nbytes:
        return Culprit("vector.wire_bytes", size, "lower vector.wire_bytes")
    return None


def _training_culprit(scenario: Scenario, estimate: MemoryEstimate) -> Culprit | None:
    """What to blame when the training part is most of the estimate, or None: a generated
    data set's ``workload.samples``; a quadratic's ``vector.dim`` when its dim × dim
    Hessian outweighs the peers' (n, dim) buffers (dim > n)."""
    workload = scenario.workload
    if estimate.parts.get("training", 0.0) < _variable(estimate) / 2:
        return None
    if getattr(workload, "data", None) == "classification":
        return Culprit("workload.samples", workload.samples, "lower workload.samples")  # type: ignore[union-attr]
    dim = scenario.vector.dim
    if workload.name == "quadratic" and dim > peer_count(scenario):
        return Culprit("vector.dim", dim, "lower vector.dim")
    return None


def _variable(estimate: MemoryEstimate) -> float:
    """The estimate without the run's fixed costs (which would dilute every ratio)."""
    return estimate.nbytes - estimate.parts["runtime"]


def _advice(name: str, value: Any, default: Any) -> str:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (value, default))
    verb = ("raise" if value < default else "lower") if numbers else "change"
    return f"{verb} protocol.{name} (default {default})"


def _memory_message(
    scenario: Scenario, estimate: MemoryEstimate, limit: float, what: str, where: str = ""
) -> str:
    n, dim = peer_count(scenario), scenario.vector.dim
    blamed = culprit(scenario, estimate, limit)
    size = f"{n} peers × {dim} {scenario.vector.dtype} coordinates"
    return (
        f"{where}{blamed.key}: {blamed.value} needs about {format_bytes(estimate.nbytes)} of "
        f"memory ({size}), more than the {format_bytes(limit)} {what}; {blamed.advice}, or "
        "raise the limit with --max-memory"
    )


def format_bytes(nbytes: float) -> str:
    """``1.5 GiB``: binary prefixes, three significant digits."""
    if math.isinf(nbytes):
        return "unlimited"
    value, unit = float(nbytes), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            break
        value /= 1024
    return f"{value:.3g} {unit}"


def guard(scenario: Scenario) -> MemoryEstimate:
    """What :func:`sim.engine.run` calls before it builds anything: refuse a run that
    would not fit (:class:`ResourceError`), warn about one that may take hours
    (:class:`~sim.engine.workload.SlowRunWarning`, given once per message and process)."""
    estimate = check_memory(scenario)
    message = slow_run_message(scenario)
    if message is not None and message not in _WARNED:  # once per process: repeats,
        _WARNED.add(message)  # sweeps (warning filters alone are reset by libraries)
        warnings.warn(message, SlowRunWarning, stacklevel=3)
    return estimate


#: Slow-run warnings already given in this process.
_WARNED: set[str] = set()


def out_of_memory_while(exc: BaseException) -> str:
    """What a run was doing when ``exc`` (a ``MemoryError``) was raised: ``building the
    state`` or ``running round k``, read from the engine's frames in its traceback;
    ``running the simulation`` when none is found."""
    from sim.engine.schedules import Engine

    phase = "running the simulation"
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        found = frame.f_locals.get("self")
        if not isinstance(found, Engine):
            found = frame.f_locals.get("engine")
        if isinstance(found, Engine):
            phase = _phase(found, building=frame.f_code.co_name == "__init__")
        tb = tb.tb_next
    return phase


def _phase(run: Any, building: bool) -> str:
    if building:
        return "building the state"
    where = f"running round {getattr(run, 'rounds', 0)}"
    if run.scenario.clock == "network":
        where += f" (simulated time {float(run.env.now):g} s)"
    return where
