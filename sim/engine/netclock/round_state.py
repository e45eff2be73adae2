"""One round's (or group's) book-keeping on the network clock (:class:`RoundState`):
what each flow still waits for (gates, ``after``, the piece before it on its connection),
which flows continue which streams, the latches its quiet ends count on, and the chunks
of replies in flight (:class:`ReplyChunk`)."""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import Any

import numpy as np
import simpy

from protocols.contract import Flows, GroupPlan, RoundPlan
from sim.core.addresses import address_table
from sim.core.optional import optional_module
from sim.engine.netclock.chains import Chains, packed, pieces_through
from sim.network import Flow, FlowNetwork
from sim.network.compiled import direct
from sim.network.flows import DONE, FAILED

#: what ``ended_one`` returns where its counts must be read (``_ends_jit.READ_COUNTS``,
#: a module that imports only with numba; ``tests/property/test_ended_run.py`` checks
#: that the two agree)
_READ_COUNTS = -2


class RoundState:
    """Book-keeping of one round's flows: what each still waits for, what has ended."""

    def __init__(
        self,
        plan: RoundPlan | GroupPlan,
        flows: Flows,
        done: simpy.Event,
        streams: bool = True,
        chunks: bool = False,
        keep_stream: Callable[[Flow], None] | None = None,
    ) -> None:
        n = flows.src.size
        self.plan, self.flows, self.left, self.done = plan, flows, n, done
        # The per-flow values are arrays, read one at a time with ``.item`` (a Python
        # scalar): a list would hold an int or float object per flow besides its slot,
        # ~40 B a value (R1's first round plans 3.8 M flows).
        self.src, self.dst, self.nbytes = flows.src, flows.dst, flows.nbytes
        #: per flow (None: no flow has a finite one, as in most plans: nothing to arm)
        self.timeout_s: np.ndarray | None = None
        if flows.timeout_s is not None and np.isfinite(flows.timeout_s).any():
            self.timeout_s = np.asarray(flows.timeout_s, dtype=np.float64)
        self.broken = [False] * n
        need = np.zeros(n, dtype=np.intp)
        self.opens = flows.opens
        self.waits = np.full(n, -1, dtype=np.intp) if flows.waits is None else flows.waits
        self.after = np.full(n, -1, dtype=np.intp) if flows.after is None else flows.after
        #: flows yet to end before each gate opens (and ``need``: before each flow may
        #: start): arrays of int64 that numba reads too (:meth:`ended_run`)
        self.gate_left = array("q")
        self._behind = _Index(np.zeros(0, dtype=np.intp), 0)  # the flows behind each gate
        if flows.opens is not None and flows.waits is not None:
            n_gates = int(max(flows.opens.max(), flows.waits.max())) + 1
            gate_left = np.bincount(flows.opens[flows.opens >= 0], minlength=n_gates)
            self.gate_left = _counters(gate_left)
            self._behind = _Index(flows.waits, n_gates)
            waiting = flows.waits >= 0
            need[waiting] += gate_left[flows.waits[waiting]] > 0
        #: nexts[i]: the flows after i, -1 padded, where no flow has more than two (a
        #: butterfly's request: the next piece of its stream and its reply); else None
        #: and the index ``_next`` lists them
        self._nexts: np.ndarray | None = _followers(self.after, n, 2)
        self._next: _Index | None = None if self._nexts is not None else _Index(self.after, n)
        need += self.after >= 0
        self.previous = np.full(n, -1, dtype=np.intp) if flows.previous is None else flows.previous
        #: next_piece[i]: the flow whose ``previous`` is i (-1: none; at most one each)
        self.next_piece: np.ndarray | None = None
        if flows.previous is not None:
            self.next_piece = _single_follower(flows.previous, n)
        need += self.previous >= 0
        self.need = _counters(need)
        #: pred[i]: the piece before streamed flow i on its connection (-1: none; an
        #: array, read once per flow sent: no per-flow Python list to build)
        self.pred: np.ndarray | None = None
        #: gated_pred[i]: i is the predecessor of a gated streamed flow (None: no such
        #: flow); pred_end: when each of those completed
        self.gated_pred: np.ndarray | None = None
        self.pred_end: dict[int, float] = {}
        pred = np.full(n, -1, dtype=np.intp)
        if flows.streamed is not None:
            pred = np.where(flows.streamed, _predecessors(self.after, self.previous), -1)
            self.pred = pred
            gated_stream = (pred >= 0) & (self.waits >= 0)
            if gated_stream.any():
                self.gated_pred = np.zeros(n, dtype=bool)
                self.gated_pred[pred[gated_stream]] = True
        self._need0 = need == 0
        #: cont[i]: the flow continuing flow i's stream (-1: none); open: the network
        #: flow of each stream whose next piece ``j`` is due, by ``j``
        self.cont: np.ndarray | None = None
        self.open: dict[int, Any] = {}
        #: The streams run in chunks (None: each piece is an event).
        self.chains: Chains | None = None
        #: latch[i]: the latch flow i counts on in the network, -1: none
        #: (:meth:`take_latches`; set with ``ends``)
        self.latch = np.zeros(0, dtype=np.int64)
        self._latches: tuple[int, int] | None = None
        #: what a flow on a latch calls when it ends quietly and otherwise
        #: (:meth:`take_latches`; None: no latches)
        self.ends: tuple[Callable[[Flow], None], Callable[[Flow, bool], None]] | None = None
        #: what each flow of the round that is no chunk calls when it ends, other than
        #: quietly (:meth:`~sim.network.FlowNetwork.notify`; set by the clock)
        self.loud: Callable[[Flow, bool], None] | None = None
        #: lazy[j]: continuation j waits for more than the piece before it (a gate): that
        #: piece is sent kept only once j waits for it alone, and ``keep_stream`` keeps
        #: it when that happens in flight (None: no such continuation)
        self.lazy: np.ndarray | None = None
        self.keep_stream = keep_stream
        #: chunks of replies in flight (:meth:`ready_run`; None: not chunked); which
        #: pieces may end inside one
        self.reply_chunks: dict[int, ReplyChunk] | None = None
        self._inner = np.zeros(0, dtype=bool)
        #: the numba loops of :meth:`ended_run` and :meth:`ended` (None: numba is not
        #: installed, or the plan is outside them), their arrays, the arrays' address
        #: table and the most flows one piece releases (:meth:`_run_ready`)
        self._run: Any = _ends_kernel("ended_run")
        self._one: Any = _ends_kernel("ended_one")
        self._run_arrays: tuple[np.ndarray, ...] = ()
        self._run_out: tuple[np.ndarray, ...] = ()
        self._run_tab = np.zeros((0, 3), dtype=np.int64)
        self._widest = 0
        if streams and flows.streamed is not None:
            cont = _continuations(flows, pred)
            if cont is not None:
                self.cont = cont
                gated = (cont >= 0) & (self.waits[np.maximum(cont, 0)] >= 0)
                if gated.any() and keep_stream is not None:
                    self.lazy = np.zeros(n, dtype=bool)
                    self.lazy[cont[gated]] = True
                    if chunks:
                        self.reply_chunks = {}
                        # a piece whose end only starts its continuation: opens no gate,
                        # followed by no other flow (``after`` it)
                        opens = flows.opens if flows.opens is not None else np.full(n, -1)
                        self._inner = (opens < 0) & (np.bincount(
                            self.after[self.after >= 0], minlength=n
                        ) == 0)  # fmt: skip
                if chunks:  # chunks carry the streams that wait for no gate
                    ungated = np.where(gated, -1, cont)
                    self.chains = Chains.build(flows, ungated, self.gate_left)

    def take_latches(
        self,
        net: FlowNetwork,
        on_quiet: Callable[[Flow], None],
        on_loud: Callable[[Flow, bool], None],
    ) -> None:
        """Reserve the round's latches in ``net`` and say which flow counts on which
        (:attr:`latch`): a latch per gate and one for the round; ``on_quiet`` records a
        quiet end, ``on_loud`` any other end of a flow on a latch (the network flow's
        ``tag`` is the round's flow index). A flow whose end can
        release nothing while another flow of its latch is in flight counts on it:

        - a flow opening a gate, whose followers (``after`` it or the next piece on its
          connection) all wait for that gate:
          the gate stays shut while another of its flows is in flight;
        - a flow opening no gate and followed by none: the round goes on while another
          such flow is in flight.

        Streams' pieces and chunks never count (their ends move streams)."""
        n, flows = len(self.src), self.flows
        n_gates = len(self.gate_left)
        base = net.latches(n_gates + 1) if n > 0 else -1
        if base < 0:
            return
        opens = np.full(n, -1, dtype=np.intp) if flows.opens is None else flows.opens
        j = np.r_[np.flatnonzero(self.after >= 0), np.flatnonzero(self.previous >= 0)]
        i = np.r_[self.after[self.after >= 0], self.previous[self.previous >= 0]]
        followed = np.zeros(n, dtype=bool)
        followed[i] = True
        elsewhere = np.zeros(n, dtype=bool)  # a follower waits for another gate
        elsewhere[i[self.waits[j] != opens[i]]] = True
        latch = np.full(n, -1, dtype=np.int64)
        gated = (opens >= 0) & ~elsewhere
        latch[gated] = base + opens[gated]
        latch[(opens < 0) & ~followed] = base + n_gates
        if self.cont is not None:
            cont = self.cont
            latch[cont >= 0] = -1
            if self.lazy is not None:
                # a piece whose continuation waits for its gate too, opening no gate and
                # followed by nothing else: counted until it is kept (FlowNetwork.keep_stream)
                only = np.bincount(i, minlength=n) == 1
                lazy = np.flatnonzero((cont >= 0) & (opens < 0) & only)
                lazy = lazy[self.lazy[cont[lazy]]]
                latch[lazy] = base + n_gates
        self.latch = latch
        self._latches = (base, n_gates + 1)
        self.ends = (on_quiet, on_loud)

    def give_back_latches(self, net: FlowNetwork) -> None:
        """Free the latches of :meth:`take_latches` (every flow of the round has ended),
        and drop :attr:`ends` and :attr:`loud`: they hold this state, a cycle that would
        keep the round's lists (~300 B per flow) alive until the garbage collector's next
        full pass, which the engine's raised thresholds make rare."""
        if self._latches is not None:
            net.free_latches(*self._latches)
            self._latches = None
        self.ends = self.loud = None

    def mark_end(self, i: int, at_s: float) -> None:
        """Flow i completed at ``at_s``: noted if a gated streamed flow follows it."""
        gated_pred = self.gated_pred
        if gated_pred is not None and gated_pred.item(i):
            self.pred_end[i] = at_s

    def back_to_back(self, j: int, now: float) -> bool:
        """Whether flow j, starting now, follows the piece before it back to back (no
        route latency): a streamed flow that waits for no gate always does; one that
        waits for a gate when it starts at the instant that piece completed,
        whichever event came first at that instant."""
        assert self.pred is not None
        p = self.pred.item(j)
        if p < 0:
            return False
        return self.waits.item(j) < 0 or self.pred_end.pop(p, None) == now

    def ready_run(self, i: int) -> list[int]:
        """Flow i, about to be sent, and the continuations after it that wait for nothing
        but the piece before them (their gates open, their requests ended), have bytes
        and no timeout: sent back to back as one flow (a chunk of replies), as piece by
        piece each would start the instant the one before it ended."""
        run = [i]
        tl, cont, need, nbytes = self.timeout_s, self.cont, self.need, self.nbytes
        assert cont is not None
        assert self.lazy is not None
        inner = self._inner
        if not inner[i] or nbytes.item(i) <= 0.0 or (tl is not None and tl.item(i) < math.inf):
            return run
        j = cont.item(i)
        while (
            j >= 0
            and inner[run[-1]]
            and self.lazy[j]
            and need[j] == 1
            and not self.broken[j]
            and nbytes.item(j) > 0.0
            and (tl is None or tl.item(j) == math.inf)
        ):
            run.append(j)
            j = cont.item(j)
        return run

    def _keep_for(self, j: int) -> None:
        """Continuation j now waits only for the piece before it: if that piece is in
        flight unkept, keep its stream so that j follows it back to back."""
        flow = self.open.get(j)
        assert self.pred is not None
        assert self.keep_stream is not None
        if flow is not None and flow.tag == self.pred.item(j) and _in_flight(flow):
            self.keep_stream(flow)

    def roots(self) -> np.ndarray:
        """Flows that wait for nothing: they start with the round."""
        return np.flatnonzero((self.waits < 0) & (self.after < 0))

    def ready_at_start(self) -> list[int]:
        """Flows behind a gate that no flow opens (and after nothing): they start now."""
        return np.flatnonzero(self._need0 & (self.waits >= 0)).tolist()

    def ended(self, i: int, ok: bool) -> list[int]:
        """Count flow ``i`` as ended (``ok``: delivered); the flows that may start now.
        A delivered flow is counted in numba where :meth:`ended_run` is."""
        ready: list[int] = []
        if ok and (self._run_arrays or self._run_ready()):
            self._take_counted(1, ready, self._one(i, self._run_tab))
        else:
            self._count_ends((i,), ok, ready, None)
        return ready

    def ended_inside(self, pieces: list[int], ready: list[int]) -> None:
        """:meth:`ended` of each of ``pieces`` as delivered, in order: pieces of a stream
        that ended inside a chunk, each followed in the same flow by its continuation
        (:attr:`cont`). What they release, less those continuations (the chunk carries
        them), is appended to ``ready``."""
        self._count_ends(pieces, True, ready, self.cont)

    def ended_run(self, flat: np.ndarray, start: int, stop: int, ready: list[int]) -> None:
        """:meth:`ended_inside` of pieces ``flat[start:stop]`` (int64: a stream's, in
        order), in numba where it imports and the flows after each flow are an array
        (``_nexts``): the same steps in the same order, what numba cannot do (a gate
        opened, a continuation kept, ``done``) done here after it, in its order."""
        if not self._run_ready():
            self.ended_inside(flat[start:stop].tolist(), ready)
            return
        run, tab, widest = self._run, self._run_tab, self._widest
        while start < stop:  # more than once where the output arrays fill up
            at = run(flat, start, stop, widest, tab)
            self._take_counted(at - start, ready)
            start = at

    def _take_counted(self, counted: int, ready: list[int], one: int = _READ_COUNTS) -> None:
        """After the numba loop counted ``counted`` flows as ended: what it could not do,
        in its order (``done`` once none is left, the gates opened, the continuations
        kept), and the flows it released appended to ``ready``. ``one`` >= -1 (from
        ``ended_one``): it released that flow (-1: none), opened no gate and keeps
        nothing, so its counts need not be read."""
        self.left -= counted
        if self.left == 0:
            self.done.succeed()
        if one >= 0:
            ready.append(one)
        elif one == _READ_COUNTS:
            released, opened, kept, counts = self._run_out
            n_ready, n_opened, n_kept = counts.tolist()
            if n_opened and self.chains is not None:
                for gate in opened[:n_opened].tolist():
                    self.chains.gate_opened(gate)
            if n_kept:
                for j in kept[:n_kept].tolist():
                    self._keep_for(j)
            if n_ready == 1:
                ready.append(released.item(0))
            elif n_ready:
                ready.extend(released[:n_ready].tolist())

    def _run_ready(self) -> bool:
        """Whether :meth:`ended_run` runs in numba; its arrays are made on first use:
        ``_run_arrays``, those :func:`~sim.engine.netclock._ends_jit.ended_run` reads
        and writes (kept alive here: the kernel has only their address table,
        ``_run_tab``), among them ``_run_out``, its outputs."""
        if self._run_arrays:
            return True
        nexts, cont, plan = self._nexts, self.cont, self.plan
        if self._run is None or nexts is None or plan.delivered is None:
            self._run = None
            return False
        none = np.zeros(0, dtype=np.intp)
        order, bounds = self._behind.order, self._behind.bounds
        widest = 3 + (int(np.diff(bounds).max()) if bounds.size > 1 else 0)
        inputs = (  # one layout and type each, as the kernel's LAYOUT says
            _ints(none if cont is None else cont),  # read by ended_run (streams) only
            np.frombuffer(self.need, dtype=np.int64),
            np.frombuffer(self.gate_left, dtype=np.int64),
            _ints(none if self.opens is None else self.opens),
            _ints(order),
            _ints(bounds),
            _ints(nexts),
            _ints(none if self.next_piece is None else self.next_piece),
            np.ascontiguousarray(np.zeros(0, dtype=bool) if self.lazy is None else self.lazy),
            plan.delivered,
        )
        room = _RUN_ROOM + widest
        self._run_out = (
            np.empty(room, dtype=np.int64),  # flows released
            np.empty(max(len(self.gate_left), 1), dtype=np.int64),  # gates opened
            np.empty(room, dtype=np.int64),  # continuations to keep
            np.zeros(3, dtype=np.int64),  # how many of each
        )
        self._run_arrays = (*inputs, *self._run_out)
        self._run_tab = address_table(self._run_arrays, _KERNELS["LAYOUT"])
        self._widest = widest
        return True

    def _count_ends(
        self, flows: Iterable[int], ok: bool, ready: list[int], cont: np.ndarray | None
    ) -> None:
        """:meth:`ended` of each of ``flows`` in order, what they release appended to
        ``ready``, less each one's continuation ``cont[i]`` where ``cont`` is given."""
        delivered = self.plan.delivered
        assert delivered is not None
        need, lazy, opens = self.need, self.lazy, self.opens
        nexts, next_piece = self._nexts, self.next_piece
        for i in flows:
            delivered[i] = ok
            self.left -= 1
            if self.left == 0:
                self.done.succeed()
            skip = cont.item(i) if cont is not None else -1  # never a flow
            behind: Sequence[int] = ()  # the flows behind i's gate, if it opens now
            if opens is not None:
                gate = opens.item(i)
                if gate >= 0:
                    gate_left = self.gate_left
                    gate_left[gate] -= 1
                    if gate_left[gate] == 0:
                        if self.chains is not None:
                            self.chains.gate_opened(gate)
                        behind = self._behind.of(gate)
            after: Sequence[int]  # the flows after i
            if nexts is None:
                assert self._next is not None
                after = self._next.of(i)
            else:
                j, k = nexts.item(i, 0), nexts.item(i, 1)
                after = () if j < 0 else (j,) if k < 0 else (j, k)
            if not ok:
                for j in after:
                    self.broken[j] = True
            for waiting in (behind, after):
                for j in waiting:
                    need[j] -= 1
                    if need[j] == 0:
                        if j != skip:
                            ready.append(j)
                    elif lazy is not None and need[j] == 1 and lazy[j]:
                        self._keep_for(j)
            if next_piece is not None:
                j = next_piece.item(i)
                if j >= 0:
                    if not ok:
                        self.broken[j] = True
                    need[j] -= 1
                    if need[j] == 0 and j != skip:
                        ready.append(j)


#: room for the flows one call of the numba loop may release, besides one piece's worth
_RUN_ROOM = 1024


def _ends_kernel(name: str) -> Any:
    """The compiled ``name`` of :mod:`~sim.engine.netclock._ends_jit` (None without
    numba); its machine code itself once compiled (:func:`~sim.network.compiled.direct`)."""
    if not _KERNELS:
        module: ModuleType | None = optional_module("sim.engine.netclock._ends_jit")
        _KERNELS["LAYOUT"] = None if module is None else module.LAYOUT
        for kernel_name in ("ended_run", "ended_one"):
            _KERNELS[kernel_name] = None if module is None else getattr(module, kernel_name)
    kernel = _KERNELS[name]
    if getattr(kernel, "signatures", None):  # the dispatcher, compiled: its one entry
        _KERNELS[name] = kernel = direct(kernel)
    return kernel


#: the kernels by name, once looked for, and the layout of their address table
_KERNELS: dict[str, Any] = {}


def _ints(values: np.ndarray) -> np.ndarray:
    """``values`` as C-ordered int64 (itself where it is already)."""
    return np.ascontiguousarray(values, dtype=np.int64)


def _counters(values: np.ndarray) -> array[int]:
    """``values`` as an array of int64 counters: read and written from Python (one int
    at a time, as a list) and from numba (through a view of its buffer)."""
    return packed("q", values)


class ReplyChunk:
    """A chunk of replies in flight: its pieces, their cumulative bytes, how many are
    counted as ended, and its flow."""

    __slots__ = ("cum", "done", "flow", "pieces")

    def __init__(self, pieces: list[int], nbytes: np.ndarray) -> None:
        self.pieces = pieces
        total, cum = 0.0, []
        for i in pieces:
            total += nbytes.item(i)
            cum.append(total)
        self.cum = cum
        self.done = 0
        self.flow: Any = None

    def through(self, moved: float, failed: bool = False) -> int:
        """The first piece (from ``done``, before the last) whose bytes are not through
        once the chunk moved ``moved`` bytes; when it ``failed`` at that instant, a piece
        whose last byte arrives at that very instant fails with it."""
        return pieces_through(self.cum, 0.0, self.done, len(self.pieces) - 1, moved, failed)


def _followers(after: np.ndarray, n: int, most: int) -> np.ndarray | None:
    """(n, most): the flows j with ``after[j] == i`` for each flow i, in flow order, then
    -1s; None where a flow has more than ``most`` such flows."""
    j = np.flatnonzero(after >= 0)  # in flow order
    i = after[j]
    if i.size and np.bincount(i, minlength=n).max() > most:
        return None
    followers = np.full((n, most), -1, dtype=np.intp)
    for k in range(most):  # column k: each flow's first follower not in columns < k
        if i.size == 0:
            break
        first = np.full(n, n, dtype=np.intp)
        np.minimum.at(first, i, j)  # linear, where a stable sort by i was n log n
        has = first < n
        followers[has, k] = first[has]
        rest = j != first[i]
        i, j = i[rest], j[rest]
    return followers


def _single_follower(previous: np.ndarray, n: int) -> np.ndarray:
    """(n,) the flow j with ``previous[j] == i`` for each flow i, -1 for none; a flow is
    the previous piece of one flow at most (a connection is one sequence of pieces)."""
    follower = _followers(previous, n, 1)
    if follower is None:
        raise ValueError("Flows.previous: a flow is the previous piece of two flows")
    return follower[:, 0]


def _in_flight(flow: Flow) -> bool:
    return flow.phase is not DONE and flow.phase is not FAILED


def _predecessors(after: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """(n,) the piece before each flow on its connection: ``previous``, else ``after``."""
    return np.where(previous >= 0, previous, after)


def _continuations(flows: Flows, pred: np.ndarray) -> np.ndarray | None:
    """(n,) the flow that continues each flow's stream, -1 for none (None: no stream).

    Flow j continues flow i = ``pred[j]`` (the streamed piece before it) when it goes on
    the same connection (source and destination) and no other flow continues i that
    way: then i's place in the bandwidth phase can carry j's bytes if j starts the
    instant i completes (always, when j waits for no gate; otherwise i is sent kept
    only once j waits for it alone, :attr:`RoundState.lazy`)."""
    assert flows.streamed is not None
    j = np.flatnonzero(pred >= 0)
    i = pred[j]
    same = (flows.src[j] == flows.src[i]) & (flows.dst[j] == flows.dst[i])
    j, i = j[same], i[same]
    if j.size == 0:
        return None
    single = np.bincount(i, minlength=pred.size)[i] == 1
    cont = np.full(pred.size, -1, dtype=np.intp)
    cont[i[single]] = j[single]
    return cont


class _Index:
    """The flows listing each key (a gate, a flow) in ``keys``, as lists (CSR)."""

    def __init__(self, keys: np.ndarray, n_keys: int) -> None:
        #: the flows listing key k are ``order[bounds[k] : bounds[k + 1]]`` (arrays:
        #: no int object per flow)
        self.order, self.bounds = listing(keys, n_keys)

    def of(self, key: int) -> list[int]:
        """Flows listing ``key``, in flow order."""
        bounds = self.bounds
        start, stop = bounds.item(key), bounds.item(key + 1)
        return self.order[start:stop].tolist() if start < stop else []


def listing(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """The flows listing each key k of ``keys`` (-1: none) as CSR: (order, bounds), the
    flows of key k ``order[bounds[k] : bounds[k + 1]]``, in flow order."""
    listed = np.flatnonzero(keys >= 0)
    listed_keys = keys[listed]
    order = listed[np.argsort(listed_keys, kind="stable")]
    bounds = np.zeros(n_keys + 1, dtype=np.intp)
    np.cumsum(np.bincount(listed_keys, minlength=n_keys), out=bounds[1:])
    return order, bounds
