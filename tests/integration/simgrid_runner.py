"""Completion times of transfers through SimGrid's flow model (run by the system python3).

Debian's ``python3-simgrid`` installs for ``/usr/bin/python3``, not for the project's
virtualenv, so the cross-check and the N1 benchmark run this script in a subprocess.
It uses only the standard library and SimGrid.

Input (JSON on stdin)::

    {"hosts": [[upload_bytes_per_s, download_bytes_per_s], ...],
     "latency": route_latency_s,
     "transfers": [[src, dst, nbytes, start_s], ...]}

Output (JSON on stdout)::

    {"finish": [completion_time_s, ...], "seconds": wall_s, "cpu_seconds": cpu_s,
     "version": "3.32.0"}

``seconds`` (wall clock) and ``cpu_seconds`` (CPU time of the process, all threads) cover
building the platform and running the simulation (not the interpreter start nor the
JSON). SimGrid is configured as validation.md asks: CM02 without its TCP
corrections (``network/TCP-gamma:0``, ``network/crosstraffic:0``), full (non-lazy)
updates, tight precisions. Each host has an upload and a download link (a split-duplex
NIC) in a star zone, each with half the route latency, so every route has the same
latency and CM02's 1/latency weights are all equal: plain max-min sharing.

Usage: ``python3 simgrid_runner.py [--optim Full|Lazy] < in.json > out.json``.
"""

from __future__ import annotations

import json
import sys
import time

import simgrid as sg


def build(hosts: list[list[float]], latency_s: float) -> list[sg.Host]:
    """Star zone of hosts, each with its own up and down link of half the route latency."""
    zone = sg.NetZone.create_star_zone("star")
    result = []
    for i, (up, down) in enumerate(hosts):
        host = zone.create_host(f"h{i}", 1e9).seal()
        link_up = zone.create_link(f"up{i}", float(up)).set_latency(latency_s / 2).seal()
        link_down = zone.create_link(f"down{i}", float(down)).set_latency(latency_s / 2).seal()
        zone.add_route(host.netpoint, None, None, None, [sg.LinkInRoute(link_up)], False)
        zone.add_route(None, host.netpoint, None, None, [sg.LinkInRoute(link_down)], False)
        result.append(host)
    zone.seal()
    return result


def main() -> None:
    """Read the problem on stdin, simulate it, write the completion times on stdout."""
    optim = sys.argv[sys.argv.index("--optim") + 1] if "--optim" in sys.argv else "Full"
    problem = json.load(sys.stdin)
    transfers = problem["transfers"]
    engine = sg.Engine(
        [
            "simgrid_runner",
            "--cfg=network/model:CM02",
            "--cfg=network/TCP-gamma:0",
            "--cfg=network/crosstraffic:0",
            f"--cfg=network/optim:{optim}",
            "--cfg=maxmin/precision:1e-12",
            "--cfg=surf/precision:1e-12",
            "--log=root.thres:critical",
        ]
    )
    started, started_cpu = time.perf_counter(), time.process_time()
    hosts = build(problem["hosts"], float(problem["latency"]))
    finish = [0.0] * len(transfers)
    order = sorted(range(len(transfers)), key=lambda k: (transfers[k][3], k))

    def driver() -> None:
        comms = [None] * len(transfers)
        for k in order:
            src, dst, nbytes, start_s = transfers[k]
            sg.this_actor.sleep_until(start_s)
            comms[k] = sg.Comm.sendto_async(hosts[src], hosts[dst], int(nbytes))
        sg.Comm.wait_all(comms)
        for k, comm in enumerate(comms):
            finish[k] = comm.finish_time

    sg.Actor.create("driver", hosts[0], driver)
    engine.run()
    answer = {
        "finish": finish,
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - started_cpu,
        "version": sg.simgrid_version,
    }
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
