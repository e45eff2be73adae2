"""A run's timeline as Chrome trace events (``avsim run --trace`` → ``trace.json``).

The file opens in Perfetto (https://ui.perfetto.dev) and ``chrome://tracing``. It uses
three kinds of events of the Trace Event Format (the JSON object form, ``{"traceEvents":
[...], "displayTimeUnit": "ms"}``): complete events (``ph: "X"``, ``ts`` and ``dur`` in
whole microseconds of simulated time) for what lasts, thread-scoped instants (``ph:
"i"``) for what happens at once, and metadata (``ph: "M"``) naming the tracks. Every
event has ``name``, ``ph``, ``pid``, ``tid`` and ``ts`` (metadata ``ts`` 0).

One process per run, ``pid`` = the seed; one thread per followed peer, ``tid`` = the
peer, named ``peer i``. Perfetto draws only slices that nest on a thread (its FAQ: JSON
``X`` events must nest perfectly), while a peer's flows overlap each other and an
absence may cut a round in two; so the slices of a peer that do not nest go to extra
rows of the same peer (``peer i ·2``, ``·3``, …), sorted right under it.

Recording is bounded: only the followed peers (:attr:`TraceOptions.peers`) are
recorded, and after :attr:`TraceOptions.max_events` events the tracer stops, notes
:attr:`Tracer.truncated_at_s` and ends the trace with an instant ``trace truncated``.
A run without a tracer pays nothing: every hook is behind ``tracer is not None``, in a
subclass used only when tracing (:mod:`sim.engine.netclock`) or in a presence listener
added only when tracing (:class:`ChurnTrace`). Tracing never changes a run: hooks only
read, and they schedule no SimPy event.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.core.errors import ScenarioError

#: Default cap on the events of one run.
MAX_EVENTS = 500_000
#: The categories of the slices the engines record (``step``: a mailbox protocol's step
#: under ``schedule: async``, :mod:`sim.engine.mailbox`).
CATEGORIES = ("round", "compute", "matchmaking", "all-reduce", "step", "flow", "churn")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")

#: A recorded event: (peer, name, cat, start_s, end_s or None for an instant, args).
Record = tuple[int, str, str, float, float | None, dict[str, Any] | None]


@dataclass(frozen=True)
class TraceOptions:
    """What a trace follows and how much it may hold.

    Attributes
    ----------
    peers
        Peers to record (one track each); ``None``: every peer. Indices beyond the
        run's peers are ignored.
    max_events
        Events recorded per run before the tracer stops (``>= 1``).
    """

    peers: frozenset[int] | None = None
    max_events: int = MAX_EVENTS

    def __post_init__(self) -> None:
        bad = isinstance(self.max_events, bool) or not isinstance(self.max_events, int)
        if bad or self.max_events < 1:
            raise ScenarioError("trace.max_events", self.max_events, "an integer >= 1")
        peers = self.peers or ()
        if any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in peers):
            raise ScenarioError("trace.peers", sorted(peers), "peer indices >= 0")


def parse_peers(text: str) -> frozenset[int]:
    """The peers of ``--trace-peers``: indices and inclusive ranges, ``"0-15,32"``.

    Raises
    ------
    ScenarioError
        On ``--trace-peers`` when ``text`` is not such a list.
    """
    peers: set[int] = set()
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if match is None or (match[2] is not None and int(match[2]) < int(match[1])):
            raise ScenarioError("--trace-peers", text, "peer indices or ranges like 0-15,32")
        first = int(match[1])
        peers.update(range(first, int(match[2] or first) + 1))
    return frozenset(peers)


class Tracer:
    """Records one run's slices and instants; :meth:`events` turns them into trace events.

    Parameters
    ----------
    options
        Peers to follow and the event cap.
    seed
        The run's seed: the ``pid`` of its events.
    n_peers
        Every peer that will ever exist in the run.

    Attributes
    ----------
    truncated_at_s : float or None
        Simulated time at which the cap stopped the recording; ``None`` while complete.
    """

    def __init__(self, options: TraceOptions, seed: int, n_peers: int) -> None:
        self.options, self.seed, self.n_peers = options, int(seed), int(n_peers)
        peers = range(n_peers) if options.peers is None else options.peers
        self.peers = sorted(p for p in peers if 0 <= p < n_peers)
        self._follows = np.zeros(n_peers, dtype=bool)
        self._follows[self.peers] = True
        #: Extra rows of a peer have ``tid`` = peer + row × this power of ten (> any peer).
        self.row_stride = 10 ** len(str(max(self.n_peers - 1, 1)))
        self._records: list[Record] = []
        self._closers: list[Callable[[float], None]] = []
        self.truncated_at_s: float | None = None

    @property
    def mask(self) -> np.ndarray:
        """(n_peers,) bool: the followed peers (do not modify)."""
        return self._follows

    def follows(self, peer: int) -> bool:
        """True when ``peer`` has a track and the trace is still recording."""
        return (
            self.truncated_at_s is None and 0 <= peer < self.n_peers and bool(self._follows[peer])
        )

    def slice(
        self,
        peer: int,
        name: str,
        cat: str,
        start_s: float,
        end_s: float,
        args: dict[str, Any] | None = None,
    ) -> None:
        """Record that ``peer`` did ``name`` (category ``cat``) from ``start_s`` to
        ``end_s`` (simulated seconds, ``end_s >= start_s``); ignored for a peer not
        followed."""
        if self.follows(int(peer)) and self._room(float(end_s)):
            end = max(float(end_s), float(start_s))
            self._records.append((int(peer), name, cat, float(start_s), end, args))

    def instant(
        self, peer: int, name: str, at_s: float, args: dict[str, Any] | None = None
    ) -> None:
        """Record that ``name`` happened to ``peer`` at ``at_s`` (simulated seconds)."""
        if self.follows(int(peer)) and self._room(float(at_s)):
            self._records.append((int(peer), name, "", float(at_s), None, args))

    def on_close(self, close: Callable[[float], None]) -> None:
        """Call ``close(end_s)`` when the run ends (a hook ending what is still open)."""
        self._closers.append(close)

    def close(self, end_s: float) -> None:
        """The run ended at ``end_s``: let every hook end what is still open."""
        for close in self._closers:
            close(end_s)
        self._closers.clear()

    def events(self) -> list[dict[str, Any]]:
        """The trace events: metadata first (process ``seed s``, thread ``peer i`` of
        every followed peer and its extra rows), then the recorded events in time
        order, then ``trace truncated`` when the cap was hit."""
        rows = _rows(self._records)
        n_rows = max(rows.values(), default=0) + 1
        meta = self._metadata(rows, n_rows)
        body = [self._event(record, rows.get(i, 0)) for i, record in _ordered(self._records)]
        if self.truncated_at_s is not None:
            body.append(self._truncated())
        return meta + body

    # -- helpers -------------------------------------------------------------------------
    def _room(self, now_s: float) -> bool:
        if len(self._records) < self.options.max_events:
            return True
        self.truncated_at_s = now_s
        return False

    def _tid(self, peer: int, row: int) -> int:
        return peer + row * self.row_stride

    def _metadata(self, rows: dict[int, int], n_rows: int) -> list[dict[str, Any]]:
        pid = self.seed
        meta = [_meta(pid, 0, "process_name", name=f"seed {pid}")]
        meta.append(_meta(pid, 0, "process_sort_index", sort_index=pid))
        used = {(self._records[i][0], row) for i, row in rows.items()}
        used.update((peer, 0) for peer in self.peers)
        for peer, row in sorted(used):
            tid = self._tid(peer, row)
            name = f"peer {peer}" if row == 0 else f"peer {peer} ·{row + 1}"
            meta.append(_meta(pid, tid, "thread_name", name=name))
            meta.append(_meta(pid, tid, "thread_sort_index", sort_index=peer * n_rows + row))
        return meta

    def _event(self, record: Record, row: int) -> dict[str, Any]:
        peer, name, cat, start_s, end_s, args = record
        event: dict[str, Any] = {"name": name, "ph": "X" if end_s is not None else "i"}
        if cat:
            event["cat"] = cat
        event.update(pid=self.seed, tid=self._tid(peer, row), ts=_us(start_s))
        if end_s is None:
            event["s"] = "t"
        else:
            event["dur"] = max(_us(end_s) - event["ts"], 0)
        if args:
            event["args"] = _plain(args)
        return event

    def _truncated(self) -> dict[str, Any]:
        at_s = self.truncated_at_s
        assert at_s is not None
        args = {"max_events": self.options.max_events, "at_s": at_s}
        tid = self._tid(self.peers[0], 0) if self.peers else 0
        return {"name": "trace truncated", "ph": "i", "s": "p", "pid": self.seed, "tid": tid,
                "ts": _us(at_s), "args": args}  # fmt: skip


class ChurnTrace:
    """A presence listener of the network clock
    (:class:`~sim.engine.netclock.PresenceListener`): slices ``absent`` (category
    ``churn``) from a peer's preemption until it is present again (its return, or with
    ``rejoin: fetch`` the arrival of its download); an absence still open when the run
    ends is cut there (``args.open``)."""

    def __init__(self, tracer: Tracer, now: Callable[[], float]) -> None:
        self.tracer, self.now = tracer, now
        self.since: dict[int, float] = {}
        tracer.on_close(self.close)

    def down(self, peers: np.ndarray) -> None:
        """``peers`` are preempted now."""
        now = self.now()
        for peer in peers.tolist():
            if self.tracer.follows(peer):
                self.since.setdefault(peer, now)

    def up(self, peers: np.ndarray) -> None:
        """``peers`` are present again now."""
        now = self.now()
        for peer in peers.tolist():
            start = self.since.pop(peer, None)
            if start is not None:
                self.tracer.slice(peer, "absent", "churn", start, now)

    def close(self, end_s: float) -> None:
        """The run ended: cut the absences still open."""
        for peer, start in sorted(self.since.items()):
            self.tracer.slice(peer, "absent", "churn", start, end_s, {"open": True})
        self.since.clear()


def _rows(records: list[Record]) -> dict[int, int]:
    """Row of each recorded slice (index → row; rows other than 0 only): per peer, in
    time order, each slice goes to the first row where it nests in what is open there."""
    rows: dict[int, int] = {}
    stacks: dict[int, list[list[int]]] = {}
    for i, (peer, _name, _cat, start_s, end_s, _args) in _ordered(records):
        if end_s is None:
            continue
        row = _place(stacks.setdefault(peer, []), _us(start_s), _us(end_s))
        if row:
            rows[i] = row
    return rows


def _place(lanes: list[list[int]], start: int, end: int) -> int:
    """Put the slice ``[start, end]`` on the first row (a stack of the ends of the slices
    open there) where it nests; a new row when none. Slices come by start time."""
    for row, open_ends in enumerate(lanes):
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        if not open_ends or end <= open_ends[-1]:
            open_ends.append(end)
            return row
    lanes.append([end])
    return len(lanes) - 1


def _ordered(records: list[Record]) -> list[tuple[int, Record]]:
    """Records by start time, longer first (a parent before the slices inside it)."""

    def key(item: tuple[int, Record]) -> tuple[float, float, int]:
        i, record = item
        end_s = record[4]
        return (record[3], -(record[3] if end_s is None else end_s), i)

    return sorted(enumerate(records), key=key)


def _meta(pid: int, tid: int, what: str, **args: Any) -> dict[str, Any]:
    return {"name": what, "ph": "M", "pid": pid, "tid": tid, "ts": 0, "args": args}


def _us(seconds: float) -> int:
    """Seconds as whole microseconds (the format's unit). Whole numbers keep ``ts + dur``
    exact, so slices that nest here nest in the viewer too."""
    return round(seconds * 1e6)


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars and arrays turned into JSON values (a non-finite
    number into ``None``)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no infinity
    return value


__all__ = ["MAX_EVENTS", "ChurnTrace", "TraceOptions", "Tracer", "parse_peers"]
