"""Variance thresholds and the first time each was crossed, on ``var`` and ``var_alive``.

A run times the stop target (``stop.target_var`` on ``stop.target_on``) and every
``metrics.targets`` value on both metrics. A threshold θ is crossed at the first instant
the metric is below θ; a smaller threshold is never crossed before a larger one, so each
metric's pending thresholds are checked largest first.

Summary fields (:meth:`Targets.fields`): ``rounds_to_target`` and ``time_to_target_s``
for the stop target; ``rounds_to_<t>``, ``time_to_<t>_s`` (``var``) and
``rounds_to_<t>_alive``, ``time_to_<t>_alive_s`` (``var_alive``) for each
``metrics.targets`` value, ``<t>`` as :func:`target_label` writes it (``1e-04``).

With a workload, ``metrics.targets`` entries ``{loss: v}`` and ``stop.target_loss`` are
thresholds on the loss of the averaged model (metric ``loss``, checked by
:mod:`sim.engine.observe.training`): ``rounds_to_loss_<v>`` and ``time_to_loss_<v>_s``,
``<v>`` as :func:`loss_label` writes it (``0.35``); on the network clock the summary
adds ``loss_resolution`` (``event`` or ``step``, :mod:`sim.engine.observe.loss_trail`).
``stop.target_loss`` ends the run when crossed (``stop_reason: target``), as the
variance stop target does. Only the variance thresholds keep the exact-target tracker
busy (:attr:`Targets.active`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.model.scenario.models import Scenario
from sim.model.scenario.workload import loss_targets, var_targets

#: The variance metrics a threshold can be on, and the suffix of their summary fields.
METRICS = {"var": "", "var_alive": "_alive"}


def target_label(target: float) -> str:
    """The suffix naming a variance target in summary fields: ``1e-04``."""
    return f"{target:.0e}"


def loss_label(target: float) -> str:
    """The suffix naming a loss target in summary fields: ``0.35``, ``1e-05``."""
    return f"{target:g}"


def all_loss_targets(scenario: Scenario) -> list[float]:
    """The loss thresholds of a run: those of ``metrics.targets`` in order, then
    ``stop.target_loss`` when it is not one of them."""
    losses = loss_targets(scenario.metrics.targets)
    stop = scenario.stop.target_loss
    return [*losses, stop] if stop is not None and stop not in losses else losses


def target_fields(scenario: Scenario) -> list[str]:
    """The summary fields the scenario's ``metrics.targets`` add (both variance
    metrics for a number, the loss for ``{loss: v}`` and ``stop.target_loss``; on the
    network clock ``loss_resolution`` with them)."""
    fields = []
    for target in var_targets(scenario.metrics.targets):
        label = target_label(target)
        for suffix in METRICS.values():
            fields += [f"rounds_to_{label}{suffix}", f"time_to_{label}{suffix}_s"]
    losses = all_loss_targets(scenario)
    for target in losses:
        label = loss_label(target)
        fields += [f"rounds_to_loss_{label}", f"time_to_loss_{label}_s"]
    if losses and scenario.clock == "network":
        fields.append("loss_resolution")
    return fields


class Targets:
    """The thresholds of one run and the (round, time) each was first crossed at.

    Parameters
    ----------
    scenario
        The run's scenario (``stop.target_var``, ``stop.target_on``, ``metrics.targets``).
    """

    def __init__(self, scenario: Scenario) -> None:
        stop = scenario.stop
        self.stop_key = (stop.target_on, stop.target_var) if stop.target_var else None
        self.targets = var_targets(scenario.metrics.targets)
        self.losses = all_loss_targets(scenario)
        #: ``stop.target_loss`` (None: none): the run ends when F(x̄) falls below it.
        self.loss_stop = stop.target_loss
        #: The summary's ``loss_resolution`` (network clock; set by the loss trail).
        self.loss_resolution: str | None = "sample" if scenario.clock == "network" else None
        keys = {(metric, t) for metric in METRICS for t in self.targets}
        if self.stop_key is not None:
            keys.add(self.stop_key)
        self.reached: dict[tuple[str, float], tuple[int, float]] = {}
        #: Called once when the last pending threshold is crossed.
        self.on_done: Callable[[], None] | None = None
        self._pending = {
            metric: sorted((t for m, t in keys if m == metric), reverse=True) for metric in METRICS
        }
        self._pending["loss"] = sorted(set(self.losses), reverse=True)

    @property
    def stop_reached(self) -> bool:
        """True once a stop target (``stop.target_var``, ``stop.target_loss``) has been
        crossed."""
        var = self.stop_key is not None and self.stop_key in self.reached
        return var or (self.loss_stop is not None and ("loss", self.loss_stop) in self.reached)

    @property
    def loss_stop_pending(self) -> bool:
        """True while ``stop.target_loss`` is set and not crossed yet."""
        return self.loss_stop is not None and ("loss", self.loss_stop) not in self.reached

    @property
    def active(self) -> bool:
        """True while some variance threshold is left to cross."""
        return bool(self._pending["var"] or self._pending["var_alive"])

    def metrics(self) -> list[str]:
        """The variance metrics that still have a threshold to cross."""
        return [metric for metric in METRICS if self._pending[metric]]

    def next_level(self, metric: str) -> float | None:
        """The largest threshold of ``metric`` not crossed yet, or None."""
        pending = self._pending[metric]
        return pending[0] if pending else None

    def pending(self, metric: str) -> list[float]:
        """The thresholds of ``metric`` not crossed yet, largest first (a copy)."""
        return list(self._pending[metric])

    def is_stop(self, metric: str, threshold: float) -> bool:
        """True when (metric, threshold) is a stop target."""
        return self.stop_key == (metric, threshold) or (
            metric == "loss" and threshold == self.loss_stop
        )

    def below(self, metric: str, value: float, rounds: int, time_s: float) -> bool:
        """The metric is ``value`` at (rounds, time_s): every pending threshold above it
        is crossed there. Returns True when that crossed the stop target."""
        pending = self._pending[metric]
        stopped = False
        while pending and value < pending[0]:
            stopped |= self.cross(metric, pending[0], rounds, time_s)
        return stopped

    def cross(self, metric: str, threshold: float, rounds: int, time_s: float) -> bool:
        """Record the first crossing of ``threshold`` (the largest pending one) on
        ``metric``; True when it is the stop target."""
        pending = self._pending[metric]
        if threshold in pending:
            pending.remove(threshold)
            self.reached[(metric, threshold)] = (int(rounds), float(time_s))
            if metric in METRICS and not self.active and self.on_done is not None:
                self.on_done()
        return self.is_stop(metric, threshold)

    def fields(self) -> dict[str, Any]:
        """The summary's ``rounds_to_*`` / ``time_to_*`` fields (None: never crossed)."""
        out: dict[str, Any] = {}
        stop = self.reached.get(self.stop_key) if self.stop_key else None
        out["rounds_to_target"], out["time_to_target_s"] = stop or (None, None)
        for target in self.targets:
            label = target_label(target)
            for metric, suffix in METRICS.items():
                rounds, time_s = self.reached.get((metric, target), (None, None))
                out[f"rounds_to_{label}{suffix}"] = rounds
                out[f"time_to_{label}{suffix}_s"] = time_s
        for target in self.losses:
            label = loss_label(target)
            rounds, time_s = self.reached.get(("loss", target), (None, None))
            out[f"rounds_to_loss_{label}"], out[f"time_to_loss_{label}_s"] = rounds, time_s
        if self.losses and self.loss_resolution is not None:
            out["loss_resolution"] = self.loss_resolution
        return out
