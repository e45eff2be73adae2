"""The scenario format: frozen pydantic models, one per YAML section.

Unknown keys are errors; quantities are stored as SI floats; protocol parameters are a
union discriminated by ``protocol.name`` whose members live in the protocol modules.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from protocols import params_union
from sim.errors import ScenarioError
from sim.scenario.churn import (
    BernoulliChurn,
    Churn,
    ChurnBase,
    ExponentialChurn,
    NoChurn,
    TraceChurn,
    WavesChurn,
    class_index,
)
from sim.scenario.fields import (
    Bandwidth,
    Duration,
    PeerBandwidth,
    PeerDist,
    PeerDuration,
    PeerNumber,
    const,
)


class Section(BaseModel):
    """Base of every scenario section: strict and frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PeerClass(Section):
    """A class of peers: a fraction of the population whose values override the defaults."""

    name: str | None = None
    fraction: float = Field(gt=0, le=1)
    upload: PeerBandwidth | None = None
    download: PeerBandwidth | None = None
    latency: PeerDuration | None = None
    compute: PeerNumber | None = None
    delay: PeerDuration | None = None
    client: bool = False


class Peers(Section):
    """Per-peer capacities and behaviour (see network.md)."""

    count: int = Field(default=64, ge=1)
    upload: PeerBandwidth = const(100e6 / 8)
    download: PeerBandwidth = const(100e6 / 8)
    latency: PeerDuration = const(0.010)
    compute: PeerNumber = const(1.0)
    delay: PeerDuration = const(0.0)
    classes: list[PeerClass] | None = None

    @field_validator("classes")
    @classmethod
    def _fractions_sum_to_one(cls, classes: list[PeerClass] | None) -> list[PeerClass] | None:
        if classes is not None:
            total = sum(c.fraction for c in classes)
            if not classes or abs(total - 1.0) > 1e-9:
                raise ValueError(f"expected class fractions summing to 1, got a sum of {total:g}")
        return classes


class SiteLink(Section):
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


class Network(Section):
    """How flows share capacity on the network clock (see network.md).

    ``sites`` maps peer class names (``peers.classes[].name``) to sites; peers of an
    unmapped class, and all peers when there are no classes, sit at site ``default``.
    ``links`` joins sites; a flow between peers at different sites also uses every link
    on the shortest path by latency between them (same-site flows use no link). Class
    names and paths between the sites peers use are checked against ``peers`` by
    :func:`sim.sites.check_sites` (run by the network clock).
    """

    sharing: Literal["maxmin", "rtt_weighted"] = "maxmin"
    sites: dict[str, Annotated[str, Field(min_length=1)]] = Field(default_factory=dict)
    links: list[SiteLink] = Field(default_factory=list)

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


class Vector(Section):
    """The vectors the peers hold and average."""

    dim: int = Field(default=1, ge=1)
    dtype: Literal["float64", "float32", "float16"] = "float64"
    init: Literal["normal", "uniform", "onehot", "file"] = "normal"
    file: str | None = None

    @model_validator(mode="after")
    def _file_given_for_file_init(self) -> Vector:
        if self.init == "file" and not self.file:
            raise ValueError(
                "expected vector.file (a .npy of shape (peers.count, dim)) with init: file"
            )
        return self


class Stop(Section):
    """When a run ends: whichever comes first."""

    max_rounds: int | None = Field(default=50, ge=0)
    max_time: Duration | None = None
    target_var: float | None = Field(default=1e-9, ge=0)


class Metrics(Section):
    """How often the recorder samples, and extra variance thresholds to time."""

    every: Duration = Field(default=1.0, description="rounds, or seconds on the network clock")
    targets: list[Annotated[float, Field(gt=0)]] = Field(default_factory=list)

    @field_validator("every")
    @classmethod
    def _positive(cls, every: float) -> float:
        if not every > 0:
            raise ValueError(f"expected a positive number of rounds or seconds, got {every!r}")
        return every


def _protocol_field() -> Any:
    return Annotated[params_union(), Field(discriminator="name")]


class Scenario(Section):
    """A whole scenario, resolved: every default filled in."""

    name: str = Field(default="scenario", pattern=r"^[A-Za-z0-9_.\-]+$")
    seed: int = Field(default=0, ge=0)
    repeats: int = Field(default=1, ge=1)
    clock: Literal["rounds", "network"] = "rounds"
    backend: Literal["numpy", "cupy"] = "numpy"
    peers: Peers = Field(default_factory=Peers)
    network: Network = Field(default_factory=Network)
    churn: Churn = Field(default_factory=NoChurn)
    vector: Vector = Field(default_factory=Vector)
    protocol: _protocol_field()  # type: ignore[valid-type]
    stop: Stop = Field(default_factory=Stop)
    metrics: Metrics = Field(default_factory=Metrics)

    @model_validator(mode="after")
    def _wave_class_exists(self) -> Scenario:
        # raises ScenarioError (not ValueError) so that the error names churn.class
        if isinstance(self.churn, WavesChurn) and self.churn.peer_class is not None:
            class_index(self.churn.peer_class, [c.name for c in self.peers.classes or []])
        return self

    @model_validator(mode="after")
    def _sites_fit_the_peers(self) -> Scenario:
        # raises ScenarioError naming network.sites; local import: sim.sites imports models
        if self.clock == "network" and self.network.links:
            from sim.sites import check_sites

            check_sites(self.network, self.peers)
        return self

    @model_validator(mode="after")
    def _network_clock_can_end(self) -> Scenario:
        if self.clock == "network" and self.stop.max_time is None and self.stop.max_rounds is None:
            raise ValueError("expected stop.max_time or stop.max_rounds with clock: network")
        return self


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
