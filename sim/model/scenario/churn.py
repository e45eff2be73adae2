"""The ``churn`` section: one frozen model per churn model, discriminated by ``model``.

Times are in seconds on the network clock and in rounds on the rounds clock (one round
is one unit of simulated time). Every model shares ``rejoin`` (``keep``, ``reset`` or
``fetch``: what a peer brings back). The meaning of each model is in ``network.md``;
the schedule each one generates is in :mod:`sim.model.churn.schedule`. Rates may be written
with a unit (``3/min``, ``2/h``: :func:`sim.core.units.parse_rate`), fractions and ``p`` as
percentages (``30%``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
    field_validator,
)

from sim.core import units
from sim.core.errors import ScenarioError
from sim.core.fields import Duration, Fraction, Rate
from sim.core.section import StrictSection

#: ``bernoulli``'s period when the scenario gives none: one second (one round).
DEFAULT_PERIOD_S = 1.0


def _class_selector(value: object) -> int | str:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ValueError(f"expected a class name or index of peers.classes, got {value!r}")


ClassSelector = Annotated[
    int | str,
    PlainValidator(_class_selector),
    PlainSerializer(lambda value: value, return_type=Any),
    WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]}),
]


class PopulationChange(StrictSection):
    """Permanent joins or leaves: ``count`` of them, at Poisson times of ``rate``
    (per second on the network clock, per round on the rounds clock)."""

    count: int = Field(ge=0)
    rate: Rate = Field(gt=0, le=units.MAX_RATE, allow_inf_nan=False)

    @field_validator("rate")
    @classmethod
    def _rate_positive(cls, rate: float) -> float:
        return _positive(rate, "rate")


class ChurnBase(StrictSection):
    """Keys common to every churn model."""

    rejoin: Literal["keep", "reset", "fetch"] = "keep"
    joins: PopulationChange | None = None
    leaves: PopulationChange | None = None

    @property
    def joining(self) -> int:
        """How many peers join during the run (they exist only from their join time)."""
        return self.joins.count if self.joins is not None else 0

    def expected_absent_fraction(
        self,
        peer_classes: np.ndarray,
        class_names: Sequence[str | None] = (),
        horizon_s: float | None = None,
    ) -> float:
        """Mean fraction of the peers absent at a random instant, in the stationary
        regime (``avsim info``); 0 here (no absences). Joins and leaves are not absences.

        Parameters
        ----------
        peer_classes
            (N,) int: each peer's index into ``peers.classes`` (N: the initial peers).
        class_names
            The ``name`` of each class of ``peers.classes``.
        horizon_s
            Length of the run (seconds, rounds on the rounds clock) when known: a trace
            is averaged over it.
        """
        return 0.0


def _positive(value: float, what: str) -> float:
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"expected {what} > 0 (and finite), got {value!r}")
    return value


def _churn_period(value: float) -> float:
    """A redraw period or a mean up/down time: finite and at least ``units.MIN_PERIOD_S``
    (shorter ones make more churn events than any run can replay)."""
    if not (value >= units.MIN_PERIOD_S and math.isfinite(value)):
        raise ValueError(f"expected a duration > 0 (at least 1 us, and finite), got {value!r}")
    return value


class NoChurn(ChurnBase):
    """Everyone is always present."""

    model: Literal["none"] = "none"


class BernoulliChurn(ChurnBase):
    """Every ``period`` each peer is absent independently with probability ``p``.

    ``period`` (seconds; default ``null``: 1 s on the network clock, one round on the
    rounds clock) is the time between redraws; an absent peer is back at the next draw
    unless that draw makes it absent again.
    """

    model: Literal["bernoulli"]
    p: Fraction = Field(default=0.0, ge=0.0, le=1.0)
    period: Duration | None = None

    @field_validator("period")
    @classmethod
    def _period_positive(cls, value: float | None) -> float | None:
        return None if value is None else _churn_period(value)

    @property
    def period_s(self) -> float:
        """The redraw period in seconds (rounds), default filled in."""
        return DEFAULT_PERIOD_S if self.period is None else self.period

    def expected_absent_fraction(
        self,
        peer_classes: np.ndarray,
        class_names: Sequence[str | None] = (),
        horizon_s: float | None = None,
    ) -> float:
        """``p``: each peer is absent with probability p at every draw."""
        return self.p


class ExponentialChurn(ChurnBase):
    """Each peer alternates exponential up-times (mean ``mtbf``) and down-times (``mttr``).

    The process starts stationary: each peer is up at time 0 with probability
    ``mtbf / (mtbf + mttr)``, so availability is that from the first instant on.
    """

    model: Literal["exponential"]
    mtbf: Duration
    mttr: Duration

    @field_validator("mtbf", "mttr")
    @classmethod
    def _durations_positive(cls, value: float) -> float:
        return _churn_period(value)

    def expected_absent_fraction(
        self,
        peer_classes: np.ndarray,
        class_names: Sequence[str | None] = (),
        horizon_s: float | None = None,
    ) -> float:
        """``mttr / (mtbf + mttr)``, the stationary probability of being down."""
        return self.mttr / (self.mtbf + self.mttr)


class WavesChurn(ChurnBase):
    """Preemption waves: at Poisson times a fraction of peers goes down for ``duration``.

    ``rate`` is in waves per second (per round on the rounds clock). Each wave takes
    ``round(fraction · n)`` (at least one) of the ``n`` eligible peers, drawn uniformly
    without replacement; eligible peers are all peers, or the members of ``class`` (a
    name or an index into ``peers.classes``). A peer already down when a wave hits it
    stays down until the later of its two return times.
    """

    model_config = ConfigDict(serialize_by_alias=True)

    model: Literal["waves"]
    rate: Rate = Field(gt=0, le=units.MAX_RATE, allow_inf_nan=False)
    fraction: Fraction = Field(gt=0, le=1)
    duration: Duration
    peer_class: ClassSelector | None = Field(default=None, alias="class")

    @field_validator("duration")
    @classmethod
    def _duration_positive(cls, value: float) -> float:
        return _positive(value, "a duration")

    def expected_absent_fraction(
        self,
        peer_classes: np.ndarray,
        class_names: Sequence[str | None] = (),
        horizon_s: float | None = None,
    ) -> float:
        """A wave hits a given eligible peer with probability k/E (k peers of the E
        eligible), so the hits on it are Poisson of rate ``rate`` · k/E and it is down
        when hit within the last ``duration``: 1 − exp(−rate · duration · k/E), times
        the eligible share E/N of the peers."""
        n = len(peer_classes)
        eligible = self.targets(n, peer_classes, class_names).size
        if n == 0 or eligible == 0:
            return 0.0
        hit = max(1, math.floor(self.fraction * eligible + 0.5)) / eligible
        return -math.expm1(-self.rate * self.duration * hit) * eligible / n

    def targets(
        self,
        n_peers: int,
        peer_classes: np.ndarray | None = None,
        class_names: Sequence[str | None] | None = None,
    ) -> np.ndarray:
        """(k,) intp: the peers waves may hit (all, or the members of ``class``).

        ``peer_classes`` ((N,) int, each peer's index into ``peers.classes``) is needed
        when ``class`` is given; ``class_names`` when it is a name.
        """
        if self.peer_class is None:
            return np.arange(n_peers, dtype=np.intp)
        if peer_classes is None:
            raise ValueError("waves on one class need peer_classes (the peers' class column)")
        if class_names is None and isinstance(self.peer_class, int):
            index = self.peer_class
        else:
            index = class_index(self.peer_class, class_names or [])
        return np.flatnonzero(np.asarray(peer_classes) == index).astype(np.intp)


class TraceChurn(ChurnBase):
    """Absences replayed from a CSV ``peer,down_s,up_s`` (see :mod:`sim.model.churn.trace`)."""

    model: Literal["trace"]
    file: str = Field(min_length=1)

    def expected_absent_fraction(
        self,
        peer_classes: np.ndarray,
        class_names: Sequence[str | None] = (),
        horizon_s: float | None = None,
    ) -> float:
        """Absent peer-time over ``[0, horizon_s)`` (default: until the trace's last
        finite time) divided by N × that span; reads and checks the file."""
        from sim.model.churn.trace import load_trace

        n = len(peer_classes)
        trace = load_trace(self.file, n)
        times = np.concatenate([trace.down_s, trace.up_s[np.isfinite(trace.up_s)]])
        end = horizon_s if horizon_s is not None else float(times.max(initial=0.0))
        if n == 0 or not end > 0 or not math.isfinite(end):
            return 0.0
        absent = np.clip(np.minimum(trace.up_s, end) - trace.down_s, 0.0, None)
        return float(absent.sum() / (n * end))


Churn = Annotated[
    NoChurn | BernoulliChurn | ExponentialChurn | WavesChurn | TraceChurn,
    Field(discriminator="model"),
]


def class_index(selector: int | str, class_names: Sequence[str | None]) -> int:
    """The index into ``peers.classes`` that ``churn.class`` names.

    Parameters
    ----------
    selector
        A class name, or an index into ``peers.classes``.
    class_names
        The ``name`` of every class of ``peers.classes``, in order (``None`` if unnamed).

    Raises
    ------
    ScenarioError
        On ``churn.class`` when no class has that name or index.
    """
    if isinstance(selector, int) and 0 <= selector < len(class_names):
        return selector
    if isinstance(selector, str) and selector in class_names:
        return list(class_names).index(selector)
    if not class_names:
        raise ScenarioError("churn.class", selector, "a class of peers.classes (none given)")
    known = ", ".join(f"{k}" + (f" ({name})" if name else "") for k, name in enumerate(class_names))
    raise ScenarioError("churn.class", selector, f"a class name or index among: {known}")


__all__ = [
    "DEFAULT_PERIOD_S",
    "BernoulliChurn",
    "Churn",
    "ChurnBase",
    "ExponentialChurn",
    "NoChurn",
    "TraceChurn",
    "WavesChurn",
    "class_index",
]
