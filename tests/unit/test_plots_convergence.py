"""convergence.png: which panels a figure has, their x labels, and var_alive under churn.

Panels follow the run's facts (:class:`sim.output.plots.FigureContext`): the rounds clock has no
seconds panel (it would repeat the rounds), continuous-time protocols are labelled in
simulated time, and every figure has a bytes panel.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from matplotlib.figure import Figure

import sim
from sim.output.plots import FigureContext, convergence_figure, panels, scenario_figure

BASE: dict[str, Any] = {
    "name": "tiny",
    "peers": {"count": 8},
    "vector": {"dim": 4},
    "protocol": {"name": "random_groups", "group_size": 4},
    "stop": {"max_rounds": 6, "target_var": 1e-9},
}
NETWORK: dict[str, Any] = {
    "clock": "network",
    "stop": {"max_time": 3.0, "max_rounds": None, "target_var": 1e-9},
}


def figure_of(**overrides: Any) -> Figure:
    scenario = sim.scenario_from_mapping(BASE, overrides)
    result = sim.run(scenario)
    return scenario_figure(result.metrics, result.scenario)


def x_labels(figure: Figure) -> list[str]:
    return [ax.get_xlabel() for ax in figure.axes if ax.get_visible()]


def dashed_lines(figure: Figure) -> int:
    return sum(line.get_linestyle() == "--" for ax in figure.axes for line in ax.get_lines())


@pytest.mark.parametrize(
    ("name", "continuous"),
    [("a2cid2", True), ("pairwise_gossip", True), ("push_sum", True), ("moshpit", False),
     ("gossip", False), ("all_reduce", False)],
)  # fmt: skip
def test_continuous_protocols_are_told_by_the_registry(name, continuous):
    context = FigureContext.from_scenario({"protocol": {"name": name}})
    assert context.continuous is continuous


def test_rounds_clock_has_rounds_and_bytes_but_no_seconds_panel():
    assert x_labels(figure_of()) == ["rounds", "bytes sent (cumulative, all peers)"]


def test_continuous_protocol_on_the_rounds_clock_is_labelled_in_time_units():
    figure = figure_of(protocol={"name": "a2cid2", "topology": "ring"})
    assert x_labels(figure)[0] == "simulated time (time units)"
    assert "rounds" not in x_labels(figure)


def test_network_clock_barrier_rounds_have_rounds_seconds_and_bytes():
    labels = x_labels(figure_of(**NETWORK))
    assert labels[:2] == ["rounds", "simulated time (s)"]
    assert labels[2].startswith("bytes sent")


def test_continuous_protocol_on_the_network_clock_has_no_rounds_panel():
    figure = figure_of(**NETWORK, protocol={"name": "pairwise_gossip", "topology": "ring"})
    labels = x_labels(figure)
    assert labels[0] == "simulated time (s)"
    assert len(labels) == 2


def test_var_alive_is_drawn_dashed_only_under_churn():
    assert dashed_lines(figure_of()) == 0
    churned = figure_of(churn={"model": "bernoulli", "p": 0.3})
    assert dashed_lines(churned) > 0
    legend = [t.get_text() for t in churned.legends[0].get_texts()]
    assert "var_alive (present peers)" in legend


def test_a_comparison_names_the_runs_a_rounds_panel_leaves_out():
    moshpit = FigureContext("network", continuous=False)
    a2cid2 = FigureContext("network", continuous=True)
    assert [p.x for p in panels([moshpit, a2cid2])] == ["round", "time_s", "bytes_sent"]
    a = sim.run(sim.scenario_from_mapping(BASE, NETWORK))
    b_scenario = sim.scenario_from_mapping(
        BASE, {**NETWORK, "protocol": {"name": "a2cid2", "topology": "ring"}}
    )
    b = sim.run(b_scenario)
    figure = convergence_figure([a.metrics, b.metrics], ["groups", "acid"],
                                contexts=[moshpit, a2cid2])  # fmt: skip
    rounds_axes = figure.axes[0]
    notes = [t.get_text() for t in rounds_axes.texts]
    assert any("acid" in note for note in notes)
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend[:2] == ["groups", "acid"]


def test_many_seeds_draw_a_median_band_with_its_legend_entry():
    scenario = sim.scenario_from_mapping(BASE)
    frames = [sim.run(scenario, seed=seed).metrics for seed in range(6)]
    figure = convergence_figure([pd.concat(frames)], ["six"])
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert any(text.startswith("median, 10–90 % band") for text in legend)
    assert figure.axes[0].collections, "the band is a filled area"
