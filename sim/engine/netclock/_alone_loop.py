"""The loop of :mod:`sim.engine.netclock.alone`: a group's flows on links no one else
uses, piece by piece, in plain Python that numba compiles unchanged
(:mod:`sim.engine.netclock._alone_jit`).

Only arrays and scalars, no objects, so that the same source runs in both: a run
without numba (or with its JIT disabled) gets the same floats, operation for operation.
The model is the network clock's piece by piece (:class:`~protocols.contract.Flows`,
:mod:`sim.network.flows`): a flow is sent when all it waits for has ended, waits its
route latency unless it continues its stream back to back, then shares its links max-min
fairly with the group's other flows in their bandwidth phase until its bytes are
through, within :data:`REL_EPS` of its size. A flow to or from an absent peer is refused
after the route latency; a preemption fails the flows in flight from or to its peer; a
flow still in flight ``timeout`` seconds after it was sent is cancelled, unless its last
byte arrives at that very instant. Each instant's events go in a fixed order: the ends
of flows that finished at their entry, completions, latency ends, releases, refusals,
timeouts, changes of presence; within each, flows in the order they were sent.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sim.engine.netclock._alone_fill import enter, fill_state, leave, rerate

#: The first 16 hex digits of the SHA-256 of :mod:`sim.engine.netclock._alone_fill`'s source.
#: numba's disk cache of the compiled loop (:mod:`sim.engine.netclock._alone_jit`) is keyed
#: on this file alone, though the loop compiles that module's helpers in: a change there
#: must change this file too (``tests/unit/test_alone_cache_key.py`` fails until it does).
FILL_SOURCE_SHA256 = "43358d045e37d565"

#: A flow whose remaining bytes fall to this fraction of its size counts as complete
#: (:data:`sim.network.maxmin.REL_EPS`; ``tests/property/test_alone_loop.py`` checks they agree).
REL_EPS = 1e-12

# phases of a flow
WAITING, LATENCY, BANDWIDTH, ENDED, REFUSING = 0, 1, 2, 3, 4
# outcomes of a flow
PENDING, DELIVERED, FAILED, TIMED_OUT, REFUSED, BROKEN = 0, 1, 2, 3, 4, 5

# kinds of event, in their order within an instant
_ENTRY_ENDS, _COMPLETIONS, _LATENCY_ENDS, _RELEASES, _REFUSALS, _TIMEOUTS, _PREEMPTIONS = range(7)


def fresh(n: int, t0: float) -> tuple[Any, ...]:
    """The state of a loop over ``n`` flows that starts at ``t0``, as :func:`solve` takes
    and updates it: ``ints`` (3, n) (phase, the flows in flight in send order, the
    queue of flows ending at their entry), ``flags`` (2, n) (broken, vacated), ``floats``
    (6, n) (bytes left, rate, when last advanced, finish, end of the latency or
    refusal, deadline), ``ix`` (the counters: flows in flight, queue head and tail,
    releases and changes taken, flows left, messages, refusals, sends, re-rate due),
    ``fx`` (now, the last end), and the outputs ``sent_at``, ``end_at``, ``outcome``,
    ``moved``, ``seq``."""
    ints = np.zeros((3, n), np.int64)
    ints[0] = WAITING
    floats = np.zeros((6, n))
    floats[5] = math.inf
    ix = np.zeros(10, np.int64)
    ix[5] = n
    return (
        ints, np.zeros((2, n), np.bool_), floats, ix, np.array([t0, math.nan]),
        np.full(n, math.nan), np.full(n, math.nan), np.full(n, PENDING, np.int8),
        np.zeros(n), np.full(n, -1, np.int64),
    )  # fmt: skip


def solve(
    nbytes: Any, lat: Any, res: Any, timeout: Any, pred: Any, waits: Any, opens: Any,
    after_ptr: Any, after_idx: Any, next_piece: Any, behind_ptr: Any, behind_idx: Any,
    gate_left: Any, need: Any, rel_flow: Any, rel_at: Any, cap: Any, src: Any, dst: Any,
    present: Any, fail_at: Any, fail_peer: Any, fail_up: Any, until: float, ints: Any,
    flags: Any, floats: Any, ix: Any, fx: Any, sent_at: Any, end_at: Any, outcome: Any,
    moved: Any, seq: Any,
) -> tuple[float, int, int]:  # fmt: skip
    """Run a group's ``n`` flows on from the state :func:`fresh` made, until every one
    has ended, or until ``until``: a run stopped there goes on, with the same floats, when
    called again with the same state (and changes of presence appended, none before
    the instant it stopped at).

    Inputs, per flow: ``nbytes``, route latency ``lat``, resources ``res`` (n, W) (local
    indices into ``cap``, -1 padded), ``timeout`` (s, inf: none), ``pred`` (the piece it
    continues back to back, -1: none), ``waits`` (its gate, -1: none), ``opens`` (the gate
    it opens, -1: none), ``next_piece`` (the flow whose previous piece it is, -1: none),
    ``src`` and ``dst`` (local peers); the flows after each flow (CSR ``after_ptr``,
    ``after_idx``) and behind each gate (``behind_ptr``, ``behind_idx``), in flow order;
    ``gate_left`` (flows yet to end per gate) and ``need`` (what each flow waits for),
    both updated in place; the roots and flows ready at the start, ``rel_flow`` released
    at ``rel_at`` (absolute, non-decreasing); ``present`` (g,) bool, updated; the
    changes of presence: peer ``fail_peer`` goes down at ``fail_at`` (non-decreasing),
    or comes back where ``fail_up``.

    Outputs, per flow: ``sent_at`` and ``end_at`` (NaN: never), ``outcome``, ``moved``
    bytes, ``seq`` (send order, -1: never sent). Returns (the instant the last flow
    ended, messages sent, messages refused). The loop stops before any instant after
    ``until``: the flows still in flight then have moved what they had by ``until``
    (their outcome pending), and the instant returned is ``inf``. It is NaN when flows
    are left that nothing will release (a plan that never ends).
    """
    n = nbytes.size
    if n == 0:
        return fx[0], 0, 0
    phase, act, zq = ints[0], ints[1], ints[2]
    broken, vacated = flags[0], flags[1]
    rem, rate, t_last, finish, due_at, deadline = (
        floats[0], floats[1], floats[2], floats[3], floats[4], floats[5],
    )  # fmt: skip
    ends, cand = np.empty(n, np.int64), np.empty(n, np.int64)
    relq = np.empty(n + rel_flow.size, np.int64)
    oks = np.empty(n, np.bool_)
    left_r, count_r = np.empty(cap.size), np.empty(cap.size, np.int64)
    # each resource's flows in their bandwidth phase (rebuilt from the state at each call)
    nbw, head = np.zeros(cap.size, np.int64), np.full(cap.size, -1, np.int64)
    nxt, prv = np.empty(n * res.shape[1], np.int64), np.empty(n * res.shape[1], np.int64)
    stamp, epoch = np.zeros(n, np.int64), 0
    fstep, fill, marks, marked, best_at, share_at, nfz, snap_left, snap_count, bucket, s_marked = (
        fill_state(n, cap.size)
    )
    nact, zh, zt, rc, fc = ix[0], ix[1], ix[2], ix[3], ix[4]
    remaining, messages, refused, sent = ix[5], ix[6], ix[7], ix[8]
    dirty = ix[9] != 0
    now, done_at = fx[0], fx[1]
    timed = False  # whether any flow has a timeout (else no deadline to look at)
    for j in range(n):
        if timeout[j] < math.inf:
            timed = True
            break
    n_bw = 0
    for k in range(nact):
        if phase[act[k]] == BANDWIDTH:
            enter(act[k], res, nbw, head, nxt, prv, fstep, marks, marked, fill)
            n_bw += 1
    rh, rt = 0, 0
    while remaining > 0:
        if dirty:
            epoch += 1
            rerate(now, n_bw, epoch, res, cap, rem, rate, t_last, finish, left_r, count_r, nbw,
                   head, nxt, stamp, fstep, fill, marks, marked, best_at, share_at, nfz,
                   snap_left, snap_count, bucket, s_marked)  # fmt: skip
            dirty = False
        # the next instant and the kind of event due then
        kind, t, n_cand = -1, math.inf, 0
        if zh < zt:
            kind, t = _ENTRY_ENDS, now
        else:
            t_bw = t_lat = t_ref = t_to = math.inf
            # the flows still in flight, in send order (``kept`` of them), and those that
            # may complete at t_bw (all that do, in send order): the test below with
            # t_bw so far, no less than the last
            kept = 0
            for k in range(nact):
                i = act[k]
                ph = phase[i]
                if ph == ENDED:
                    continue
                act[kept] = i
                kept += 1
                if ph == BANDWIDTH:
                    f = finish[i]
                    if f <= t_bw:
                        t_bw = f
                        cand[n_cand] = i
                        n_cand += 1
                    elif (f - t_bw) * rate[i] <= REL_EPS * nbytes[i]:
                        cand[n_cand] = i
                        n_cand += 1
                    if timed:
                        t_to = min(t_to, deadline[i])
                elif ph == LATENCY:
                    t_lat = min(t_lat, due_at[i])
                    if timed:
                        t_to = min(t_to, deadline[i])
                elif ph == REFUSING:
                    t_ref = min(t_ref, due_at[i])
            nact = kept
            t_rel = rel_at[rc] if rc < rel_at.size else math.inf
            t_fail = fail_at[fc] if fc < fail_at.size else math.inf
            if t_bw < t:
                kind, t = _COMPLETIONS, t_bw
            if t_lat < t:
                kind, t = _LATENCY_ENDS, t_lat
            if t_rel < t:
                kind, t = _RELEASES, t_rel
            if t_ref < t:
                kind, t = _REFUSALS, t_ref
            if t_to < t:
                kind, t = _TIMEOUTS, t_to
            if t_fail < t:
                kind, t = _PREEMPTIONS, t_fail
        if kind < 0:
            return math.nan, messages, refused  # waiting for what never comes
        if t > until:  # what the flows in flight have moved by then
            for k in range(nact):
                i = act[k]
                if phase[i] == BANDWIDTH:
                    moved[i] = min(nbytes[i] - rem[i] + rate[i] * (until - t_last[i]), nbytes[i])
            ix[0], ix[1], ix[2], ix[3], ix[4] = nact, zh, zt, rc, fc
            ix[5], ix[6], ix[7], ix[8], ix[9] = remaining, messages, refused, sent, dirty
            fx[0], fx[1] = now, done_at
            return math.inf, messages, refused
        now = t
        # the flows that end at this event, in order (ends, oks)
        ne = 0
        if kind == _ENTRY_ENDS:
            while zh < zt:
                ends[ne], oks[ne] = zq[zh], True
                ne += 1
                zh += 1
            zh = zt = 0
        elif kind == _COMPLETIONS:
            for c in range(n_cand):
                i = cand[c]
                if phase[i] == BANDWIDTH and (
                    finish[i] <= now or (finish[i] - now) * rate[i] <= REL_EPS * nbytes[i]
                ):
                    m = ne  # in (finish, send order) order: act is in send order
                    while m > 0 and finish[ends[m - 1]] > finish[i]:
                        ends[m] = ends[m - 1]
                        m -= 1
                    ends[m] = i
                    ne += 1
            for m in range(ne):
                i = ends[m]
                oks[m] = True
                leave(i, res, nbw, head, nxt, prv, marks, marked, fill)
                n_bw -= 1
                phase[i] = ENDED
                end_at[i] = now
                outcome[i] = DELIVERED
                moved[i] = nbytes[i]
                vacated[i] = True  # until the piece that continues it takes its place
        elif kind == _LATENCY_ENDS:
            for k in range(nact):
                i = act[k]
                if phase[i] == LATENCY and due_at[i] == now:
                    if nbytes[i] == 0.0 or res[i, 0] < 0:
                        phase[i] = ENDED
                        end_at[i] = now
                        outcome[i] = DELIVERED
                        zq[zt] = i
                        zt += 1
                    else:
                        phase[i] = BANDWIDTH
                        enter(i, res, nbw, head, nxt, prv, fstep, marks, marked, fill)
                        n_bw += 1
                        rem[i], rate[i], t_last[i], finish[i] = nbytes[i], 0.0, now, math.inf
                        dirty = True
        elif kind == _RELEASES:
            while rc < rel_at.size and rel_at[rc] == now:
                relq[rt] = rel_flow[rc]
                rt += 1
                rc += 1
        elif kind == _REFUSALS:
            for k in range(nact):
                i = act[k]
                if phase[i] == REFUSING and due_at[i] == now:
                    phase[i] = ENDED
                    end_at[i] = now
                    outcome[i] = REFUSED
                    ends[ne], oks[ne] = i, False
                    ne += 1
        elif kind == _TIMEOUTS:
            for k in range(nact):
                i = act[k]
                ph = phase[i]
                if LATENCY <= ph <= BANDWIDTH and deadline[i] == now:  # in flight
                    deadline[i] = math.inf
                    if ph == BANDWIDTH:
                        through = nbytes[i] - rem[i] + rate[i] * (now - t_last[i])
                        if nbytes[i] - through <= REL_EPS * nbytes[i]:
                            continue  # its last byte arrives now: in time
                        moved[i] = nbytes[i] - max(rem[i] - rate[i] * (now - t_last[i]), 0.0)
                        dirty = True
                        leave(i, res, nbw, head, nxt, prv, marks, marked, fill)
                        n_bw -= 1
                    phase[i] = ENDED
                    end_at[i] = now
                    outcome[i] = TIMED_OUT
                    ends[ne], oks[ne] = i, False
                    ne += 1
        else:  # a change of presence; a preemption fails the peer's flows in flight
            p = fail_peer[fc]
            up = fail_up[fc]
            fc += 1
            present[p] = up
            for k in range(0 if up else nact):
                i = act[k]
                ph = phase[i]
                if LATENCY <= ph <= BANDWIDTH and (src[i] == p or dst[i] == p):
                    if ph == BANDWIDTH:
                        moved[i] = nbytes[i] - max(rem[i] - rate[i] * (now - t_last[i]), 0.0)
                        dirty = True
                        leave(i, res, nbw, head, nxt, prv, marks, marked, fill)
                        n_bw -= 1
                    phase[i] = ENDED
                    end_at[i] = now
                    outcome[i] = FAILED
                    ends[ne], oks[ne] = i, False
                    ne += 1
        # each end in order, then what it releases (a broken flow ends at once, unsent)
        e, x, ok = 0, -1, True
        while True:
            if x < 0 and rh == rt:
                if e == ne:
                    break
                x, ok = ends[e], oks[e]
                e += 1
            if x >= 0:  # flow x ended: count it, release what waited for it
                remaining -= 1
                if remaining == 0:
                    done_at = now
                g = opens[x]
                if g >= 0:
                    gate_left[g] -= 1
                    if gate_left[g] == 0:
                        for b in range(behind_ptr[g], behind_ptr[g + 1]):
                            j = behind_idx[b]
                            need[j] -= 1
                            if need[j] == 0:
                                relq[rt] = j
                                rt += 1
                for a in range(after_ptr[x], after_ptr[x + 1]):
                    if not ok:
                        broken[after_idx[a]] = True
                for a in range(after_ptr[x], after_ptr[x + 1]):
                    j = after_idx[a]
                    need[j] -= 1
                    if need[j] == 0:
                        relq[rt] = j
                        rt += 1
                j = next_piece[x]
                if j >= 0:
                    if not ok:
                        broken[j] = True
                    need[j] -= 1
                    if need[j] == 0:
                        relq[rt] = j
                        rt += 1
                x = -1
                continue
            j = relq[rh]
            rh += 1
            if rh == rt:
                rh = rt = 0
            if broken[j]:
                phase[j] = ENDED
                end_at[j] = now
                outcome[j] = BROKEN
                x, ok = j, False
                continue
            # send flow j now
            seq[j] = sent
            sent += 1
            messages += 1
            sent_at[j] = now
            act[nact] = j
            nact += 1
            if not (present[src[j]] and present[dst[j]]):
                refused += 1
                phase[j] = REFUSING
                due_at[j] = now + lat[j]
                continue
            if timeout[j] < math.inf:
                deadline[j] = now + timeout[j]
            p = pred[j]
            back = p >= 0 and (waits[j] < 0 or (outcome[p] == DELIVERED and end_at[p] == now))
            if not back and lat[j] > 0.0:
                phase[j] = LATENCY
                due_at[j] = now + lat[j]
            elif nbytes[j] == 0.0 or res[j, 0] < 0:
                phase[j] = ENDED
                end_at[j] = now
                outcome[j] = DELIVERED
                zq[zt] = j
                zt += 1
            elif back and vacated[p] and src[p] == src[j] and dst[p] == dst[j]:
                # it takes the place on the same links of its stream's piece that has just
                # completed: every flow's fair share is unchanged, so no re-rate, and it
                # gets its predecessor's rate
                vacated[p] = False
                phase[j] = BANDWIDTH
                enter(j, res, nbw, head, nxt, prv, fstep, marks, marked, fill)
                n_bw += 1
                rem[j], rate[j], t_last[j] = nbytes[j], rate[p], now
                finish[j] = now + nbytes[j] / rate[p]
            else:
                phase[j] = BANDWIDTH
                enter(j, res, nbw, head, nxt, prv, fstep, marks, marked, fill)
                n_bw += 1
                rem[j], rate[j], t_last[j], finish[j] = nbytes[j], 0.0, now, math.inf
                dirty = True
        if kind == _COMPLETIONS:
            for m in range(ne):
                if vacated[ends[m]]:  # a place left empty: the others' shares change
                    vacated[ends[m]] = False
                    dirty = True
    ix[0], ix[1], ix[2], ix[3], ix[4] = nact, zh, zt, rc, fc
    ix[5], ix[6], ix[7], ix[8], ix[9] = remaining, messages, refused, sent, dirty
    fx[0], fx[1] = now, done_at
    return done_at, messages, refused
