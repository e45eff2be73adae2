"""Moshpit rounds with hivemind's real averager (run by ``.venv-hivemind/bin/python``).

hivemind (pinned to 1.1.12, whose manylinux wheel bundles a Linux x86-64 p2pd daemon;
its sdist would fetch one at build time) and torch live in their own virtualenv,
``.venv-hivemind``, not the project's, so the Moshpit cross-check runs this script in a
subprocess. It uses only the standard library, torch and hivemind.

Every peer gets its own DHT node (a p2pd daemon on 127.0.0.1) and a
``DecentralizedAverager`` with ``target_group_size`` and ``initial_group_bits``: the
group key is ``prefix.0b<bits>``; when a group assembles, each member drops its oldest
bit and appends the bits of its "generalized index" (a permutation of its position in
the group's peer order, seeded by the group id). Each round, all peers call ``step``
at once and the script waits for every one of them before the next round.

Input (JSON on stdin)::

    {"vectors": [[float, ...], ...],       # one float32 vector per peer
     "group_bits": ["00", "01", ...],      # initial group bits of each peer
     "target_group_size": 2, "rounds": 3,
     "min_matchmaking_time": 5.0, "request_timeout": 3.0, "step_timeout": 120.0}

Output (JSON on stdout)::

    {"version": "1.1.12", "seconds": wall_s,
     "rounds": [{"bits_before": [...], "bits_after": [...],
                 "groups": [[peer, ...], ...],   # each peer's group, in hivemind's peer order
                 "vectors": [[float, ...], ...]}, ...]}

Usage: ``.venv-hivemind/bin/python hivemind_runner.py < in.json > out.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    """Read the problem on stdin, run the averagers, write the rounds on stdout."""
    problem = json.load(sys.stdin)
    # hivemind and p2pd may print: keep fd 1 for the answer only.
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    import hivemind
    import torch

    started = time.perf_counter()
    vectors, bits = problem["vectors"], problem["group_bits"]
    n_peers = len(vectors)
    host = ["/ip4/127.0.0.1/tcp/0"]
    dhts = [hivemind.DHT(start=True, host_maddrs=host)]
    first = [str(addr) for addr in dhts[0].get_visible_maddrs()]
    for _ in range(n_peers - 1):
        dhts.append(hivemind.DHT(start=True, host_maddrs=host, initial_peers=first))
    averagers = [
        hivemind.averaging.DecentralizedAverager(
            averaged_tensors=[torch.tensor(vectors[i], dtype=torch.float32)],
            dht=dht,
            prefix="crosscheck",
            target_group_size=int(problem["target_group_size"]),
            min_group_size=2,
            initial_group_bits=bits[i],
            min_matchmaking_time=float(problem.get("min_matchmaking_time", 5.0)),
            request_timeout=float(problem.get("request_timeout", 3.0)),
            allreduce_timeout=60.0,
            start=True,
        )
        for i, dht in enumerate(dhts)
    ]
    rounds = []
    try:
        for _ in range(int(problem["rounds"])):
            before = [averager.get_group_bits() for averager in averagers]
            controls = [
                averager.step(gather=i, wait=False, timeout=float(problem.get("step_timeout", 120)))
                for i, averager in enumerate(averagers)
            ]
            # gathered data: {peer_id: peer index}, in the group's peer order
            groups = [[int(v) for v in control.result().values()] for control in controls]
            after = [averager.get_group_bits() for averager in averagers]
            state = []
            for averager in averagers:
                with averager.get_tensors() as tensors:
                    state.append([float(v) for v in tensors[0].tolist()])
            rounds.append(
                {"bits_before": before, "bits_after": after, "groups": groups, "vectors": state}
            )
    finally:
        for averager in averagers:
            averager.shutdown()
        for dht in dhts:
            dht.shutdown()
    answer = {
        "version": hivemind.__version__,
        "seconds": time.perf_counter() - started,
        "rounds": rounds,
    }
    with os.fdopen(answer_fd, "w") as out:
        json.dump(answer, out)


if __name__ == "__main__":
    main()
