"""An asynchronous Moshpit swarm of real hivemind averagers (run by ``.venv-hivemind/bin/python``).

Like ``hivemind_runner.py`` (the barrier cross-check), this script uses only the
standard library, torch and hivemind 1.1.12, and runs in a subprocess from the project's
tests. Every peer gets its own DHT node (a p2pd daemon on 127.0.0.1) and a
``DecentralizedAverager`` with ``target_group_size``, ``min_group_size``,
``initial_group_bits``, ``min_matchmaking_time``, ``request_timeout`` and
``allreduce_timeout`` as given. Unlike the barrier runner, nothing synchronises the
peers: each one runs its own loop in a thread, back to back, until ``duration_s``:

1. sleep its own ``compute_s[i]`` (the local work: the next ``step`` is called
   ``compute_s[i]`` after the previous one returned, bookkeeping included);
2. ``step(gather=i, timeout=averaging_timeout)``: declare under its current key, match,
   run the butterfly all-reduce with its group, take its new key bits. A step that finds
   no group by its deadline raises; it is recorded as failed and the loop goes on.

Per step the script records the peer, the wall times (seconds since the loops started)
when ``step`` was called and when it returned, success, the group (peer indices, from
the gathered data, so its size), the key bits before and after, the peer's vector after
the step, and ``allreduce_s``: when the step's stage (``StepControl.stage``, shared
memory, polled every 10 ms) turned to the all-reduce. A sampler thread reads every
peer's vector every ``sample_every_s`` (for the variance curve) with the 1-minute load
average.

Probes (the DHT's cost, for ``matchmaking_latency``), with the averagers up and idle,
before the loops start: ``probe_ops`` ``dht.store`` calls (a subkey under a group-style
key, as ``GroupKeyManager.declare_averager`` stores) and as many ``dht.get(latest=True)``
calls (as ``get_averagers`` looks up), round robin over the peers' DHT nodes, and
``probe_ops`` RPC pings between DHT nodes (one RPC round trip on loopback). During the
loops a prober thread times one store, one get and one ping per
``in_run_probe_every_s``: the delays under the swarm's own load.

Input (JSON, ``--problem FILE`` or stdin)::

    {"vectors": [[float, ...], ...],      # one float32 vector per peer
     "compute_s": [float, ...],           # each peer's local work per step
     "group_bits": ["00", ...],           # initial group bits of each peer
     "target_group_size": 4, "min_group_size": 2,
     "min_matchmaking_time": 2.0, "request_timeout": 1.0,
     "averaging_timeout": 6.0, "allreduce_timeout": 6.0,
     "duration_s": 60.0, "sample_every_s": 0.25,
     "probe_ops": 200, "in_run_probe_every_s": 1.0}

Output (JSON, ``--out FILE`` or stdout): ``version``, ``problem`` (the input), ``host``
(cpu count, load averages before the set-up, before and after the loops, the mean
1-minute load over the samples), ``setup_s``,
``probe`` and ``in_run_probe`` (every timing, medians; ``matchmaking_latency_s`` is the
median over the stores and gets together), ``steps`` (one record per step), ``samples``
(``t_s``, ``var``, ``load1``, ``vectors``), ``summary`` (steps completed by
``duration_s`` per peer, failed steps, group-size histogram and mean).

Usage: ``.venv-hivemind/bin/python hivemind_async_runner.py --problem in.json --out out.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import threading
import time
from typing import Any

PREFIX = "asynccheck"


def variance(vectors: list[list[float]]) -> float:
    """avsim's ``var``: the mean over peers and coordinates of (x − mean over peers)²."""
    n, dim = len(vectors), len(vectors[0])
    total = 0.0
    for k in range(dim):
        column = [v[k] for v in vectors]
        mean = sum(column) / n
        total += sum((c - mean) ** 2 for c in column)
    return total / (n * dim)


def median_or_none(values: list[float]) -> float | None:
    """The median of ``values``, or None when there are none."""
    return statistics.median(values) if values else None


async def _ping(_dht: Any, node: Any, peer_ids: list[Any], rounds: int) -> list[float]:
    """Inside a DHT process: the wall time of ``rounds`` RPC pings, round robin."""
    times = []
    for k in range(rounds):
        started = time.perf_counter()
        await node.protocol.call_ping(peer_ids[k % len(peer_ids)])
        times.append(time.perf_counter() - started)
    return times


def probe_dht(dhts: list[Any], ops: int, get_dht_time: Any) -> dict[str, Any]:
    """Time ``ops`` stores and ``ops`` gets, as matchmaking does them, and ``ops`` pings."""
    store_s, get_s = [], []
    key = f"{PREFIX}_probe.0b00"
    for k in range(ops):
        dht = dhts[k % len(dhts)]
        started = time.perf_counter()
        dht.store(
            key, subkey=dht.peer_id.to_bytes(), value=True, expiration_time=get_dht_time() + 30
        )
        store_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        dhts[(k + 1) % len(dhts)].get(key, latest=True)
        get_s.append(time.perf_counter() - started)
    others = [dht.peer_id for dht in dhts[1:]]
    ping = functools.partial(_ping, peer_ids=others, rounds=ops)
    ping_s = dhts[0].run_coroutine(ping) if others else []
    return summarise_probe(store_s, get_s, ping_s)


def summarise_probe(store_s: list[float], get_s: list[float], ping_s: list[float]) -> dict:
    """Timings and their medians; the DHT delay is the median of stores and gets together."""
    return {
        "store_s": store_s,
        "get_s": get_s,
        "ping_s": ping_s,
        "store_median_s": median_or_none(store_s),
        "get_median_s": median_or_none(get_s),
        "ping_median_s": median_or_none(ping_s),
        "matchmaking_latency_s": median_or_none(store_s + get_s),
    }


class Swarm:
    """The peers' loops, the sampler and the prober, sharing the start time and a stop flag."""

    def __init__(self, problem: dict[str, Any], averagers: list[Any], dhts: list[Any]) -> None:
        self.problem, self.averagers, self.dhts = problem, averagers, dhts
        self.duration = float(problem["duration_s"])
        self.steps: list[dict[str, Any]] = []
        self.samples: list[dict[str, Any]] = []
        self.in_run: dict[str, list[float]] = {"store_s": [], "get_s": [], "ping_s": []}
        self.active: dict[int, tuple[Any, dict[str, Any]]] = {}  # peer: (control, record)
        self.lock = threading.Lock()
        self.started = 0.0
        self.stopped = threading.Event()

    def now(self) -> float:
        return time.perf_counter() - self.started

    def vector(self, peer: int) -> list[float]:
        with self.averagers[peer].get_tensors() as tensors:
            return [float(v) for v in tensors[0].tolist()]

    def loop(self, peer: int) -> None:
        """One peer: compute, step, again, until ``duration_s``.

        The bookkeeping between two steps (reading the new key and vector) is part of
        the compute time: the next step starts ``compute_s`` after the previous returned.
        """
        averager, compute = self.averagers[peer], float(self.problem["compute_s"][peer])
        timeout = float(self.problem["averaging_timeout"])
        key, index, ready = self.problem["group_bits"][peer], 0, compute
        while True:
            time.sleep(max(0.0, ready - self.now()))
            if self.now() >= self.duration:
                break
            record: dict[str, Any] = {"peer": peer, "index": index, "key": key}
            record["start_s"] = self.now()
            control = averager.step(gather=peer, timeout=timeout, wait=False)
            with self.lock:
                self.active[peer] = (control, record)
            try:
                group = [int(v) for v in control.result().values()]
                record.update(ok=True, group=group, group_size=len(group), error=None)
            except Exception as error:  # a failed step: hivemind raises at the deadline
                record.update(ok=False, group=None, group_size=None, error=repr(error)[:300])
            record["end_s"] = self.now()
            ready = record["end_s"] + compute
            with self.lock:
                self.active.pop(peer, None)
            key = record["key_after"] = averager.get_group_bits()
            record["vector"] = self.vector(peer)
            with self.lock:
                self.steps.append(record)
            index += 1

    def watch_stages(self) -> None:
        """Every 10 ms: when each running step enters hivemind's all-reduce stage."""
        running = 3  # hivemind.averaging.control.AveragingStage.RUNNING_ALLREDUCE
        while not self.stopped.wait(0.01):
            now = self.now()
            with self.lock:
                active = list(self.active.values())
            for control, record in active:
                inside = control.stage.value == running
                if inside and not record.get("_in_allreduce"):
                    record.setdefault("allreduce_s", []).append(now)
                record["_in_allreduce"] = inside

    def sampler(self) -> None:
        """Every ``sample_every_s``: every peer's vector (it waits for running all-reduces)."""
        every, k = float(self.problem["sample_every_s"]), 0
        while not self.stopped.is_set():
            now = self.now()
            vectors = [self.vector(p) for p in range(len(self.averagers))]
            sample = {"t_s": now, "var": variance(vectors), "load1": os.getloadavg()[0]}
            self.samples.append({**sample, "vectors": vectors})
            k += 1
            self.stopped.wait(max(0.0, k * every - self.now()))

    def prober(self, get_dht_time: Any) -> None:
        """Every ``in_run_probe_every_s``: one store, one get and one ping, timed."""
        every = float(self.problem.get("in_run_probe_every_s", 1.0))
        key, k = f"{PREFIX}_probe.0b01", 0
        while every > 0 and not self.stopped.wait(every) and self.now() < self.duration:
            dht, other = self.dhts[k % len(self.dhts)], self.dhts[(k + 1) % len(self.dhts)]
            started = time.perf_counter()
            dht.store(
                key, subkey=dht.peer_id.to_bytes(), value=True, expiration_time=get_dht_time() + 30
            )
            self.in_run["store_s"].append(time.perf_counter() - started)
            started = time.perf_counter()
            other.get(key, latest=True)
            self.in_run["get_s"].append(time.perf_counter() - started)
            if other is not dht:
                ping = functools.partial(_ping, peer_ids=[other.peer_id], rounds=1)
                self.in_run["ping_s"].extend(dht.run_coroutine(ping))
            k += 1

    def run(self, get_dht_time: Any) -> None:
        threads = [
            threading.Thread(target=self.loop, args=(p,), daemon=True)
            for p in range(len(self.averagers))
        ]
        helpers = [
            threading.Thread(target=self.sampler, daemon=True),
            threading.Thread(target=self.watch_stages, daemon=True),
            threading.Thread(target=self.prober, args=(get_dht_time,), daemon=True),
        ]
        self.started = time.perf_counter()
        for thread in helpers + threads:
            thread.start()
        grace = float(self.problem["averaging_timeout"]) + float(self.problem["allreduce_timeout"])
        for thread in threads:
            thread.join(timeout=max(1.0, self.duration + grace + 30 - self.now()))
        self.stopped.set()
        for thread in helpers:
            thread.join()
        for record in self.steps:
            record.pop("_in_allreduce", None)


def summarise_steps(steps: list[dict[str, Any]], n_peers: int, duration: float) -> dict:
    """Per-peer steps completed by ``duration`` (successful and failed), group sizes."""
    done = [s for s in steps if s["end_s"] <= duration]
    completed, failed = [0] * n_peers, [0] * n_peers
    sizes: dict[str, int] = {}
    for step in done:
        if step["ok"]:
            completed[step["peer"]] += 1
            sizes[str(step["group_size"])] = sizes.get(str(step["group_size"]), 0) + 1
        else:
            failed[step["peer"]] += 1
    # a group of g appears in g step records: count each member's view (avsim's
    # group_size_mean weighs groups, so weigh each record by 1/g as well)
    groups = sum(count / int(size) for size, count in sizes.items())
    members = sum(count for count in sizes.values())
    return {
        "steps_per_peer": completed,
        "failed_per_peer": failed,
        "member_steps_by_group_size": sizes,
        "groups": groups,
        "group_size_mean": members / groups if groups else None,
        "member_weighted_group_size_mean": (
            sum(int(s) * c for s, c in sizes.items()) / members if members else None
        ),
    }


def start_swarm(problem: dict[str, Any], hivemind: Any, torch: Any) -> tuple[list, list]:
    """One DHT node and one averager per peer, all on 127.0.0.1."""
    host = ["/ip4/127.0.0.1/tcp/0"]
    n_peers = len(problem["vectors"])
    dhts = [hivemind.DHT(start=True, host_maddrs=host)]
    first = [str(addr) for addr in dhts[0].get_visible_maddrs()]
    for _ in range(n_peers - 1):
        dhts.append(hivemind.DHT(start=True, host_maddrs=host, initial_peers=first))
    averagers = [
        hivemind.averaging.DecentralizedAverager(
            averaged_tensors=[torch.tensor(problem["vectors"][i], dtype=torch.float32)],
            dht=dht,
            prefix=PREFIX,
            target_group_size=int(problem["target_group_size"]),
            min_group_size=int(problem["min_group_size"]),
            initial_group_bits=problem["group_bits"][i],
            min_matchmaking_time=float(problem["min_matchmaking_time"]),
            request_timeout=float(problem["request_timeout"]),
            allreduce_timeout=float(problem["allreduce_timeout"]),
            start=True,
        )
        for i, dht in enumerate(dhts)
    ]
    return dhts, averagers


def main() -> None:
    """Read the problem, run the swarm, write the records."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", help="input JSON (default: stdin)")
    parser.add_argument("--out", help="output JSON (default: stdout)")
    args = parser.parse_args()
    if args.problem:
        with open(args.problem) as f:
            problem = json.load(f)
    else:
        problem = json.load(sys.stdin)
    # hivemind and p2pd may print: keep fd 1 for the answer only.
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    load_setup = os.getloadavg()

    import hivemind
    import torch
    from hivemind.utils import get_dht_time

    started = time.perf_counter()
    dhts, averagers = start_swarm(problem, hivemind, torch)
    try:
        setup_s = time.perf_counter() - started
        probe = probe_dht(dhts, int(problem.get("probe_ops", 200)), get_dht_time)
        load_before = os.getloadavg()
        swarm = Swarm(problem, averagers, dhts)
        swarm.run(get_dht_time)
        load_after = os.getloadavg()
    finally:
        for averager in averagers:
            averager.shutdown()
        for dht in dhts:
            dht.shutdown()
    duration = float(problem["duration_s"])
    answer = {
        "version": hivemind.__version__,
        "problem": problem,
        "host": {
            "cpu_count": os.cpu_count(),
            "load_setup": load_setup,
            "load_before": load_before,
            "load_after": load_after,
            "load1_mean_in_run": statistics.fmean(s["load1"] for s in swarm.samples),
        },
        "setup_s": setup_s,
        "probe": probe,
        "in_run_probe": summarise_probe(**swarm.in_run),
        "steps": sorted(swarm.steps, key=lambda s: (s["peer"], s["index"])),
        "samples": swarm.samples,
        "summary": summarise_steps(swarm.steps, len(averagers), duration),
    }
    if args.out:
        os.close(answer_fd)
        with open(args.out, "w") as out:
            json.dump(answer, out)
    else:
        with os.fdopen(answer_fd, "w") as out:
            json.dump(answer, out)


if __name__ == "__main__":
    main()
