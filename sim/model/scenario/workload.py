"""The ``workload`` section: what the peers train between averaging steps (issue 14).

``name: none`` (the default) is pure averaging, exactly as without the section. A
training workload gives every peer an objective f_i and a local optimizer (SGD with
momentum, weight decay and a learning-rate schedule): on the rounds clock each present
peer takes ``local_steps`` gradient steps, then the protocol averages once
(:mod:`sim.engine.training`). On the network clock each step takes ``peers.compute``
seconds (:mod:`sim.engine.training_net`): barrier rounds, collectives and the peer loops
of ``schedule: async`` average after every ``local_steps`` steps; the edge-clock
protocols (pairwise_gossip, push_sum, a2cid2) exchange in parallel with the steps.

- ``quadratic``: f_i(x) = ½‖A x − y_i‖²/m = ½(x − x_i*)ᵀH(x − x_i*), H = AᵀA/m with
  eigenvalues from 1/``condition`` to 1 (L = 1); the local optima x_i* spread around
  the optimum x* of the average objective with mean squared distance ``heterogeneity``
  (ζ²); a stochastic gradient adds noise of mean squared norm ``noise`` (σ²). Its
  dimension is ``vector.dim``.
- ``logistic``: multinomial logistic regression on scikit-learn's ``digits``, a
  ``classification`` data set made with ``make_classification``, or a ``file`` (an
  ``.npz`` with ``X`` and ``y``); a held-out test split; the training split shared by
  every peer, split iid or label-skewed (Dirichlet(``alpha``)). Its parameter count,
  (features + 1) × classes, is ``vector.dim``: derived when ``vector.dim`` is not
  given, an error when it is given and differs.

Loss targets are entries ``{loss: value}`` of ``metrics.targets`` (:data:`Target`).
:func:`resolve` checks the workload against the rest of the scenario and fills in what
it derives (``vector.dim``, ``stop.target_var``, the schedule's ``total_steps``).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, TypeGuard

from pydantic import (
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
    model_validator,
)

from sim.core.errors import InnerKeyError, ScenarioError
from sim.core.fields import Fraction
from sim.core.section import StrictSection

#: Most gradient steps per averaging round, and most steps in a schedule's horizon
#: (more is a typo, not an experiment).
MAX_LOCAL_STEPS = 10_000
MAX_TOTAL_STEPS = 10**9
#: Largest generated or loaded training set, in float64 elements (1 GiB).
MAX_DATA_ELEMENTS = 2**27


class Sgd(StrictSection):
    """Each peer's local optimizer: SGD as ``torch.optim.SGD`` (no dampening).

    With g the stochastic gradient at the peer's model x: g ← g + ``weight_decay``·x;
    with ``momentum`` μ > 0, b ← μ·b + g and d = g + μ·b (``nesterov``) or d = b; else
    d = g; then x ← x − γ_t·d, γ_t = ``lr`` × the schedule at the peer's own step t.
    """

    lr: float = Field(default=0.1, gt=0, allow_inf_nan=False, description="learning rate γ")
    momentum: float = Field(default=0.0, ge=0, lt=1, description="heavy-ball momentum μ")
    nesterov: bool = Field(default=False, description="Nesterov momentum (needs momentum > 0)")
    weight_decay: float = Field(default=0.0, ge=0, allow_inf_nan=False, description="L2 factor")
    schedule: Literal["constant", "cosine", "step"] = Field(
        default="constant", description="learning-rate schedule over total_steps"
    )
    warmup_steps: int = Field(
        default=0, ge=0, le=MAX_TOTAL_STEPS, description="linear warm-up from lr/warmup_steps"
    )
    total_steps: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOTAL_STEPS,
        description="a peer's steps the schedule spans (default: stop.max_rounds × local_steps)",
    )
    milestones: list[Annotated[float, Field(gt=0, le=1)]] = Field(
        default_factory=lambda: [0.5, 0.75],
        max_length=100,
        description="schedule step: fractions of total_steps where lr is multiplied by gamma",
    )
    gamma: float = Field(default=0.1, gt=0, le=1, description="schedule step: the factor")

    @model_validator(mode="after")
    def _nesterov_needs_momentum(self) -> Sgd:
        if self.nesterov and self.momentum == 0:
            raise InnerKeyError("momentum", 0.0, "momentum > 0 with nesterov: true")
        return self


class _Training(StrictSection):
    """Keys every training workload has (``name`` first: subclasses narrow it)."""

    name: str
    local_steps: int = Field(
        default=1,
        ge=1,
        le=MAX_LOCAL_STEPS,
        description="gradient steps per averaging round (H); network clock: per averaging "
        "step (edge-clock protocols: ignored, their steps run on a clock of their own)",
    )
    optimizer: Sgd = Field(default_factory=Sgd)
    init: Literal["zeros", "same", "each"] = Field(
        default="zeros",
        description="start: zeros; same: one draw of vector.init for all; each: one per peer",
    )
    overlap: bool = Field(
        default=False,
        description="steps from the model before the round, applied after it (x ← Wx − γ∇F(x))",
    )


class NoWorkload(StrictSection):
    """Pure averaging: the peers' vectors change only by the protocol."""

    name: Literal["none"] = "none"


class QuadraticWorkload(_Training):
    """f_i(x) = ½(x − x_i*)ᵀH(x − x_i*) with a known optimum (see the module doc)."""

    name: Literal["quadratic"] = "quadratic"
    condition: float = Field(
        default=10.0, ge=1, le=1e12, allow_inf_nan=False, description="L/μ of H (L = 1)"
    )
    heterogeneity: float = Field(
        default=1.0,
        ge=0,
        le=1e12,
        allow_inf_nan=False,
        description="ζ²: mean squared distance of the local optima to the optimum",
    )
    noise: float = Field(
        default=0.0,
        ge=0,
        le=1e12,
        allow_inf_nan=False,
        description="σ²: mean squared norm of a stochastic gradient's noise",
    )


#: Samples, features and classes of scikit-learn's bundled ``load_digits``.
DIGITS_SHAPE = (1797, 64, 10)
#: ``data: classification``'s size when the scenario does not give it.
CLASSIFICATION_DEFAULTS = {"samples": 2000, "features": 20, "classes": 10}


class LogisticWorkload(_Training):
    """Multinomial logistic regression (see the module doc)."""

    name: Literal["logistic"] = "logistic"
    data: Literal["digits", "classification", "file"] = Field(
        default="digits", description="digits (bundled), classification (generated), file (.npz)"
    )
    file: str | None = Field(default=None, description="data: file: an .npz with X and y")
    samples: int | None = Field(
        default=None, ge=4, le=10**7, description="data: classification [2000]"
    )
    features: int | None = Field(
        default=None, ge=1, le=10**4, description="data: classification [20]"
    )
    classes: int | None = Field(
        default=None, ge=2, le=1000, description="data: classification [10]"
    )
    test_fraction: Fraction = Field(default=0.2, gt=0, lt=1, description="held-out share")
    split: Literal["shared", "iid", "dirichlet"] = Field(
        default="iid",
        description="shared: every peer reads the whole training set; iid: disjoint equal "
        "shares; dirichlet: label-skewed shares",
    )
    alpha: float = Field(
        default=0.5, gt=0, le=1e6, allow_inf_nan=False, description="split: dirichlet: α"
    )
    batch_size: int | None = Field(
        default=32, ge=1, le=10**5, description="samples per step; null: the peer's whole share"
    )

    @model_validator(mode="after")
    def _data_keys(self) -> LogisticWorkload:
        if self.data == "file" and not self.file:
            raise InnerKeyError("file", None, "the path of an .npz with X and y with data: file")
        if self.data != "file" and self.file is not None:
            raise InnerKeyError("file", self.file, f"no file with data: {self.data}")
        if self.data != "classification":
            for key in CLASSIFICATION_DEFAULTS:
                if getattr(self, key) is not None:
                    expected = f"no {key} with data: {self.data} (its data set fixes it)"
                    raise InnerKeyError(key, getattr(self, key), expected)
            return self
        filled = {k: v for k, v in CLASSIFICATION_DEFAULTS.items() if getattr(self, k) is None}
        made = self.model_copy(update=filled) if filled else self
        samples, features, classes = made.samples or 0, made.features or 0, made.classes or 0
        if samples * (features + 1) > MAX_DATA_ELEMENTS:
            expected = f"samples × (features + 1) ≤ {MAX_DATA_ELEMENTS} (1 GiB of data)"
            raise InnerKeyError("samples", samples, expected)
        if classes * 2 > 2**features:
            expected = f"at most 2**(features − 1) = {2 ** (features - 1)} classes"
            raise InnerKeyError("classes", classes, expected)
        return made


Workload = Annotated[NoWorkload | QuadraticWorkload | LogisticWorkload, Field(discriminator="name")]


class LossTarget(StrictSection):
    """A ``metrics.targets`` entry ``{loss: value}``: time when f(x̄) first falls below it."""

    loss: float = Field(gt=0)


def _target(value: object) -> float | LossTarget:
    """A ``metrics.targets`` entry: a variance threshold (a number > 0) or ``{loss: v}``."""
    if isinstance(value, LossTarget):
        return value
    if isinstance(value, dict):
        unknown = sorted(str(k) for k in value if k != "loss")
        if unknown:
            raise InnerKeyError(unknown[0], value[unknown[0]], "", known=["loss"])
        loss = _positive(value.get("loss"))
        if loss is None:
            raise InnerKeyError("loss", value.get("loss"), "a loss > 0")
        return LossTarget(loss=loss)
    number = _positive(value)
    if number is None:
        raise ValueError(f"expected a number > 0 (a variance) or {{loss: value}}, got {value!r}")
    return number


def _positive(value: object) -> float | None:
    """``value`` as a float when it is a number (or a numeric string) > 0, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number > 0 else None


def _dump_target(value: float | LossTarget) -> Any:
    return value.model_dump() if isinstance(value, LossTarget) else value


_TARGET_SCHEMA = {
    "anyOf": [
        {"type": "number", "exclusiveMinimum": 0},
        {
            "type": "object",
            "properties": {"loss": {"type": "number", "exclusiveMinimum": 0}},
            "required": ["loss"],
            "additionalProperties": False,
        },
    ]
}
#: A ``metrics.targets`` entry: a variance threshold, or ``{loss: value}``.
Target = Annotated[
    float | LossTarget,
    PlainValidator(_target),
    PlainSerializer(_dump_target, return_type=Any),
    WithJsonSchema(_TARGET_SCHEMA),
]


def loss_targets(targets: list[Any]) -> list[float]:
    """The loss thresholds among ``metrics.targets``, in order."""
    return [t.loss for t in targets if isinstance(t, LossTarget)]


def var_targets(targets: list[Any]) -> list[float]:
    """The variance thresholds among ``metrics.targets``, in order."""
    return [float(t) for t in targets if not isinstance(t, LossTarget)]


def check_no_float16(dtype: str) -> None:
    """Training computes gradients in the state's dtype: float64 or float32 only."""
    if dtype == "float16":
        raise ScenarioError("vector.dtype", dtype, "float64 or float32 with a workload")


#: A training workload (anything but ``name: none``).
TrainingWorkload = QuadraticWorkload | LogisticWorkload


def is_training(workload: Any) -> TypeGuard[TrainingWorkload]:
    """True for a training workload (anything but ``name: none``)."""
    return isinstance(workload, QuadraticWorkload | LogisticWorkload)


def resolve(scenario: Any) -> Any:
    """``scenario`` with what its workload derives filled in, or a ScenarioError.

    Without a workload only ``metrics.targets`` and ``stop.target_loss`` are checked (no
    loss target). With one:
    ``overlap`` only on the rounds clock; ``vector.dtype`` float64 or float32;
    ``vector.dim`` equals the model's parameters (filled in when not given);
    ``stop.target_var`` defaults to none (the peers start equal: var is 0 at once); a
    schedule that decays gets ``total_steps`` = ``stop.max_rounds`` × ``local_steps``
    when not given and rounds are averaging rounds (:func:`rounds_are_rounds`); else it
    must be given.
    """
    workload, updates = scenario.workload, {}
    if not is_training(workload):
        if scenario.stop.target_loss is not None:
            expected = "null without a training workload (workload.name: quadratic or logistic)"
            raise ScenarioError("stop.target_loss", scenario.stop.target_loss, expected)
        for index, target in enumerate(scenario.metrics.targets):
            if isinstance(target, LossTarget):
                expected = "a variance threshold (loss targets need a workload)"
                raise ScenarioError(f"metrics.targets.{index}", target.model_dump(), expected)
        return scenario
    if scenario.clock != "rounds" and workload.overlap:
        expected = "false with clock: network (steps take compute seconds there; the edge-"
        expected += "clock protocols already exchange in parallel with them)"
        raise ScenarioError("workload.overlap", True, expected)
    check_no_float16(scenario.vector.dtype)
    vector = _vector(scenario.vector, workload, scenario.peers.count + scenario.churn.joining)
    if vector is not scenario.vector:
        updates["vector"] = vector
    stop = _stop(scenario.stop)
    if stop is not scenario.stop:
        updates["stop"] = stop
    optimizer = _horizon(workload, stop, rounds_are_rounds(scenario))
    if optimizer is not workload.optimizer:
        updates["workload"] = workload.model_copy(update={"optimizer": optimizer})
    return scenario.model_copy(update=updates) if updates else scenario


def _vector(vector: Any, workload: Any, n_peers: int) -> Any:
    """``vector`` with ``dim`` the logistic model's parameter count (checked or filled)."""
    if not isinstance(workload, LogisticWorkload):
        return vector
    from sim.model.training.data import data_shape

    samples, features, classes = data_shape(workload)
    n_test = math.ceil(workload.test_fraction * samples)
    n_train = samples - n_test
    if n_train < 1 or n_test < 1:
        expected = f"a split that leaves training and test samples (the data has {samples})"
        raise ScenarioError("workload.test_fraction", workload.test_fraction, expected)
    if workload.split != "shared" and n_train < n_peers:
        expected = (
            f"shared with more peers ({n_peers}) than training samples ({n_train}): "
            "every peer of an iid or dirichlet split needs a sample"
        )
        raise ScenarioError("workload.split", workload.split, expected)
    params = (features + 1) * classes
    if "dim" in vector.model_fields_set and vector.dim != params:
        expected = (
            f"{params}, the logistic model's parameters ((features {features} + 1) × "
            f"classes {classes}), or no vector.dim"
        )
        raise ScenarioError("vector.dim", vector.dim, expected)
    return _with_dim(vector, params) if vector.dim != params else vector


def _with_dim(vector: Any, dim: int) -> Any:
    """``vector`` with ``dim``, validated again (its other keys may depend on ``dim``)."""
    from pydantic import ValidationError

    from sim.model.scenario.messages import from_validation_error

    data = {**vector.model_dump(), "dim": dim}
    try:
        return type(vector).model_validate(data)
    except ValidationError as exc:
        error = from_validation_error(exc, data)
        raise ScenarioError(f"vector.{error.key}", error.got, error.expected) from None


def _stop(stop: Any) -> Any:
    """``stop`` without the default variance target (a run must still have a bound)."""
    if "target_var" in stop.model_fields_set or stop.target_var is None:
        return stop
    if stop.max_rounds is None and stop.max_time is None:
        expected = "stop.max_rounds or stop.max_time with a workload (var is 0 from the start)"
        raise ScenarioError("stop.max_rounds", None, expected)
    return stop.model_copy(update={"target_var": None})


def rounds_are_rounds(scenario: Any) -> bool:
    """Whether ``stop.max_rounds`` counts averaging rounds: the rounds clock, and barrier
    rounds on the network clock (``schedule: barrier``, or a collective); else (continuous
    time, the peer loops of ``schedule: async``) it counts seconds."""
    if scenario.clock == "rounds":
        return True
    import protocols
    from protocols.base import BarrierProtocol

    cls = protocols.get(scenario.protocol.name)
    if not issubclass(cls, BarrierProtocol):
        return False
    return scenario.schedule == "barrier" or bool(cls.collective)


def _horizon(workload: Any, stop: Any, rounds: bool = True) -> Any:
    """The optimizer with ``total_steps`` filled in for a decaying schedule (``rounds``:
    ``stop.max_rounds`` counts averaging rounds, each ``local_steps`` steps)."""
    optimizer = workload.optimizer
    if optimizer.schedule == "constant" or optimizer.total_steps is not None:
        return optimizer
    if not rounds:
        expected = (
            f"a peer's number of steps for schedule: {optimizer.schedule} (here "
            "stop.max_rounds counts seconds and a peer's steps depend on its compute)"
        )
        raise ScenarioError("workload.optimizer.total_steps", None, expected)
    if stop.max_rounds is None:
        expected = f"a number of steps for schedule: {optimizer.schedule} (no stop.max_rounds)"
        raise ScenarioError("workload.optimizer.total_steps", None, expected)
    total = max(1, min(MAX_TOTAL_STEPS, stop.max_rounds * workload.local_steps))
    return optimizer.model_copy(update={"total_steps": total})


__all__ = [
    "DIGITS_SHAPE",
    "MAX_LOCAL_STEPS",
    "LogisticWorkload",
    "LossTarget",
    "NoWorkload",
    "QuadraticWorkload",
    "Sgd",
    "Target",
    "TrainingWorkload",
    "Workload",
    "is_training",
    "loss_targets",
    "resolve",
    "rounds_are_rounds",
    "var_targets",
]
