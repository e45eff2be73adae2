"""A stream of pieces on one connection is one fluid flow (issue 13, part 5).

A chain of pieces sent back to back on one connection (each piece ``after`` the previous
one, ``streamed``: no route latency after the first, :class:`protocols.contract.Flows`)
has exactly one piece in its bandwidth phase at any instant, on the same resources with
the same weight, so max-min gives it the rate a single flow of all its bytes would get,
whatever else starts or ends on those resources. Piece k therefore ends when a single
flow of the first k pieces' bytes, sent in its place, would end (the flow's rate does
not depend on its size, so the two see the same rates until then). This is the exact
equivalence that lets the network clock run a stream as one flow with milestones at the
piece boundaries instead of one flow per piece (design in the wire-bytes note and
``docs/design.md``); the tests here pin it on the piece-by-piece model, and check the
network's stream (:meth:`~sim.network.FlowNetwork.resume`) against it.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.network import FlowNetwork, compiled

PATHS = ["general", "compiled"] if compiled.available() else ["general"]
CAPACITY = st.sampled_from([1.0, 2.0, 3.0, 7.5, 10.0, 100.0])


@st.composite
def workloads(draw: st.DrawFn) -> dict:
    """Hosts, a stream 0 → 1 of pieces, and other flows (random ends, sizes, starts)
    that share its upload, its download, or neither."""
    n = draw(st.integers(2, 5))
    pieces = draw(st.lists(st.floats(0.0, 50.0).map(lambda b: round(b, 3)), min_size=1, max_size=8))
    others = draw(
        st.lists(
            st.tuples(
                st.integers(0, n - 1),
                st.integers(0, n - 1),
                st.floats(0.5, 80.0),
                st.floats(0.0, 30.0),
            ).filter(lambda f: f[0] != f[1]),
            max_size=6,
        )
    )
    return {
        "up": draw(st.lists(CAPACITY, min_size=n, max_size=n)),
        "down": draw(st.lists(CAPACITY, min_size=n, max_size=n)),
        "latency": draw(st.lists(st.floats(0.001, 0.5), min_size=n, max_size=n)),
        "sharing": draw(st.sampled_from(["maxmin", "rtt_weighted"])),
        "start": draw(st.floats(0.0, 5.0)),
        "pieces": pieces,
        "others": others,
    }


def stream_ends(
    work: dict, pieces: list[float], resume: bool = False, solver: str = "general"
) -> list[float]:
    """End times of the pieces of a stream 0 → 1 sent back to back (only the first pays
    the route latency), among the workload's other flows: a flow per piece, or with
    ``resume`` one flow that each next piece resumes (:meth:`FlowNetwork.resume`)."""
    env = simpy.Environment()
    net = FlowNetwork(
        env, np.array(work["up"]), np.array(work["down"]), np.array(work["latency"]),
        sharing=work["sharing"], solver=solver,
    )  # fmt: skip
    ends: list[float] = []

    def stream():
        yield env.timeout(work["start"])
        flow = None
        for k, nbytes in enumerate(pieces):
            keep = resume and k + 1 < len(pieces)
            if flow is not None and flow.parked:
                flow = net.resume(flow, nbytes, keep)
            else:
                flow = net.send(0, 1, nbytes, latency=k == 0, keep=keep)
            yield flow.done
            ends.append(float(env.now))

    def other(src: int, dst: int, nbytes: float, at: float):
        yield env.timeout(at)
        yield net.send(src, dst, nbytes).done

    env.process(stream())
    for flow in work["others"]:
        env.process(other(*flow))
    env.run()
    return ends


@settings(max_examples=150, deadline=None)
@given(workloads())
def test_each_piece_ends_when_one_flow_of_the_bytes_so_far_would(work):
    ends = stream_ends(work, work["pieces"])
    sofar = np.cumsum(work["pieces"]).tolist()
    for k, nbytes in enumerate(sofar):
        (single,) = stream_ends(work, [nbytes])
        assert ends[k] == pytest.approx(single, rel=1e-9, abs=1e-12), k


@settings(max_examples=150, deadline=None)
@given(workloads(), st.sampled_from(PATHS))
def test_resuming_one_flow_ends_each_piece_as_a_flow_per_piece(work, solver):
    """The network clock's streams: one flow that each next piece resumes, never leaving
    the bandwidth phase, ends every piece when a flow per piece would."""
    pieces = work["pieces"]
    ends = stream_ends(work, pieces, resume=True, solver=solver)
    expected = stream_ends(work, pieces, solver=solver)
    np.testing.assert_allclose(ends, expected, rtol=1e-9, atol=1e-12)


def test_a_stream_alone_ends_its_pieces_at_the_closed_form():
    """Nothing else on the way: piece k ends at start + route latency + bytes so far / B."""
    work = {
        "up": [4.0, 9.0], "down": [9.0, 3.0], "latency": [0.01, 0.02], "sharing": "maxmin",
        "start": 1.0, "pieces": [5.0, 7.0, 0.0, 2.5, 6.0], "others": [],
    }  # fmt: skip
    ends = stream_ends(work, work["pieces"])
    expected = 1.0 + 0.03 + np.cumsum(work["pieces"]) / 3.0
    np.testing.assert_allclose(ends, expected, rtol=1e-12)
