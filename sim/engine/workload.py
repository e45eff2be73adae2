"""How long a network-clock run may take: its flows, counted before it starts.

Barrier-round protocols send :attr:`~protocols.footprint.Footprint.flows_per_round`
flows a round, for at most ``stop.max_rounds`` rounds, or ``stop.max_time`` over the
shortest round: a peer's bytes of a round at the slowest typical bandwidth, plus two
latencies and the straggler delay. Continuous-time protocols start
:attr:`~protocols.footprint.Footprint.flows_per_s` flows a second for at most
``stop.max_time`` (or ``stop.max_rounds``) seconds. Under ``schedule: async`` a group
protocol's peers each send their share of ``flows_per_round`` a step, at most one step
per ``compute`` + matchmaking (a DHT latency and a request's round trip) + the shortest
round, for ``stop.max_time`` (or ``stop.max_rounds``) seconds; a collective's attempts
wait for the slowest class's ``compute``. Each flow costs about
:data:`FLOW_COST_S` of wall time, :data:`CONTINUOUS_FLOW_COST_S` in continuous time
(``python -m bench events`` measures both). A run may stop much earlier, at
``stop.target_var`` when the scenario sets one: the counts are upper bounds.
"""

from __future__ import annotations

import math
from typing import Any

from sim.core import units
from sim.model.scenario.models import Scenario

#: Wall seconds per flow on the network clock, barrier rounds: ``python -m bench
#: events`` measured 9 µs (ring all-reduce's chains) to 26 µs (moshpit, sgp) per flow on
#: one core, dim 64; busier machines and larger vectors cost more, so the estimate
#: rounds up.
FLOW_COST_S = 30e-6
#: The same in continuous time, where each flow also carries its exchange's snapshot,
#: its lazy updates and the exact-target tracker's update: 15 µs (pairwise gossip) to
#: 61 µs (A²CiD²) per flow.
CONTINUOUS_FLOW_COST_S = 60e-6
#: A run expected to last this long (wall seconds) gets a warning.
SLOW_RUN_S = 3600.0


class SlowRunWarning(UserWarning):
    """A run is expected to take hours of wall time."""


def estimate_events(scenario: Scenario) -> tuple[float, float, str]:
    """(flows, wall seconds, the keys that drive them) of a network-clock run, at most;
    (0, 0, "") on the rounds clock."""
    if scenario.clock != "network":
        return 0.0, 0.0, ""
    from sim.engine.resources import footprint, peer_count

    fp = footprint(scenario)
    n, stop = peer_count(scenario), scenario.stop
    if fp.flows_per_s > 0:
        seconds, key = min((_or_inf(stop.max_time), "stop.max_time"),
                           (_or_inf(stop.max_rounds), "stop.max_rounds"))  # fmt: skip
        events = fp.flows_per_s * seconds
        rate = getattr(scenario.protocol, "rate", 1.0)
        drivers = f"peers.count {n} × protocol.rate {rate:g}/s × {seconds:g} s of {key}"
        return events, events * CONTINUOUS_FLOW_COST_S, drivers
    if scenario.schedule == "async":
        steps, each, bound = _async_steps(scenario, fp)
        events = fp.flows_per_round * steps
        drivers = f"peers.count {n}: {fp.flows_per_round:.3g} flows {each} × {steps:.3g} {bound}"
        return events, events * FLOW_COST_S, drivers
    rounds, bound = _rounds_bound(scenario, fp)
    events = fp.flows_per_round * rounds
    drivers = f"peers.count {n}: {fp.flows_per_round:.3g} flows a round × {rounds:.3g} {bound}"
    return events, events * FLOW_COST_S, drivers


def _rounds_bound(scenario: Scenario, fp: Any) -> tuple[float, str]:
    """The most barrier rounds a run can make, and what bounds them."""
    stop = scenario.stop
    rounds, bound = _or_inf(stop.max_rounds), "rounds (stop.max_rounds)"
    if stop.max_time is not None:
        round_s = shortest_round_s(scenario, fp.round_bytes_per_peer)
        quotient = stop.max_time / round_s if round_s > 0 else math.inf
        by_time = math.ceil(quotient) if math.isfinite(quotient) else math.inf
        if by_time < rounds:  # rounds that start before max_time
            rounds = by_time
            bound = f"rounds of ≥ {units.format_duration(round_s)} in stop.max_time"
    return rounds, bound


def _async_steps(scenario: Scenario, fp: Any) -> tuple[float, str, str]:
    """The most steps a peer of an async run makes on average (a collective's attempts),
    what one counts as (``flows_per_round`` of every peer's step or of one attempt) and
    what bounds them.

    A group protocol's peer of class c steps at most once per typical ``compute`` of c
    + matchmaking (the DHT latency, then a join request and its reply) + the shortest
    round; a collective's attempt waits for the slowest class's ``compute`` and needs no
    matchmaking. Peers step on for ``stop.max_time`` or ``stop.max_rounds`` (seconds
    under async), whichever is smaller.
    """
    import protocols

    stop, peers = scenario.stop, scenario.peers
    seconds, key = min((_or_inf(stop.max_time), "stop.max_time"),
                       (_or_inf(stop.max_rounds), "stop.max_rounds"))  # fmt: skip
    classes = [(c.fraction, c.compute or peers.compute) for c in peers.classes or []]
    computes = [(f, typical(compute)) for f, compute in classes or [(1.0, peers.compute)]]
    round_s = shortest_round_s(scenario, fp.round_bytes_per_peer)
    in_time = f"in {seconds:g} s of {key}"
    if getattr(protocols.get(scenario.protocol.name), "collective", False):
        step_s = max(c for _, c in computes) + round_s
        what = f"attempts of ≥ {units.format_duration(step_s)} (slowest peers.compute + round)"
        return _per(step_s) * seconds, "an attempt", f"{what} {in_time}"
    latency = typical(peers.latency)
    dht = getattr(scenario.protocol, "matchmaking_latency", None)
    extra_s = (2 * latency if dht is None else float(dht)) + 2 * latency + round_s
    rate = sum(f * _per(c + extra_s) for f, c in computes)
    what = f"steps a peer (peers.compute + ≥ {units.format_duration(extra_s)} of matchmaking "
    return rate * seconds, "a step of every peer", f"{what}and all-reduce) {in_time}"


def _per(duration_s: float) -> float:
    """How many ``duration_s`` fit in a second (``inf`` for none)."""
    return 1 / duration_s if duration_s > 0 else math.inf


def shortest_round_s(scenario: Scenario, nbytes_per_peer: float) -> float:
    """A barrier round's typical least duration: ``nbytes_per_peer`` at the slowest
    class's typical bandwidth, two route latencies and the straggler delay."""
    peers = scenario.peers
    levels: list[Any] = [peers, *(peers.classes or [])]
    bandwidth = min(
        min(typical(level.upload), typical(level.download))
        for level in levels
        if level.upload is not None or level.download is not None
    )
    latency = typical(peers.latency)
    transfer = nbytes_per_peer / bandwidth if bandwidth > 0 else math.inf
    return transfer + 4 * latency + typical(peers.delay)


def typical(value: Any) -> float:
    """A per-peer value's typical size: the constant, the median (lognormal), the middle
    (uniform) or the median of the choices; ``inf`` for a missing class override."""
    if value is None:
        return math.inf
    kind, params = value.kind, dict(value.params)
    if kind == "const":
        return float(params["value"])
    if kind == "lognormal":
        return float(params["median"])
    if kind == "uniform":
        return (float(params["low"]) + float(params["high"])) / 2
    values = sorted(float(v) for v in params["values"])
    return values[len(values) // 2]


def slow_run_message(scenario: Scenario) -> str | None:
    """The one-line warning for a run expected to take hours, or None.

    It names only the keys that bound the run: ``stop.target_var`` (``stop.target_loss``)
    appears only when the scenario sets that target, as the way the run may end earlier.
    """
    events, seconds, drivers = estimate_events(scenario)
    if seconds < SLOW_RUN_S:
        return None
    stops = [
        key
        for key, value in (
            ("stop.target_var", scenario.stop.target_var),
            ("stop.target_loss", scenario.stop.target_loss),
        )
        if value
    ]
    target = " or ".join(stops)
    if math.isinf(events):
        ends = f"only {target} can end it" if target else "nothing ends it"
        steps, causes = (
            ("steps", "no latency, no delay, no peers.compute")
            if scenario.schedule == "async"
            else ("rounds", "no latency, no delay")
        )
        return (
            f"this run may never end: its {steps} take no simulated time (unlimited "
            f"bandwidth, {causes}), so stop.max_time is never reached and {ends}; "
            "set stop.max_rounds"
        )
    earlier = f"; it ends earlier once {target} is reached" if target else ""
    return (
        f"this run may take up to {units.format_duration(seconds)} of wall time: "
        f"{events:.3g} network flows at ~{seconds / events * 1e6:.0f} µs each ({drivers})"
        f"{earlier}"
    )


def _or_inf(value: float | None) -> float:
    return math.inf if value is None else float(value)
