"""What a convergence figure needs to know about a run besides its metrics.

A metrics table alone does not say which clock produced it, whether its ``round``
column counts barrier rounds or elapsed time units, or whether peers were ever absent.
:class:`FigureContext` carries these three facts; it is read from a resolved scenario
mapping (a result folder's ``scenario.yaml``, a sweep's ``runs.parquet`` columns) and
decides which panels a figure has (:func:`panels`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class FigureContext:
    """The facts of one run (or one family of runs) that shape its figure.

    Attributes
    ----------
    clock
        ``"rounds"`` or ``"network"``.
    continuous
        The protocol runs in continuous time (a ``ContinuousProtocol``): its
        metrics' ``round`` column counts elapsed time units, not barrier rounds.
    churn
        Peers can be absent (a churn model other than ``none``): ``var_alive`` differs
        from ``var`` and is drawn too.
    """

    clock: str = "rounds"
    continuous: bool = False
    churn: bool = False

    @classmethod
    def from_values(cls, clock: Any, protocol: Any, churn_model: Any) -> FigureContext:
        """From the scenario's ``clock``, ``protocol.name`` and ``churn.model`` values."""
        return cls(
            clock="network" if clock == "network" else "rounds",
            continuous=is_continuous(protocol),
            churn=churn_model not in (None, "none"),
        )

    @classmethod
    def from_scenario(cls, scenario: Mapping[str, Any]) -> FigureContext:
        """From a resolved scenario mapping (as in a result folder's ``scenario.yaml``)."""
        protocol = scenario.get("protocol") or {}
        churn = scenario.get("churn") or {}
        return cls.from_values(
            scenario.get("clock"),
            protocol.get("name") if isinstance(protocol, Mapping) else None,
            churn.get("model") if isinstance(churn, Mapping) else None,
        )

    @classmethod
    def from_folder(cls, folder: Path) -> FigureContext:
        """From ``folder/scenario.yaml``; the default (rounds, barrier, no churn) when the
        file is missing or unreadable."""
        try:
            scenario = yaml.safe_load((folder / "scenario.yaml").read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            return cls()
        return cls.from_scenario(scenario) if isinstance(scenario, Mapping) else cls()


def is_continuous(protocol_name: Any) -> bool:
    """True when the registered protocol runs in continuous time (a
    :class:`~protocols.base.ContinuousProtocol`)."""
    import protocols  # the registry imports every protocol: only when asked

    cls = protocols.REGISTRY.get(protocol_name) if isinstance(protocol_name, str) else None
    return cls is not None and issubclass(cls, protocols.ContinuousProtocol)


@dataclass(frozen=True)
class Panel:
    """One x axis of a convergence figure: the metrics column, its label, and which
    runs it shows (``shows(context)``)."""

    x: str
    label: str
    shows: Callable[[FigureContext], bool]


def _on_steps(context: FigureContext) -> bool:
    """Rounds clock: every run (1 round = 1 time unit); network clock: barrier rounds."""
    return context.clock == "rounds" or not context.continuous


def _on_network(context: FigureContext) -> bool:
    return context.clock == "network"


def _always(context: FigureContext) -> bool:
    return True


def panels(contexts: Sequence[FigureContext]) -> list[Panel]:
    """The panels of a figure over runs with these contexts, left to right.

    * rounds (``round``): runs on the rounds clock, and barrier-round protocols on the
      network clock; labelled "simulated time (time units)" when every run shown is a
      continuous-time protocol (their ``round`` counts time units);
    * simulated time in seconds (``time_s``): runs on the network clock only (on the
      rounds clock it equals the round and would repeat the first panel);
    * bytes sent (``bytes_sent``): every run.
    """
    contexts = list(contexts) or [FigureContext()]
    result = []
    stepped = [c for c in contexts if _on_steps(c)]
    if stepped:
        result.append(Panel("round", _steps_label(stepped), _on_steps))
    if any(_on_network(c) for c in contexts):
        result.append(Panel("time_s", "simulated time (s)", _on_network))
    result.append(Panel("bytes_sent", "bytes sent (cumulative, all peers)", _always))
    return result


def why_left_out(panel: Panel, context: FigureContext) -> str:
    """Why ``panel`` does not show a run with this context, in the words of its note.

    The seconds panel leaves out runs on the rounds clock (they have no simulated
    seconds); the rounds panel leaves out continuous-time protocols on the network
    clock (they have no rounds).
    """
    if panel.x == "time_s" and not _on_network(context):
        return "rounds clock, no simulated seconds"
    if panel.x == "round" and context.continuous:
        return "continuous time, no rounds"
    return "not drawn on this axis"


def _steps_label(contexts: Sequence[FigureContext]) -> str:
    if all(c.continuous for c in contexts):
        return "simulated time (time units)"
    if any(c.continuous for c in contexts):
        return "rounds (continuous-time protocols: time units)"
    return "rounds"
