"""The compiled path of the bandwidth phase: the general path's steps on arrays, in numba.

:class:`CompiledCore` has the interface of :class:`~sim.network.general.GeneralCore`
and gives bit-identical rates and completion times (the kernels in
:mod:`sim.network._compiled_jit` repeat the general path's operations in its order;
``tests/property/test_network_paths.py`` runs both side by side). What it saves is the
Python work per change: a completion among the ~2000 flows of a Moshpit group re-checks
every resource of the group and re-rates tens of flows, which the general path does
with dicts and objects (about 175 µs a completion there, about 10 µs here).

Each flow in its bandwidth phase holds a *slot* (a row of the arrays), reused once it
leaves; the arrays grow by doubling. The kernels take them as one address table
(:attr:`CompiledCore.tab`), made again whenever an array is replaced. Importing this
module does not import numba;
:func:`available` imports the kernels (numba, the extra ``fast``) on first use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.core.addresses import address_table
from sim.core.optional import optional_module

if TYPE_CHECKING:
    from sim.network.flow import Flow


def _kernels() -> ModuleType | None:
    return optional_module("sim.network._compiled_jit")


def available() -> bool:
    """Whether numba imports, so that :class:`CompiledCore` can run."""
    return _kernels() is not None


def direct(kernel: Any) -> Any:
    """numba's compiled entry point of ``kernel`` once it has exactly one signature
    (else ``kernel`` itself): the same machine code, called without the dispatcher's
    type resolution of every argument (which cost ~0.7 µs a call when the kernels took
    the state's 15 arrays; they take an address table now, :attr:`CompiledCore.tab`).
    The entry converts its arguments to that signature's types, so the
    callers pass each scalar with one type always (floats as ``float``: an int where
    the signature has an int64 would be truncated from a float)."""
    signatures = getattr(kernel, "signatures", None)  # none under NUMBA_DISABLE_JIT
    return kernel.get_overload(signatures[0]) if signatures and len(signatures) == 1 else kernel


class CompiledCore:
    """Rates and completion times of the flows in their bandwidth phase, in arrays.

    Parameters
    ----------
    capacity
        Capacity of every resource, bytes/s (finite).
    """

    def __init__(self, capacity: Sequence[float]) -> None:
        kernels = _kernels()
        if kernels is None:
            raise ImportError("the compiled network path needs numba (pip install avsim[fast])")
        self.k = kernels
        self.capacity = list(capacity)
        self.width = 2
        self.slots = 64
        self.pool_size = 1024
        self.st = kernels.empty_state(self.capacity, self.slots, self.width, self.pool_size)
        self._fields()
        self.free = list(range(self.slots - 1, -1, -1))
        #: (slots,) per slot: its flow (None: free), and when it entered its bandwidth
        #: phase or was last resumed (a count the kernels keep: :meth:`flows` lists them
        #: in this order, the general core's dict order; no dict to keep up to date per
        #: flow)
        self.flow_of: list[Flow | None] = [None] * self.slots
        self.entered = np.zeros(self.slots, dtype=np.int64)
        #: (slots,) per slot: its flow is a stream's piece (``Flow.keep``; False for a
        #: free slot: set by the kernels of ``enter``, ``refill`` and ``shorten``, cleared
        #: when the flow leaves); the due slots of the last ``pop_chain``
        self.keep = np.zeros(self.slots, dtype=np.bool_)
        self.due = np.zeros(self.slots, dtype=np.int64)
        #: (slots,) per slot: the latch its flow is counted on (-1: none; set at
        #: ``enter``, see :meth:`~sim.network.flows.FlowNetwork.join_latch`); the
        #: instants and quietness of the last ``pop_chain``'s due slots
        self.latch_of = np.full(self.slots, -1, dtype=np.int64)
        self.when = np.zeros(self.slots)
        self.quiet = np.zeros(self.slots, dtype=np.bool_)
        self.next = math.inf  # the next completion time, as the last kernel left it
        #: the address table of the state and the per-slot arrays the kernels read
        #: (:data:`~sim.network._compiled_jit.LAYOUT`); :meth:`_address` makes it again
        #: whenever one of them is replaced
        self.tab = self._address()
        #: the kernels called once per event, each through the dispatcher until its
        #: first call has compiled (or loaded) its one signature, then :func:`direct`
        self._pop_chain, self._refill = kernels.pop_chain, kernels.refill
        self._enter_one, self._shorten = kernels.enter_one, kernels.shorten

    # -- the core's interface (see GeneralCore) -------------------------------------------
    def enter(self, flows: Sequence[Flow], now: float) -> None:
        """``flows`` (with bytes and resources) start their bandwidth phase now."""
        k = len(flows)
        width = len(flows[0].res) if k == 1 else max(len(flow.res) for flow in flows)
        if k > len(self.free) or width > self.width:
            self._grow(max(self.slots, 2 * (self.slots - len(self.free) + k)), width)
        free, flow_of = self.free, self.flow_of
        if k == 1 and width <= 2:  # the kernel tests the pool's room itself
            flow = flows[0]
            slot = flow.slot = free.pop()
            flow_of[slot] = flow
            res = flow.res
            last = res[width - 1]
            args = (slot, flow.id, flow.nbytes, flow.w, width, res[0], last, float(now), flow.keep,
                    flow.latch)  # fmt: skip
            call = self._enter_one
            nxt = call(*args, self.tab)
            if nxt != nxt:  # no room in the pool: made, then entered
                self._pool_room(width)
                nxt = call(*args, self.tab)
            self.next = nxt
            if call is self.k.enter_one:
                self._enter_one = direct(call)
            return
        self._pool_room(k * width)
        slots = [free.pop() for _ in range(k)]
        for flow, slot in zip(flows, slots, strict=True):
            flow.slot = slot
            flow_of[slot] = flow
        self.next = self.k.enter(
            np.array(slots, dtype=np.int64),
            np.array([flow.id for flow in flows], dtype=np.int64),
            np.array([flow.nbytes for flow in flows]),
            np.array([flow.w for flow in flows]),
            np.array([len(flow.res) for flow in flows], dtype=np.int64),
            np.array([r for flow in flows for r in flow.res], dtype=np.int64),
            np.array([flow.keep for flow in flows], dtype=np.bool_),
            np.array([flow.latch for flow in flows], dtype=np.int64),
            now,
            self.tab,
        )

    def remove(self, flows: Sequence[Flow], now: float) -> None:
        """``flows`` leave their bandwidth phase unfinished; their ``remaining`` is
        advanced to ``now``."""
        slots = [flow.slot for flow in flows]
        self.next = self.k.remove(np.array(slots, dtype=np.int64), now, self.tab)
        remaining = self._rem[slots].tolist()
        for flow, rest in zip(flows, remaining, strict=True):
            flow.remaining = rest
        self.keep[slots] = False
        self._release(flows, slots)

    def pop_chain(
        self, now: float, horizon: float, latch_left: np.ndarray | None
    ) -> tuple[list[Flow], list[float], list[bool], float]:
        """The flows that complete now, in ``(finish, id)`` order, out of the network
        (streams' pieces stay, parked), then those of the next completion instants before
        ``horizon`` as long as all their flows are quiet (``_compiled_jit.pop_chain``):
        the flows in order, each one's instant and quietness, and the last instant."""
        assert latch_left is not None  # the network keeps latches for this core
        call = self._pop_chain
        n, last, self.next = call(float(now), float(horizon), latch_left, self.tab)
        if call is self.k.pop_chain:
            self._pop_chain = direct(call)
        if n == 0:
            return [], [], [], now
        slots: list[Any]  # ints: each one's flow is in flow_of
        if n == 1:  # most wake-ups where every piece is an event: no slices
            slots, when, quiet = [self.due.item(0)], [self.when.item(0)], [self.quiet.item(0)]
        else:
            slots, when = self.due[:n].tolist(), self.when[:n].tolist()
            quiet = self.quiet[:n].tolist()
        flow_of, free = self.flow_of, self.free
        flows: list[Any] = []
        for slot in slots:  # _release, inlined
            flow = flow_of[slot]
            flows.append(flow)
            if flow.keep:  # a stream's piece stays, parked (its slot and place)
                flow.parked = True
            else:
                flow_of[slot] = None
                flow.slot = -1
                free.append(slot)
        return flows, when, quiet, last

    def refill(self, flow: Flow, key: int, now: float) -> None:
        """The parked ``flow`` carries its next piece (``remaining`` bytes) from now, at
        the rate it has, as flow ``key``: last on its resources, as a new flow would be
        (each entry leaves its list before it joins the end again: no pool room needed)."""
        flow.id = key
        call = self._refill
        self.next = call(flow.slot, key, flow.remaining, float(now), flow.keep, self.tab)
        if call is self.k.refill:
            self._refill = direct(call)

    def shorten(self, flow: Flow, cut: float, now: float) -> None:
        """The in-flight ``flow`` carries ``cut`` bytes less (the general core's
        ``shorten``)."""
        call = self._shorten
        self.next = call(flow.slot, float(cut), float(now), flow.keep, self.tab)
        if call is self.k.shorten:
            self._shorten = direct(call)

    def flows(self) -> list[Flow]:
        """The flows in their bandwidth phase, parked streams included, in the order they
        entered it (a resumed stream as of its resumption)."""
        if len(self.free) == self.slots:  # none (the byte counters ask between rounds)
            return []
        used = np.array([flow is not None for flow in self.flow_of])
        slots = np.flatnonzero(used)
        order = slots[np.argsort(self.entered[slots], kind="stable")].tolist()
        flow_of = self.flow_of
        return [flow_of[slot] for slot in order]

    def __len__(self) -> int:
        """How many flows are in their bandwidth phase, parked streams included."""
        return self.slots - len(self.free)

    def next_finish(self) -> float:
        """Completion time of the next flow to complete (``inf``: none in flight)."""
        return self.next

    def moved(self, flow: Flow, at_s: float) -> float:
        """Bytes of the in-flight ``flow`` through at ``at_s`` (not capped at its size)."""
        slot = flow.slot
        rate, rem, t_last = self._rate.item(slot), self._rem.item(slot), self._t_last.item(slot)
        return flow.nbytes - rem + rate * (at_s - t_last)

    def rate(self, flow: Flow) -> float:
        """Current rate of the in-flight ``flow``, bytes/s."""
        return self._rate.item(flow.slot)

    # -- internals -------------------------------------------------------------------------
    def _address(self) -> np.ndarray:
        """The kernels' address table of the current arrays (they stay alive in ``st``
        and the attributes below until replaced, and the table with them)."""
        arrays = (*self.st, self.keep, self.latch_of, self.due, self.when, self.quiet, self.entered)
        return address_table(arrays, self.k.LAYOUT)

    def _fields(self) -> None:
        """Views of the per-slot fields Python reads one flow at a time (``.item`` of a
        float64 view gives a Python float without a record object in between); made
        again whenever the per-slot records are (:meth:`_grow`)."""
        hot, cold = self.st[0], self.st[1]
        self._rate, self._rem, self._t_last = hot["rate"], cold["rem"], cold["t_last"]

    def _release(self, flows: Sequence[Flow], slots: list[int]) -> None:
        flow_of = self.flow_of
        for flow, slot in zip(flows, slots, strict=True):
            flow_of[slot] = None
            flow.slot = -1
        self.free.extend(slots)

    def _pool_room(self, added: int) -> None:
        """Room in the pool for ``added`` more list entries. A call that appends ``a``
        entries to a list of ``n`` moves it to the pool's top in blocks of doubling size,
        at most 8 + 4 (n + a) entries in all; over the lists a call touches (at most
        ``added``), 4 × entries + 12 × added."""
        meta = self.st[8]
        top, entries = meta.item(3), meta.item(4)
        need = 4 * entries + 12 * added + 8
        if top + need <= self.pool_size:
            return
        old, ri, epos = self.st[3], self.st[5], self.st[13]
        non = ri[:, 2]
        cap = np.where(non > 0, np.maximum(non, 4), 0)
        start = np.cumsum(cap) - cap
        # room for ``need`` and for as many entries as there are resources after it, so
        # that this O(resources) compaction comes at most once per O(resources) entries
        # appended (with few live flows on many resources it came at almost every call)
        size = max(self.pool_size, 2 * (int(cap.sum()) + need), int(cap.sum()) + need + non.size)
        pool = np.zeros(size, old.dtype)
        used = np.flatnonzero(non)
        counts = non[used]
        offset = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        at = np.repeat(start[used], counts) + offset
        pool[at] = old[np.repeat(ri[used, 0], counts) + offset]
        epos[pool["slot"][at], pool["k"][at]] = at
        ri[:, 0], ri[:, 1] = start, cap
        meta[3] = int(cap.sum())
        self.pool_size = size
        self.st = (*self.st[:3], pool, *self.st[4:])
        self.tab = self._address()

    def _grow(self, slots: int, width: int) -> None:
        """Room for ``slots`` flows of up to ``width`` resources."""
        old_slots, old_width = self.slots, self.width
        width = max(width, old_width)
        st = self.st
        new = list(self.k.empty_state(self.capacity, slots, width, 1))
        for i in (0, 1, 6, 7):  # per slot: flows, calendar
            new[i][:old_slots] = st[i]
        for i in (2, 13):  # per slot and resource of the flow
            new[i][:old_slots, :old_width] = st[i]
        for i in (3, 4, 5, 8, 9, 10):  # pool, resources, meta, resource scratch
            new[i] = st[i]
        self.st = tuple(new)
        self._fields()
        self.free = list(range(slots - 1, old_slots - 1, -1)) + self.free
        self.flow_of += [None] * (slots - old_slots)
        self.keep = np.concatenate([self.keep, np.zeros(slots - old_slots, dtype=np.bool_)])
        self.latch_of = np.concatenate([self.latch_of, np.full(slots - old_slots, -1)])
        self.entered = np.concatenate([self.entered, np.zeros(slots - old_slots, np.int64)])
        self.due = np.zeros(slots, dtype=np.int64)
        self.when = np.zeros(slots)
        self.quiet = np.zeros(slots, dtype=np.bool_)
        self.slots, self.width = slots, width
        self.tab = self._address()
