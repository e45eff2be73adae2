"""The scenario format: frozen pydantic models, one per YAML section.

Unknown keys are errors; quantities are stored as SI floats; protocol parameters are a
union discriminated by ``protocol.name`` whose members live in the protocol modules.
"""

from __future__ import annotations

import contextlib
import math
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from protocols import params_union
from protocols.contract import MAX_DIM_TIMES_WIRE_COORDS
from sim.core.errors import InnerKeyError, ScenarioError
from sim.core.fields import (
    Bandwidth,
    Duration,
    Fraction,
    PeerBandwidth,
    PeerDist,
    PeerDuration,
    WholeBytes,
    const,
)
from sim.core.section import StrictSection
from sim.model.scenario.churn import (
    BernoulliChurn,
    Churn,
    ChurnBase,
    ExponentialChurn,
    NoChurn,
    TraceChurn,
    WavesChurn,
    class_index,
)
from sim.model.scenario.workload import NoWorkload, Target, Workload
from sim.model.scenario.workload import resolve as resolve_workload

#: ``peers.compute``: what it means (the schema and ``--help`` show it).
COMPUTE_DESCRIPTION = (
    "seconds of local work per averaging step (schedule: async; 0: averaging back to back; "
    "barrier rounds ignore it); with a workload: seconds per gradient step, on every schedule"
)

JITTER_DESCRIPTION = (
    "step-to-step variation of compute (network clock): each step's local work, or each "
    "gradient step, takes compute × a lognormal factor of mean 1 and this coefficient of "
    "variation, drawn per peer and step; 0: exactly compute every step"
)


class PeerClass(StrictSection):
    """A class of peers: a fraction of the population whose values override the defaults."""

    name: str | None = None
    fraction: Fraction = Field(gt=0, le=1)
    upload: PeerBandwidth | None = None
    download: PeerBandwidth | None = None
    latency: PeerDuration | None = None
    compute: PeerDuration | None = Field(default=None, description=COMPUTE_DESCRIPTION)
    delay: PeerDuration | None = None
    client: bool = False


class Peers(StrictSection):
    """Per-peer capacities and behaviour (see network.md)."""

    count: int = Field(default=64, ge=1)
    upload: PeerBandwidth = const(100e6 / 8)
    download: PeerBandwidth = const(100e6 / 8)
    latency: PeerDuration = const(0.010)
    compute: PeerDuration = Field(default=const(1.0), description=COMPUTE_DESCRIPTION)
    delay: PeerDuration = const(0.0)
    compute_jitter: float = Field(default=0.0, ge=0.0, le=10.0, description=JITTER_DESCRIPTION)
    classes: list[PeerClass] | None = None

    @field_validator("classes")
    @classmethod
    def _fractions_sum_to_one(cls, classes: list[PeerClass] | None) -> list[PeerClass] | None:
        if classes is not None:
            total = sum(c.fraction for c in classes)
            if not classes or abs(total - 1.0) > 1e-9:
                raise ValueError(f"expected class fractions summing to 1, got a sum of {total:g}")
        return classes


class SiteLink(StrictSection):
    """An undirected, full-duplex link between two sites (``network.links`` entry).

    Each direction has the full ``capacity`` (bytes/s, ``> 0``, ``inf`` allowed: a link
    that only adds latency); a flow crossing the link also waits ``latency`` seconds.
    """

    a: str = Field(min_length=1)
    b: str = Field(min_length=1)
    capacity: Bandwidth
    latency: Duration = 0.0

    @field_validator("capacity")
    @classmethod
    def _capacity_positive(cls, capacity: float) -> float:
        if not capacity > 0:
            raise ValueError(f"expected a capacity > 0 (e.g. 1 Gbit/s), got {capacity!r}")
        return capacity

    @model_validator(mode="after")
    def _two_sites(self) -> SiteLink:
        if self.a == self.b:
            raise ValueError(f"expected a link between two different sites, got a = b = {self.a!r}")
        return self


#: The site of peers whose class (or lack of one) ``network.sites`` does not map.
DEFAULT_SITE = "default"


class Network(StrictSection):
    """How flows share capacity on the network clock (see network.md).

    ``sites`` maps peer class names (``peers.classes[].name``) to sites; peers of an
    unmapped class, and all peers when there are no classes, sit at site ``default``.
    ``links`` joins sites; a flow between peers at different sites also uses every link
    on the shortest path by latency between them (same-site flows use no link). Class
    names and paths between the sites peers use are checked against ``peers`` by
    :func:`sim.model.sites.check_sites` (run by the network clock).
    """

    sharing: Literal["maxmin", "rtt_weighted"] = "maxmin"
    sites: dict[str, Annotated[str, Field(min_length=1)]] = Field(default_factory=dict)
    links: list[SiteLink] = Field(default_factory=list)
    groups_alone: bool = Field(
        default=True,
        description=(
            "time each group (schedule async; barrier rounds of moshpit and random_groups: "
            "groups of up to 128 peers) in a compiled loop of its own where no other flow "
            "can use its links (instants equal the network clock's to round-off); false: "
            "every flow on the network clock's events"
        ),
    )

    @model_validator(mode="after")
    def _one_link_per_site_pair(self) -> Network:
        seen: dict[frozenset[str], int] = {}
        for k, link in enumerate(self.links):
            pair = frozenset((link.a, link.b))
            if pair in seen:
                raise ScenarioError(
                    f"network.links.{k}",
                    f"{link.a} - {link.b}",
                    f"one link per pair of sites (network.links.{seen[pair]} joins them already)",
                )
            seen[pair] = k
        return self


#: Bytes per coordinate of each ``vector.dtype``.
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2}
WIRE_BYTES_DESCRIPTION = (
    "bytes of one whole vector on the wire, uncompressed (e.g. '1 GB'); flows carry this "
    "size while the arithmetic runs on dim coordinates (null: dim × itemsize)"
)


class Vector(StrictSection):
    """The vectors the peers hold and average.

    ``wire_bytes`` (default: ``dim`` × the dtype's itemsize) is the size of one whole
    vector on the wire: a model of 10⁹ parameters is simulated on ``dim`` coordinates (a
    sample: averaging is linear per coordinate) while every message carries its share of
    the real size. It is a whole number of coordinates of ``dtype``, at least one per
    simulated coordinate.
    """

    dim: int = Field(default=1, ge=1)
    dtype: Literal["float64", "float32", "float16"] = "float64"
    init: Literal["normal", "uniform", "onehot", "file"] = "normal"
    file: str | None = None
    wire_bytes: WholeBytes | None = Field(default=None, description=WIRE_BYTES_DESCRIPTION)

    @model_validator(mode="after")
    def _file_given_for_file_init(self) -> Vector:
        if self.init == "file" and not self.file:
            raise ValueError(
                "expected vector.file (a .npy of shape (peers.count, dim)) with init: file"
            )
        return self

    @model_validator(mode="after")
    def _wire_fits_the_vector(self) -> Vector:
        # InnerKeyError: the message names vector.wire_bytes, not vector
        size, itemsize = self.wire_bytes, self.itemsize
        if size is None:
            return self
        least = self.dim * itemsize
        if size < least:
            expected = (
                f"at least vector.dim × {itemsize} = {least} bytes (one {self.dtype} "
                "coordinate on the wire per simulated coordinate)"
            )
            raise InnerKeyError("wire_bytes", size, expected)
        if size % itemsize:
            expected = f"a whole number of {self.dtype} coordinates (a multiple of {itemsize})"
            raise InnerKeyError("wire_bytes", size, expected)
        if self.dim * (size // itemsize) > MAX_DIM_TIMES_WIRE_COORDS:
            most = MAX_DIM_TIMES_WIRE_COORDS // self.dim * itemsize
            expected = (
                f"at most {most} bytes with vector.dim {self.dim} (dim × coordinates ≤ 2**62)"
            )
            raise InnerKeyError("wire_bytes", size, expected)
        return self

    @property
    def itemsize(self) -> int:
        """Bytes of one coordinate of ``dtype``."""
        return ITEMSIZE[self.dtype]

    @property
    def wire_size(self) -> int:
        """Bytes of one whole vector on the wire, uncompressed: ``wire_bytes``, or
        ``dim`` × itemsize when it is not set."""
        return self.dim * self.itemsize if self.wire_bytes is None else self.wire_bytes

    @property
    def wire_coords(self) -> int:
        """Coordinates of one whole vector on the wire (``dim`` without ``wire_bytes``)."""
        return self.wire_size // self.itemsize


#: ``stop.max_rounds`` on the rounds clock when the scenario sets no bound at all.
DEFAULT_MAX_ROUNDS = 50


class Stop(StrictSection):
    """When a run ends: whichever comes first (the summary's ``stop_reason`` says which).

    A bound the scenario sets is never overridden by a default: on the rounds clock a
    scenario with neither ``max_rounds`` nor ``max_time`` gets ``max_rounds: 50``; on the
    network clock one of them is required. The resolved scenario records what was used.
    ``target_var`` (null or 0: none) ends a run the instant ``target_on`` (``var``, over
    the existing peers, or ``var_alive``, over the present ones) first falls below it.
    ``target_loss`` (null: none; a training workload only) ends it the instant the loss
    of the averaged model F(x̄) first falls below it (at a round on the rounds clock); it
    is no bound of its own (a loss need not fall that far).
    """

    max_rounds: int | None = Field(default=None, ge=0)
    max_time: Duration | None = None
    target_var: float | None = Field(default=1e-9, ge=0)
    target_on: Literal["var", "var_alive"] = "var"
    target_loss: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    @field_validator("target_loss", mode="before")
    @classmethod
    def _a_loss(cls, value: Any) -> Any:
        if value is None:
            return None
        number = math.nan
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            with contextlib.suppress(ValueError):  # YAML reads 1e-3 (no dot) as a string
                number = float(value)
        if not (math.isfinite(number) and number > 0):
            raise ValueError(f"expected a loss > 0 (finite; null: none), got {value!r}")
        return number

    @model_serializer(mode="wrap")
    def _without_unset_loss(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # no target_loss: the section dumps as before the key existed (scenario.yaml,
        # sweep run keys)
        data = handler(self)
        if self.target_loss is None:
            data.pop("target_loss", None)
        return data

    def resolved(self, clock: str) -> Stop:
        """This section with the clock's default bound filled in (see the class doc)."""
        unbounded = self.max_rounds is None and self.max_time is None
        if clock == "rounds" and unbounded and "max_rounds" not in self.model_fields_set:
            return self.model_copy(update={"max_rounds": DEFAULT_MAX_ROUNDS})
        if unbounded and (clock == "network" or not self.target_var):
            raise InnerKeyError(
                "stop.max_time",
                None,
                "stop.max_time or stop.max_rounds with clock: network"
                if clock == "network"
                else "stop.max_time, stop.max_rounds or stop.target_var (a run must end)",
            )
        return self


#: Shortest ``metrics.every``: 1 µs on the network clock (less would not be a sampling
#: interval but a float underflow: 5e-324 s overflowed the recorder), a millionth of a
#: round on the rounds clock (where anything below 1 samples every round).
MIN_EVERY = 1e-6


class Metrics(StrictSection):
    """How often the recorder samples, and extra variance thresholds to time."""

    every: Duration = Field(default=1.0, description="rounds, or seconds on the network clock")
    targets: list[Target] = Field(default_factory=list)

    @field_validator("every")
    @classmethod
    def _positive(cls, every: float) -> float:
        if not every > 0:
            raise ValueError(f"expected a positive number of rounds or seconds, got {every!r}")
        if every < MIN_EVERY:
            raise ValueError(
                f"expected at least {MIN_EVERY:g} (1 µs, or a millionth of a round), got {every!r}"
            )
        return every


#: Largest seed: seeds (and seed + repeat) stay exact in float64, JSON and int64 tables.
MAX_SEED = 2**53
#: Most repeats of one scenario (more is a typo, not a statistic).
MAX_REPEATS = 10_000


def _protocol_field() -> Any:
    return Annotated[params_union(), Field(discriminator="name")]


class Scenario(StrictSection):
    """A whole scenario, resolved: every default filled in."""

    name: str = Field(default="scenario", pattern=r"^[A-Za-z0-9_.\-]+$")
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    repeats: int = Field(default=1, ge=1, le=MAX_REPEATS)
    clock: Literal["rounds", "network"] = "rounds"
    schedule: Literal["barrier", "async"] = Field(
        default="barrier",
        description="network clock: barrier rounds (the papers) or async, every peer's own "
        "loop of local work and averaging steps (hivemind)",
    )
    backend: Literal["numpy", "cupy"] = "numpy"
    peers: Peers = Field(default_factory=Peers)
    network: Network = Field(default_factory=Network)
    churn: Churn = Field(default_factory=NoChurn)
    vector: Vector = Field(default_factory=Vector)
    protocol: _protocol_field()  # type: ignore[valid-type]
    stop: Stop = Field(default_factory=Stop)
    metrics: Metrics = Field(default_factory=Metrics)
    workload: Workload = Field(default_factory=NoWorkload)

    @model_validator(mode="after")
    def _wave_class_exists(self) -> Scenario:
        # raises ScenarioError (not ValueError) so that the error names churn.class
        if isinstance(self.churn, WavesChurn) and self.churn.peer_class is not None:
            class_index(self.churn.peer_class, [c.name for c in self.peers.classes or []])
        return self

    @model_validator(mode="after")
    def _sites_fit_the_peers(self) -> Scenario:
        # raises ScenarioError naming network.sites; local import: sim.model.sites imports models
        if self.clock == "network" and self.network.links:
            from sim.model.sites import check_sites

            check_sites(self.network, self.peers)
        return self

    @model_validator(mode="after")
    def _leaves_fit_the_population(self) -> Scenario:
        # a leave removes a peer that exists: more leaves than peers ever exist is a typo
        leaves, population = self.churn.leaves, self.peers.count + self.churn.joining
        if leaves is not None and leaves.count > population:
            expected = (
                f"at most peers.count + churn.joins.count = {population} (a leave removes a peer)"
            )
            raise ScenarioError("churn.leaves.count", leaves.count, expected)
        return self

    @model_validator(mode="after")
    def _schedule_fits(self) -> Scenario:
        # raises ScenarioError naming schedule (or protocol.matchmaking_time)
        if self.schedule == "async":
            check_async(self.clock, self.protocol)
        return self

    @model_validator(mode="after")
    def _stop_bounds(self) -> Scenario:
        # the clock's default bound (Stop.resolved), recorded in the resolved scenario
        stop = self.stop.resolved(self.clock)
        return self if stop is self.stop else self.model_copy(update={"stop": stop})

    @model_validator(mode="after")
    def _workload_fits(self) -> Scenario:
        # after _stop_bounds: fills vector.dim, stop.target_var, the schedule's horizon
        return resolve_workload(self)


def check_async(clock: str, protocol: Any) -> None:
    """Refuse ``schedule: async`` where it cannot run: on the rounds clock, for a
    protocol without an asynchronous form (the message lists those that have one), and
    with ``matchmaking_time`` 0 (a declaration must expire after it is made).

    Raises
    ------
    sim.core.errors.ScenarioError
        On ``schedule`` or ``protocol.matchmaking_time``.
    """
    import protocols

    if clock != "network":
        raise ScenarioError(
            "schedule",
            "async",
            "barrier with clock: rounds (schedule: async runs on the network clock)",
        )
    if "async" not in protocols.schedules_of(protocols.get(protocol.name)):
        runs = ", ".join(
            name
            for name, cls in protocols.REGISTRY.items()
            if "async" in protocols.schedules_of(cls)
        )
        expected = f"barrier for protocol {protocol.name} (schedule: async runs {runs})"
        raise ScenarioError("schedule", "async", expected)
    wait_s = getattr(protocol, "matchmaking_time", None)
    if wait_s is not None and not wait_s > 0:
        expected = "> 0 with schedule: async (a declaration must expire after it is made)"
        raise ScenarioError("protocol.matchmaking_time", wait_s, expected)


def peer_value_fields() -> tuple[str, ...]:
    """Names of the per-peer value fields, in sampling order."""
    return ("upload", "download", "latency", "compute", "delay")


__all__ = [
    "BernoulliChurn",
    "Churn",
    "ChurnBase",
    "ExponentialChurn",
    "NoChurn",
    "PeerDist",
    "Scenario",
    "TraceChurn",
    "WavesChurn",
    "peer_value_fields",
]
