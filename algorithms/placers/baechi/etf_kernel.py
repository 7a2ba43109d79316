"""m-ETF's and m-SCT's list scheduling compiled with numba (issue 22): the pair queues of `pair_queue.PairQueue`
and `sct_queue.SCTQueue` and the placement-time model of `exec_model.ExecModel` (parallel communication) over
arrays, for graphs of 10^5-10^6 ops.

What it computes.  Exactly what ``PairQueue(ExecModel(...)).run()`` computes for m-ETF in a
``parallel``-communication cluster (Baechi 2.3 with the execution model of 4.2, colocation groups co-adjusted as
in 3.1): the same pairs in the same order, the same estimates, memory checks, refusals (parked or dropped
pairs, `GroupOverflow`, `InfeasiblePlacement` with the same messages), the same start and end times and the
same per-device peaks, bit for bit.  It is a port, line for line, of those classes' parallel-mode code paths;
their docstrings describe the algorithm, and the Python classes stay the reference implementation (and the
only one for ``sequential`` mode, whose re-timing replays are not ported).  `tests/test_etf_kernel.py` compares
the two on random graphs with colocation groups, tight memory and banned pairs.

m-SCT (`run_sct`, Baechi 2.4) is the same kernel (`etf_run` with ``sct``): everything but the choice of the next
pair and what a refusal does is shared.  Its per-device heaps are `SCTQueue`'s four: the pairs waiting for
their data, and the released ones by class (favourite child on its parent's device, urgent, others;
`_sct_head`); a chosen favourite child's pair may be held back for its parent's device (`_prefers_parent`),
and a refusal may exclude the device (`SCTQueue._no_fit`).  `tests/test_sct_kernel.py` compares it with
`SCTQueue` the same way, with random favourite children and both exclusion rules.

How the state maps to arrays (V ops, D devices):

* ``dev``, ``start``, ``end``, ``slot_of``, ``gen``, ``ready``, ``left`` (unplaced inputs), ``left_cons``
  (unplaced consumers): one entry per op, as in the classes.
* ``arr[j, p]`` the arrival of j's output on device p (NaN: no transfer; the dict ``ExecModel.arr[j]``),
  ``ce_t[j, p]`` / ``ce_k[j, p]`` the end and slot of j's last consumer on p (``ExecModel.cons_end``).
* Per device: the pair heap (data ready, op, generation) as three arrays, and the `DeviceMemory` of the device
  (slot starts and values, block maxima, the pending frees' heap, level, persistent bytes, bytes ever
  allocated).  The two heaps use CPython's `heapq` algorithm exactly (same sift order), because the sum of the
  pending frees up to a time (`DeviceMemory._pending_upto`) reads the heap in its array order, and a float sum
  depends on the order of its terms.  (That sum, like ``sum`` of the Python classes, adds left to right; the
  classes rely on Python 3.11's plain ``sum``: Python 3.12 compensates its float sums, which could differ in
  the last bit.)
* The allocation events of every device in one table (time, kind, seq, bytes, device); the exact peak sorts
  them per device as `DeviceMemory.exact_peak` does.

Exact mode.  A suffix add (a free reaching back to an early slot) costs the slots it reaches, O(V / D) at
worst, as in `DeviceMemory`; at 10^5-10^6 ops those adds are most of the work.  When every byte count is an
integer and their total is far below 2**53, every sum of them is exact in float64 whatever the order of its
terms, so the kernel may add in another order and still get the classes' values bit for bit: it then records
suffix adds in a difference array, O(1) each, and applies them (prefix sums) only when the slots are read (a
memory check that the quick bound does not settle, and the peaks at the end; `_settle`).  Other graphs use the
classes' slice adds.

Fixed-size tables.  The heaps' and the pending frees' capacities are guessed; a run that outgrows one stops
with ``_OVERFLOW`` and is run again with twice the room (no result of a stopped run is used).

Complexity: the classes' (O((V D + R)(log(V D) + d)) plus the memory checks), at about 1-2 us per op instead
of 50-70 us.  The first call compiles the kernel (several seconds) and caches it on disk (numba
``cache=True``, under ``__pycache__``); later processes load it in well under a second.
"""

from __future__ import annotations

import logging
from itertools import chain
from typing import NamedTuple

import numpy as np
from numba import njit

from ...errors import ConfigError, InfeasiblePlacement
from ...sim_kernel import index_arrays
from .device_memory import _B
from .exec_model import ExecModel
from .pair_queue import GroupOverflow
from .sct_queue import EXCLUSIONS

log = logging.getLogger(__name__)

#: First size of the pair heaps and pending-free heaps per device (None: V + 64 and V / D + 64); tests set it
#: small to exercise the re-runs with more room.
FIRST_ROOM: int | None = None

# statuses of `etf_run`
OK = 0
INFEASIBLE = 1  # an op has no usable pair left (`ExecModel.infeasible`); op in out[1]
GROUP_REFUSED = 2  # a pinned group's member exhausts its device (`PairQueue._refused`); op, group, device, need
GROUP_STUCK = 3  # nothing placeable left, a pinned group's member waits (`PairQueue._stuck`)
NOTHING_READY = 4  # nothing placeable left and no ready op waits (`PairQueue._stuck`'s first case)
_NONE = 2**62  # `_settle`'s earliest slot added to, when none is
OVERFLOW = 9  # a fixed-size table is full: run again with more room (out[1]: 0 pair heap, 1 pending frees)


# ----------------------------------------------------------------- heaps (CPython's heapq, on arrays)
@njit(cache=True)
def _lt3(d0, o0, g0, d1, o1, g1):
    return d0 < d1 or (d0 == d1 and (o0 < o1 or (o0 == o1 and g0 < g1)))


@njit(cache=True)
def _hsiftdown(hd, ho, hg, p, pos, d, o, g):
    while pos > 0:
        par = (pos - 1) >> 1
        if _lt3(d, o, g, hd[p, par], ho[p, par], hg[p, par]):
            hd[p, pos] = hd[p, par]
            ho[p, pos] = ho[p, par]
            hg[p, pos] = hg[p, par]
            pos = par
        else:
            break
    hd[p, pos] = d
    ho[p, pos] = o
    hg[p, pos] = g


@njit(cache=True)
def _hsiftup(hd, ho, hg, p, end):
    """heapq._siftup(heap, 0) for a heap of `end` entries whose root was just overwritten."""
    d, o, g = hd[p, 0], ho[p, 0], hg[p, 0]
    pos = 0
    child = 1
    while child < end:
        right = child + 1
        if right < end and not _lt3(hd[p, child], ho[p, child], hg[p, child], hd[p, right], ho[p, right], hg[p, right]):
            child = right
        hd[p, pos] = hd[p, child]
        ho[p, pos] = ho[p, child]
        hg[p, pos] = hg[p, child]
        pos = child
        child = 2 * pos + 1
    _hsiftdown(hd, ho, hg, p, pos, d, o, g)


@njit(cache=True)
def _hpush(hd, ho, hg, hn, p, d, o, g):
    """heapq.heappush; False when device p's heap is full."""
    pos = hn[p]
    if pos >= hd.shape[1]:
        return False
    hn[p] = pos + 1
    _hsiftdown(hd, ho, hg, p, pos, d, o, g)
    return True


@njit(cache=True)
def _hpop(hd, ho, hg, hn, p):
    last = hn[p] - 1
    hn[p] = last
    if last > 0:
        hd[p, 0] = hd[p, last]
        ho[p, 0] = ho[p, last]
        hg[p, 0] = hg[p, last]
        _hsiftup(hd, ho, hg, p, last)


@njit(cache=True)
def _hreplace(hd, ho, hg, hn, p, d, o, g):
    hd[p, 0] = d
    ho[p, 0] = o
    hg[p, 0] = g
    _hsiftup(hd, ho, hg, p, hn[p])


@njit(cache=True)
def _lt2(t0, b0, t1, b1):
    return t0 < t1 or (t0 == t1 and b0 < b1)


@njit(cache=True)
def _psiftdown(pt, pb, p, pos, t, b):
    while pos > 0:
        par = (pos - 1) >> 1
        if _lt2(t, b, pt[p, par], pb[p, par]):
            pt[p, pos] = pt[p, par]
            pb[p, pos] = pb[p, par]
            pos = par
        else:
            break
    pt[p, pos] = t
    pb[p, pos] = b


@njit(cache=True)
def _ppush(pt, pb, pn, p, t, b):
    pos = pn[p]
    if pos >= pt.shape[1]:
        return False
    pn[p] = pos + 1
    _psiftdown(pt, pb, p, pos, t, b)
    return True


@njit(cache=True)
def _ppop(pt, pb, pn, p):
    """heapq.heappop of device p's pending frees; returns the bytes of the entry popped."""
    last = pn[p] - 1
    pn[p] = last
    lt, lb = pt[p, last], pb[p, last]
    if last == 0:
        return lb
    rb = pb[p, 0]
    pos = 0
    child = 1
    while child < last:
        right = child + 1
        if right < last and not _lt2(pt[p, child], pb[p, child], pt[p, right], pb[p, right]):
            child = right
        pt[p, pos] = pt[p, child]
        pb[p, pos] = pb[p, child]
        pos = child
        child = 2 * pos + 1
    _psiftdown(pt, pb, p, pos, lt, lb)
    return rb


# ----------------------------------------------------------------- DeviceMemory, per device p
@njit(cache=True)
def _slot(starts, mn, p, t):
    n = mn[p]
    if t >= starts[p, n - 1]:
        return n - 1
    lo, hi = 0, n
    while lo < hi:  # bisect_right
        mid = (lo + hi) // 2
        if t < starts[p, mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo - 1


@njit(cache=True)
def _vmax(val, p, a, c):
    row = val[p]
    m = row[a]
    for i in range(a + 1, c):
        if row[i] > m:
            m = row[i]
    return m


@njit(cache=True)
def _range_max(val, bmax, fullmax, hasfm, mn, p, a, c):
    if c - a <= 2 * _B:
        return _vmax(val, p, a, c)
    if a == 0 and c == mn[p]:
        full = c // _B
        if not hasfm[p]:
            fullmax[p] = _vmax(bmax, p, 0, full)
            hasfm[p] = True
        fm = fullmax[p]
        if full * _B == c:
            return fm
        mt = _vmax(val, p, full * _B, c)
        return mt if mt > fm else fm
    ba, bc = a // _B, (c - 1) // _B
    m = _vmax(val, p, a, (ba + 1) * _B)
    if bc > ba + 1:
        mb = _vmax(bmax, p, ba + 1, bc)
        if mb > m:
            m = mb
    mt = _vmax(val, p, bc * _B, c)
    return mt if mt > m else m


@njit(cache=True)
def _suffix_add(mem, p, k, b):
    """Add b to slots k..n-1 of device p (`DeviceMemory._suffix_add`).  Exact mode (module docstring): recorded
    in the difference array and applied by `_settle` before the slots are read."""
    val, bmax, hasfm, mn, diff, dmin, ptot, exact = mem[1], mem[2], mem[4], mem[5], mem[11], mem[12], mem[13], mem[14]
    n = mn[p]
    if k >= n:
        return
    if k == n - 1 and n % _B:
        val[p, k] += b
        return
    if exact[0]:
        diff[p, k] += b
        ptot[p] += b
        if k < dmin[p]:
            dmin[p] = k
        return
    row = val[p]
    row[k:n] += b  # the same float64 additions as the numpy slice's
    bk, full = k // _B, n // _B
    if bk >= full:
        return
    hasfm[p] = False
    if k % _B:
        bmax[p, bk] = _vmax(val, p, bk * _B, (bk + 1) * _B)
        bk += 1
    for i in range(bk, full):
        bmax[p, i] += b


@njit(cache=True)
def _settle(mem, p):
    """Exact mode: apply the recorded suffix adds of device p to its slots (prefix sums of the difference
    array) and recompute the maxima of the full blocks they reach. O(slots since the earliest one added to)."""
    val, bmax, hasfm, mn, diff, dmin, ptot = mem[1], mem[2], mem[4], mem[5], mem[11], mem[12], mem[13]
    k0 = dmin[p]
    n = mn[p]
    if k0 >= n:
        return
    acc = 0.0
    for i in range(k0, n):
        acc += diff[p, i]
        diff[p, i] = 0.0
        val[p, i] += acc
    for bk in range(k0 // _B, n // _B):
        bmax[p, bk] = _vmax(val, p, bk * _B, (bk + 1) * _B)
    hasfm[p] = False
    dmin[p] = _NONE
    ptot[p] = 0.0


@njit(cache=True)
def _pending_upto(pt, pb, pn, p, s):
    acc = 0.0
    for i in range(pn[p]):
        if pt[p, i] <= s:
            acc += pb[p, i]
    return acc


@njit(cache=True)
def _bound_if(mem, p, s, persist, at_start, cp_a, cp_b, ncp, rel_k, rel_b, pk, pb_):
    """`DeviceMemory.bound_if`: copies (cp_a[:ncp] arrivals, cp_b bytes); rel_k < 0: no release."""
    starts, val, bmax, fullmax, hasfm, mn, level, mpers, pt, pbb, pn = mem[:11]
    _settle(mem, p)
    new = level[p] - _pending_upto(pt, pbb, pn, p, s) + at_start
    npts = 0
    for i in range(ncp):
        new += cp_b[i]
        pk[npts] = _slot(starts, mn, p, cp_a[i])
        pb_[npts] = cp_b[i]
        npts += 1
    if rel_k >= 0 and rel_b != 0.0:
        new -= rel_b
        pk[npts] = rel_k
        pb_[npts] = -rel_b
        npts += 1
    best = new
    n = mn[p]
    if npts == 0:
        m = _range_max(val, bmax, fullmax, hasfm, mn, p, 0, n)
        return mpers[p] + persist + (m if m > best else best)
    for i in range(1, npts):  # insertion sort of the (slot, bytes) points, as sorted() orders the tuples
        k, b = pk[i], pb_[i]
        j = i - 1
        while j >= 0 and (pk[j] > k or (pk[j] == k and pb_[j] > b)):
            pk[j + 1] = pk[j]
            pb_[j + 1] = pb_[j]
            j -= 1
        pk[j + 1] = k
        pb_[j + 1] = b
    k0, add = 0, 0.0
    for i in range(npts):
        k = pk[i]
        if k > k0:
            m = _range_max(val, bmax, fullmax, hasfm, mn, p, k0, k) + add
            if m > best:
                best = m
            k0 = k
        add += pb_[i]
    if k0 < n:
        m = _range_max(val, bmax, fullmax, hasfm, mn, p, k0, n) + add
        if m > best:
            best = m
    return mpers[p] + persist + best


@njit(cache=True)
def _open_slot(mem, p, s):
    starts, val, bmax, fullmax, hasfm, mn, level, mpers, pt, pb, pn = mem[:11]
    diff, dmin, ptot = mem[11], mem[12], mem[13]
    while pn[p] > 0 and pt[p, 0] <= s:
        level[p] -= _ppop(pt, pb, pn, p)
    n = mn[p]
    val[p, n] = level[p]
    if dmin[p] < n:  # exact mode, adds recorded: none of them reaches the new slot
        diff[p, n] = -ptot[p]
        ptot[p] = 0.0
        if (n + 1) % _B == 0:  # its block's maximum is computed when the adds are applied (`_settle`)
            hasfm[p] = False
    elif (n + 1) % _B == 0:
        m = _vmax(val, p, n + 1 - _B, n + 1)
        bmax[p, n // _B] = m
        if hasfm[p] and m > fullmax[p]:
            fullmax[p] = m
    starts[p, n] = s
    mn[p] = n + 1
    return n


@njit(cache=True)
def _event(ev_t, ev_k, ev_s, ev_b, ev_d, ne, t, k, s, b, p):
    i = ne[0]
    ev_t[i] = t
    ev_k[i] = k
    ev_s[i] = s
    ev_b[i] = b
    ev_d[i] = p
    ne[0] = i + 1


@njit(cache=True)
def _alloc(mem, ev, alloc_total, p, t, b, real, seq):
    if b == 0.0:
        return
    starts, val, mn, level = mem[0], mem[1], mem[5], mem[6]
    n = mn[p]
    if t >= starts[p, n - 1] and n % _B:
        val[p, n - 1] += b
    else:
        _suffix_add(mem, p, _slot(starts, mn, p, t), b)
    level[p] += b
    alloc_total[p] += b
    if real:
        ev_t, ev_k, ev_s, ev_b, ev_d, ne = ev
        _event(ev_t, ev_k, ev_s, ev_b, ev_d, ne, t, 1, seq, b, p)


@njit(cache=True)
def _free(mem, ev, p, t, b, since, seq):
    """`DeviceMemory.free` (always a real event here); False when the pending heap is full."""
    if b == 0.0:
        return True
    starts, mn, level, pt, pb, pn = mem[0], mem[5], mem[6], mem[8], mem[9], mem[10]
    ev_t, ev_k, ev_s, ev_b, ev_d, ne = ev
    if since >= t:
        _event(ev_t, ev_k, ev_s, ev_b, ev_d, ne, t, 1, seq, -b, p)
    else:
        _event(ev_t, ev_k, ev_s, ev_b, ev_d, ne, t, 0, 0, -b, p)
    k = _slot(starts, mn, p, t)
    if k >= mn[p] - 1:
        return _ppush(pt, pb, pn, p, t, b)
    _suffix_add(mem, p, k + 1, -b)
    level[p] -= b
    return True


@njit(cache=True)
def _release(mem, p, k, b):
    if b == 0.0:
        return
    level = mem[6]
    _suffix_add(mem, p, k, -b)
    level[p] -= b


# ----------------------------------------------------------------- the list scheduling
@njit(cache=True)
def _usable(o, p, gid, group_dev, banned, dropped, excluded):
    """`PairQueue.usable` (`SCTQueue.usable` with its excluded devices; m-ETF excludes none)."""
    g = gid[o]
    if g >= 0:
        if group_dev[g] >= 0:  # a pinned group still goes to its device, excluded or not
            return p == group_dev[g]
        if excluded[p] or banned[g, p]:
            return False
    elif excluded[p]:
        return False
    return not dropped[o, p]


@njit(cache=True)
def _data_ready(o, p, pred_ptr, pred_j, pred_b, dev, end, arr, lat, bw, ntens):
    dr = 0.0
    for e in range(pred_ptr[o], pred_ptr[o + 1]):
        j = pred_j[e]
        q = dev[j]
        if q == p:
            a = end[j]
        else:
            a = end[j] + (lat[q, p] * ntens[j] + pred_b[e] / bw[q, p])
            ex = arr[j, p]
            if not np.isnan(ex) and ex >= a:
                a = ex
        if a > dr:
            dr = a
    return dr


@njit(cache=True)
def _alive(o, allowed, gid, group_dev, banned, dropped, excluded):
    """`PairQueue.check_alive`: whether op o has a usable pair left."""
    for p in range(allowed.shape[1]):
        if allowed[o, p] and _usable(o, p, gid, group_dev, banned, dropped, excluded):
            return True
    return False


@njit(cache=True)
def _push_all(
    o,
    hd,
    ho,
    hg,
    hn,
    gen,
    allowed,
    gid,
    group_dev,
    banned,
    dropped,
    excluded,
    parked_pairs,
    pred_ptr,
    pred_j,
    pred_b,
    dev,
    end,
    arr,
    lat,
    bw,
    ntens,
):
    """`PairQueue.push_all`: queue every usable, unparked pair of o; False when a heap is full."""
    for p in range(allowed.shape[1]):
        if allowed[o, p] and _usable(o, p, gid, group_dev, banned, dropped, excluded) and not parked_pairs[o, p]:
            d = _data_ready(o, p, pred_ptr, pred_j, pred_b, dev, end, arr, lat, bw, ntens)
            if not _hpush(hd, ho, hg, hn, p, d, o, gen[o]):
                return False
    return True


@njit(cache=True)
def _data_ready_anywhere(o, pred_ptr, pred_j, pred_b, dev, end, lat, bw, ntens):
    """`ExecModel.data_ready_anywhere`: when o's inputs could be on every device (m-SCT's urgency)."""
    D = lat.shape[0]
    t = 0.0
    for e in range(pred_ptr[o], pred_ptr[o + 1]):
        j = pred_j[e]
        q = dev[j]
        worst = 0.0
        for p in range(D):
            if p != q:
                c = lat[q, p] * ntens[j] + pred_b[e] / bw[q, p]
                if c > worst:
                    worst = c
        a = end[j] + worst
        if a > t:
            t = a
    return t


@njit(cache=True)
def _sct_head(p, av, hd, ho, hg, hn, dev, gen, fav, urgent_at, gid, group_dev, banned, dropped, excluded):
    """`SCTQueue._head`: device p's best pair as (time, class, op, heap row); op -1: none, -2: a heap is full.
    Rows: p the pairs waiting for their data (data ready, op, gen); D + p, 2 D + p, 3 D + p the released
    pairs of classes 0 and 1 (0, op, gen: ordered as the classes' (op, gen)) and 2 (urgent time, op, gen)."""
    D = hn.shape[0] // 4
    pr, fr, ur, nr = p, D + p, 2 * D + p, 3 * D + p
    while hn[pr] and hd[pr, 0] <= av:
        o, g = ho[pr, 0], hg[pr, 0]
        _hpop(hd, ho, hg, hn, pr)
        if not (dev[o] < 0 and g == gen[o] and _usable(o, p, gid, group_dev, banned, dropped, excluded)):
            continue
        f = fav[o]
        if f >= 0 and dev[f] == p:
            ok = _hpush(hd, ho, hg, hn, fr, 0.0, o, g)
        elif urgent_at[o] <= av:
            ok = _hpush(hd, ho, hg, hn, ur, 0.0, o, g)
        else:
            ok = _hpush(hd, ho, hg, hn, nr, urgent_at[o], o, g)
        if not ok:
            return 0.0, 0, -2, 0
    while hn[nr] and hd[nr, 0] <= av:
        o, g = ho[nr, 0], hg[nr, 0]
        _hpop(hd, ho, hg, hn, nr)
        if not _hpush(hd, ho, hg, hn, ur, 0.0, o, g):
            return 0.0, 0, -2, 0
    for c in range(3):  # among released pairs a lower class wins
        row = (c + 1) * D + p
        while hn[row]:
            o = ho[row, 0]
            if dev[o] < 0 and hg[row, 0] == gen[o] and _usable(o, p, gid, group_dev, banned, dropped, excluded):
                return av, c, o, row
            _hpop(hd, ho, hg, hn, row)
    while hn[pr]:
        o = ho[pr, 0]
        if dev[o] < 0 and hg[pr, 0] == gen[o] and _usable(o, p, gid, group_dev, banned, dropped, excluded):
            break
        _hpop(hd, ho, hg, hn, pr)
    if hn[pr] == 0:
        return 0.0, 0, -1, 0
    d, o = hd[pr, 0], ho[pr, 0]
    f = fav[o]
    c = 0 if (f >= 0 and dev[f] == p) else (1 if d >= urgent_at[o] else 2)
    return d, c, o, pr


@njit(cache=True)
def etf_run(
    # graph and cluster
    pred_ptr,
    pred_j,
    pred_b,
    succ_ptr,
    succ_k,
    dur,
    persist,
    temp,
    out,
    copyb,
    ntens,
    lat,
    bw,
    allowed,
    gid,
    mem_ptr,
    mem_ops,
    group_persist,
    group_share,
    share,
    limit,
    banned,
    memory_aware,
    # m-SCT (`SCTQueue`); m-ETF: sct False
    sct,
    fav,
    fav_bytes,
    exclude_full,
    excl_refusal,
    # state (filled in)
    dev,
    start,
    end,
    slot_of,
    avail,
    group_dev,
    group_slot,
    arr,
    ce_t,
    ce_k,
    log,
    tried,
    mem,
    alloc_total,
    ev,
    hd,
    ho,
    hg,
    res,
    excluded,
):
    """The list scheduling of `PairQueue.run` (``sct`` False) or `SCTQueue.run` (``sct`` True; favourite parents
    ``fav``, -1: none) with `ExecModel` (parallel mode) on arrays (module docstring).  Returns a status; ``res``
    receives (op, group, device, need, n_dropped, n_parked, n_reestimated, n_placed, n_held_back); ``excluded``
    the devices m-SCT excluded.  The heaps have D rows (m-ETF) or 4 D rows (m-SCT: the pairs waiting for their
    data, then the released ones of classes 0, 1 and 2; `_sct_head`)."""
    n = dur.shape[0]
    D = dur.shape[1]
    urgent_at = np.zeros(n if sct else 0, np.float64)  # `SCTQueue.urgent_at`
    held_until = np.full((n if sct else 0, D), -1.0)  # `SCTQueue.held_until`
    n_held = 0
    mpers = mem[7]
    gen = np.zeros(n, np.int64)
    ready = np.zeros(n, np.bool_)
    left = np.empty(n, np.int64)
    left_cons = np.empty(n, np.int64)
    for o in range(n):
        left[o] = pred_ptr[o + 1] - pred_ptr[o]
        left_cons[o] = succ_ptr[o + 1] - succ_ptr[o]
    dropped = np.zeros((n, D), np.bool_)
    parked_pairs = np.zeros((n, D), np.bool_)
    n_parked_now = 0
    parked = np.empty((D, n), np.int32)
    plen = np.zeros(D, np.int64)
    parked_at = np.zeros(D, np.int64)
    version = np.zeros(D, np.int64)
    hn = np.zeros(hd.shape[0], np.int64)
    maxdeg = 1
    for o in range(n):
        if pred_ptr[o + 1] - pred_ptr[o] > maxdeg:
            maxdeg = pred_ptr[o + 1] - pred_ptr[o]
    cp_a = np.empty(maxdeg, np.float64)  # the estimate's new transfers: producer, arrival
    cp_j = np.empty(maxdeg, np.int64)
    ex_a = np.empty(maxdeg, np.float64)  # its extensions of cached transfers
    ex_j = np.empty(maxdeg, np.int64)
    cp_b = np.empty(maxdeg, np.float64)  # bytes of the new copies
    pk = np.empty(maxdeg + 1, np.int64)  # scratch of `_bound_if`
    pbs = np.empty(maxdeg + 1, np.float64)
    stack = np.empty(n, np.int64)  # ops becoming ready, in the order the classes make them ready
    n_placed = 0
    n_parked = 0
    n_dropped = 0
    n_reest = 0
    first_of_group = False
    need = 0.0

    # ready ops: `make_ready` (check_alive, push_all) for sources, in index order
    ns = 0
    for o in range(n):
        if left[o] == 0:
            stack[ns] = o
            ns += 1
    while True:
        # --- make the ops in stack[:ns] ready, in order
        for si in range(ns):
            o = stack[si]
            ready[o] = True
            if sct:
                urgent_at[o] = _data_ready_anywhere(o, pred_ptr, pred_j, pred_b, dev, end, lat, bw, ntens)
            if not _alive(o, allowed, gid, group_dev, banned, dropped, excluded):
                res[0] = o
                return INFEASIBLE
            if not _push_all(
                o,
                hd,
                ho,
                hg,
                hn,
                gen,
                allowed,
                gid,
                group_dev,
                banned,
                dropped,
                excluded,
                parked_pairs,
                pred_ptr,
                pred_j,
                pred_b,
                dev,
                end,
                arr,
                lat,
                bw,
                ntens,
            ):
                res[1] = 0
                return OVERFLOW
        ns = 0
        # --- unpark (after a placement; a no-op at the start)
        if n_parked_now:
            for p in range(D):
                if plen[p] and version[p] != parked_at[p]:
                    cnt = plen[p]
                    plen[p] = 0
                    for i in range(cnt):
                        o = parked[p, i]
                        parked_pairs[o, p] = False
                        n_parked_now -= 1
                        if dev[o] < 0 and _usable(o, p, gid, group_dev, banned, dropped, excluded):
                            d = _data_ready(o, p, pred_ptr, pred_j, pred_b, dev, end, arr, lat, bw, ntens)
                            if not _hpush(hd, ho, hg, hn, p, d, o, gen[o]):
                                res[1] = 0
                                return OVERFLOW
        # --- the loop of `PairQueue._loop` up to the next placement
        placed = -1
        while placed < 0:
            bs, bd, bo, bp = 0.0, 0.0, -1, -1
            bc, brow = 0, 0
            for p in range(D):
                if sct:  # `SCTQueue._loop`: the best head by (time, class, op, device)
                    t, c, o, row = _sct_head(
                        p, avail[p], hd, ho, hg, hn, dev, gen, fav, urgent_at, gid, group_dev, banned, dropped, excluded
                    )
                    if o == -2:
                        res[1] = 0
                        return OVERFLOW
                    if o >= 0 and (
                        bo < 0 or t < bs or (t == bs and (c < bc or (c == bc and (o < bo or (o == bo and p < bp)))))
                    ):
                        bs, bc, bo, bp, brow = t, c, o, p, row
                    continue
                while hn[p]:
                    o = ho[p, 0]
                    if (
                        dev[o] >= 0
                        or hg[p, 0] != gen[o]
                        or not _usable(o, p, gid, group_dev, banned, dropped, excluded)
                    ):
                        _hpop(hd, ho, hg, hn, p)
                        continue
                    break
                if hn[p] == 0:
                    continue
                d, o = hd[p, 0], ho[p, 0]
                av = avail[p]
                s = av if av > d else d
                if bo < 0 or s < bs or (s == bs and (d < bd or (d == bd and (o < bo or (o == bo and p < bp))))):
                    bs, bd, bo, bp = s, d, o, p
            if bo < 0:
                break
            o, p, d = bo, bp, bd
            # estimate(o, p), parallel mode
            dr = 0.0
            ncp = 0
            nex = 0
            for e in range(pred_ptr[o], pred_ptr[o + 1]):
                j = pred_j[e]
                q = dev[j]
                if q == p:
                    a = end[j]
                else:
                    a = end[j] + (lat[q, p] * ntens[j] + pred_b[e] / bw[q, p])
                    ex = arr[j, p]
                    if np.isnan(ex):
                        cp_j[ncp] = j
                        cp_a[ncp] = a
                        cp_b[ncp] = copyb[j]
                        ncp += 1
                    elif ex >= a:
                        a = ex
                    else:
                        ex_j[nex] = j
                        ex_a[nex] = a
                        nex += 1
                if a > dr:
                    dr = a
            av = avail[p]
            s = av if av > dr else dr
            if sct:
                _hpop(hd, ho, hg, hn, brow)
                if s > bs:  # its stored data-ready time was a lower bound (a cached transfer grew)
                    n_reest += 1
                    if not _hpush(hd, ho, hg, hn, p, dr, o, gen[o]):
                        res[1] = 0
                        return OVERFLOW
                    continue
                # `SCTQueue._prefers_parent`: hold the pair back while the favourite parent's device could take o
                f = fav[o]
                if f >= 0:
                    pf = dev[f]
                    if (
                        pf != p
                        and allowed[o, pf]
                        and _usable(o, pf, gid, group_dev, banned, dropped, excluded)
                        and not parked_pairs[o, pf]
                    ):
                        a = _data_ready(o, pf, pred_ptr, pred_j, pred_b, dev, end, arr, lat, bw, ntens)
                        t_fav = avail[pf] if avail[pf] > a else a
                        saved = lat[pf, p] * ntens[f] + fav_bytes[o] / bw[pf, p]
                        if not (t_fav <= s or t_fav - s > saved) and not held_until[o, p] >= t_fav:
                            held_until[o, p] = t_fav
                            n_held += 1
                            if not _hpush(hd, ho, hg, hn, p, t_fav, o, gen[o]):
                                res[1] = 0
                                return OVERFLOW
                            continue
            else:
                if dr > d:  # the stored data-ready time was a lower bound (a cached transfer grew)
                    n_reest += 1
                    _hreplace(hd, ho, hg, hn, p, dr, o, gen[o])
                    continue
                _hpop(hd, ho, hg, hn, p)
            # _mem_request
            g = gid[o]
            at_start = temp[o] + out[o]
            rel_k = -1
            rel_b = 0.0
            if g < 0:
                pers = persist[o]
            elif group_dev[g] < 0:
                pers = group_persist[g]
                at_start += group_share[g] - share[o]
            else:
                pers = 0.0
                rel_k = group_slot[g]
                rel_b = share[o]
            # fits
            ok = True
            if memory_aware:
                top = mpers[p] + pers + alloc_total[p] + at_start
                for i in range(ncp):
                    top += cp_b[i]
                if not top * (1 + 1e-9) <= limit[p]:
                    need = _bound_if(mem, p, s, pers, at_start, cp_a, cp_b, ncp, rel_k, rel_b, pk, pbs)
                    ok = need <= limit[p]
            if not ok:
                # _refused
                tried[o, p] = need
                floor = mpers[p] + pers + at_start
                csum = 0.0
                for i in range(ncp):
                    csum += cp_b[i]
                floor += csum
                if rel_k >= 0:
                    floor -= rel_b
                exhausted = floor > limit[p]
                if g >= 0 and group_dev[g] >= 0 and exhausted:
                    res[0], res[1], res[2], res[3] = o, g, p, need
                    return GROUP_REFUSED
                if sct and exclude_full and g < 0 and (excl_refusal or exhausted):  # `SCTQueue._no_fit`
                    excluded[p] = True
                    for r in range(n):  # sorted(ready)
                        if ready[r] and dev[r] < 0:
                            if not _alive(r, allowed, gid, group_dev, banned, dropped, excluded):
                                res[0] = r
                                return INFEASIBLE
                            f = fav[r]
                            if f >= 0 and dev[f] == p:  # refresh(r)
                                gen[r] += 1
                                if not _push_all(
                                    r,
                                    hd,
                                    ho,
                                    hg,
                                    hn,
                                    gen,
                                    allowed,
                                    gid,
                                    group_dev,
                                    banned,
                                    dropped,
                                    excluded,
                                    parked_pairs,
                                    pred_ptr,
                                    pred_j,
                                    pred_b,
                                    dev,
                                    end,
                                    arr,
                                    lat,
                                    bw,
                                    ntens,
                                ):
                                    res[1] = 0
                                    return OVERFLOW
                elif exhausted:  # drop
                    dropped[o, p] = True
                    n_dropped += 1
                    if not _alive(o, allowed, gid, group_dev, banned, dropped, excluded):
                        res[0] = o
                        return INFEASIBLE
                else:  # park
                    parked[p, plen[p]] = o
                    plen[p] += 1
                    parked_pairs[o, p] = True
                    n_parked_now += 1
                    parked_at[p] = version[p]
                    n_parked += 1
                continue
            # commit(o, p, est)
            first = g >= 0 and group_dev[g] < 0
            e_o = s + dur[o, p]
            dev[o] = p
            start[o] = s
            end[o] = e_o
            avail[p] = e_o
            log[n_placed] = o
            n_placed += 1
            for i in range(ncp):
                arr[cp_j[i], p] = cp_a[i]
            for i in range(nex):
                j = ex_j[i]
                if ex_a[i] > arr[j, p]:
                    arr[j, p] = ex_a[i]
            version[p] += 1
            mpers[p] += pers
            k_new = _open_slot(mem, p, s)
            if rel_k >= 0:
                _release(mem, p, rel_k, rel_b)
            if first:
                group_dev[g] = p
                group_slot[g] = k_new
                _alloc(mem, ev, alloc_total, p, s, group_share[g] - share[o], False, 0)
            slot_of[o] = k_new
            for i in range(ncp):
                _alloc(mem, ev, alloc_total, p, cp_a[i], cp_b[i], True, 2 * k_new - 1)
            _alloc(mem, ev, alloc_total, p, s, temp[o] + out[o], True, 2 * k_new)
            if not _free(mem, ev, p, e_o, temp[o], s, 2 * k_new + 1):
                res[1] = 1
                return OVERFLOW
            for e in range(pred_ptr[o], pred_ptr[o + 1]):
                j = pred_j[e]
                t0 = ce_t[j, p]
                if np.isnan(t0) or t0 < e_o or (t0 == e_o and ce_k[j, p] <= k_new):
                    ce_t[j, p] = e_o
                    ce_k[j, p] = k_new
                left_cons[j] -= 1
                if left_cons[j] == 0:  # _release_output(j)
                    q = dev[j]
                    if np.isnan(ce_t[j, q]):
                        lt, lk = end[j], slot_of[j]
                    else:
                        lt, lk = ce_t[j, q], ce_k[j, q]
                    t = end[j] if end[j] > lt else lt
                    sq = 2 * (slot_of[j] if slot_of[j] > lk else lk) + 1
                    for r in range(D):
                        a = arr[j, r]
                        if np.isnan(a):
                            continue
                        if a > t:
                            t = a
                        if not _free(mem, ev, r, ce_t[j, r], copyb[j], a, 2 * ce_k[j, r] + 1):
                            res[1] = 1
                            return OVERFLOW
                        version[r] += 1
                    if not _free(mem, ev, q, t, out[j], start[j], sq):
                        res[1] = 1
                        return OVERFLOW
                    version[q] += 1
            if succ_ptr[o + 1] == succ_ptr[o]:
                if not _free(mem, ev, p, e_o, out[o], s, 2 * k_new + 1):
                    res[1] = 1
                    return OVERFLOW
            placed = o
            first_of_group = first
        if placed < 0:
            break
        # --- _placed(o, first_of_group)
        o = placed
        ready[o] = False
        g = gid[o]
        if first_of_group:
            for i in range(mem_ptr[g], mem_ptr[g + 1]):
                mo = mem_ops[i]
                if ready[mo]:  # refresh(mo)
                    gen[mo] += 1
                    if not _push_all(
                        mo,
                        hd,
                        ho,
                        hg,
                        hn,
                        gen,
                        allowed,
                        gid,
                        group_dev,
                        banned,
                        dropped,
                        excluded,
                        parked_pairs,
                        pred_ptr,
                        pred_j,
                        pred_b,
                        dev,
                        end,
                        arr,
                        lat,
                        bw,
                        ntens,
                    ):
                        res[1] = 0
                        return OVERFLOW
        for e in range(succ_ptr[o], succ_ptr[o + 1]):
            k = succ_k[e]
            left[k] -= 1
            if left[k] == 0:
                stack[ns] = k
                ns += 1
    for p in range(D):
        _settle(mem, p)
    res[4], res[5], res[6], res[7], res[8] = n_dropped, n_parked, n_reest, n_placed, n_held
    if n_placed < n:
        for o in range(n):  # _stuck: the first waiting op
            if ready[o] and dev[o] < 0:
                g = gid[o]
                res[0] = o
                if g >= 0 and group_dev[g] >= 0:
                    res[1], res[2], res[3] = g, group_dev[g], tried[o, group_dev[g]]
                    return GROUP_STUCK
                return INFEASIBLE
        return NOTHING_READY
    return OK


# ----------------------------------------------------------------- the Python side
def run(model: ExecModel, banned: set[int]) -> tuple[int, int, int]:
    """`PairQueue(model, banned).run()` for a fresh `model` in parallel mode, compiled (module docstring).
    Fills the model's placement (``dev``, ``start``, ``end``, ``avail``, ``order``, ``slot_of``, the groups'
    devices, the predicted peaks and the transfers' arrivals); returns (dropped, parked, re-estimated) pairs.
    Raises what the queue raises (`GroupOverflow`, `InfeasiblePlacement`), with the same messages."""
    res, _ = _run(model, banned, None)
    return int(res[4]), int(res[5]), int(res[6])


class SCTCounts(NamedTuple):
    """What m-SCT's queue reports (`SCTQueue`'s counters)."""

    n_dropped: int
    n_parked: int
    n_reestimated: int
    n_held_back: int
    excluded: list[bool]


def run_sct(
    model: ExecModel, favorite_parent: list[int], exclude_full: bool, exclusion: str, banned: set[int]
) -> SCTCounts:
    """``SCTQueue(model, favorite_parent, exclude_full, exclusion, banned).run()`` for a fresh `model` in parallel
    mode, compiled (module docstring): fills the model's placement as `run` does and returns the queue's counts.
    Raises what the queue raises."""
    if exclusion not in EXCLUSIONS:
        raise ConfigError(f"placer.exclusion: {exclusion!r} is not one of {EXCLUSIONS}")
    n = model.n
    fav = np.array(favorite_parent, np.int64).reshape(n)
    fav_bytes = np.zeros(n, np.float64)
    for o in np.flatnonzero(fav >= 0).tolist():  # `SCTQueue.fav_bytes`: the first edge from the favourite parent
        f = int(fav[o])
        fav_bytes[o] = next((b for j, b in model.pred[o] if j == f), 0.0)
    res, excluded = _run(model, banned, (fav, fav_bytes, bool(exclude_full), exclusion == "refusal"))
    return SCTCounts(int(res[4]), int(res[5]), int(res[6]), int(res[8]), excluded.tolist())


def _run(
    model: ExecModel, banned: set[int], sct: tuple[np.ndarray, np.ndarray, bool, bool] | None
) -> tuple[np.ndarray, np.ndarray]:
    """`run` (``sct`` None) or `run_sct` (``sct``: favourite parents, their edges' bytes, exclude_full, exclusion
    at the first refusal); returns the kernel's ``res`` and ``excluded``."""
    if model.sequential or model.n_placed:
        raise ValueError("etf_kernel.run needs a fresh model of a parallel-mode cluster")
    n, D = model.n, model.D
    ng = len(model.members)
    ia = index_arrays(model.idx)  # model.pred and model.succ are the index's lists
    pred_ptr, pred_j, pred_b, succ_ptr, succ_k = (ia[k] for k in ("pred_ptr", "pred_j", "pred_b", "succ_ptr", "succ_k"))
    f8 = np.float64
    dur = np.ascontiguousarray(model.dur, f8).reshape(n, D)  # the model's own array, not a copy
    lens = np.fromiter(map(len, model.allowed), np.int64, n)
    if (lens == D).all():
        allowed = np.ones((n, D), np.bool_)
    else:
        allowed = np.zeros((n, D), np.bool_)
        allowed[np.repeat(np.arange(n), lens), np.fromiter(chain.from_iterable(model.allowed), np.int64)] = True
    gid = np.array(model.gid, np.int64)
    mem_ptr = np.zeros(ng + 1, np.int64)
    np.cumsum(np.fromiter(map(len, model.members), np.int64, ng), out=mem_ptr[1:])
    mem_ops = np.fromiter(chain.from_iterable(model.members), np.int64, int(mem_ptr[-1]))
    ban = np.zeros((ng, D), np.bool_)
    for x in banned:
        if x // D < ng:  # a pair of a group that does not exist bans nothing (as in `PairQueue.usable`)
            ban[x // D, x % D] = True
    limit = np.array([mm.limit for mm in model.mem], f8)
    graph_args = (
        pred_ptr,
        pred_j,
        pred_b,
        succ_ptr,
        succ_k,
        dur,
        np.array(model.persist, f8),
        np.array(model.temp, f8),
        np.array(model.out, f8),
        np.array(model.copyb, f8),
        np.array(model.ntens, f8),
        np.array(model.lat, f8).reshape(D, D),
        np.array(model.bw, f8).reshape(D, D),
        allowed,
        gid,
        mem_ptr,
        mem_ops,
        np.array(model.group_persist, f8).reshape(ng),
        np.array(model.group_share, f8).reshape(ng),
        np.array(model.share, f8),
        limit,
        ban,
        bool(model.memory_aware),
    )
    no_sct: tuple[np.ndarray, np.ndarray, bool, bool] = (np.full(n, -1, np.int64), np.zeros(n, f8), False, False)
    sct_args = (sct is not None,) + (no_sct if sct is None else sct)
    # exact mode: every byte count an integer and their total far below 2**53, so that every float sum of
    # them is exact, whatever the order of its terms
    amounts = [graph_args[k] for k in (6, 7, 8, 9, 17, 18, 19)]  # persist .. share
    exact = all(bool(np.all(np.isfinite(a)) and np.all(np.floor(a) == a)) for a in amounts)
    if exact:
        total = sum(float(np.abs(a).sum()) for a in amounts) + float(np.abs(graph_args[9][pred_j]).sum())
        exact = 4 * total < 2.0**53
    n_ev = 4 * n + 2 * len(pred_j) + 16  # at most: per op 2 allocations and 2 frees, per edge a copy and its free
    hcap, pcap = (n + 64, n // D + 64) if FIRST_ROOM is None else (FIRST_ROOM, FIRST_ROOM)
    while True:
        dev = np.full(n, -1, np.int64)
        start = np.zeros(n, f8)
        end = np.zeros(n, f8)
        slot_of = np.zeros(n, np.int64)
        avail = np.zeros(D, f8)
        group_dev = np.full(ng, -1, np.int64)
        group_slot = np.zeros(ng, np.int64)
        arr = np.full((n, D), np.nan)
        ce_t = np.full((n, D), np.nan)
        ce_k = np.zeros((n, D), np.int64)
        log_ = np.zeros(n, np.int64)
        tried = np.full((n, D), np.nan)
        mem = (
            np.zeros((D, n + 2), f8),  # slot starts
            np.zeros((D, n + 2), f8),  # slot values
            np.zeros((D, (n + 2) // _B + 1), f8),  # block maxima
            np.zeros(D, f8),  # maximum of the full blocks
            np.zeros(D, np.bool_),  # ... is known
            np.ones(D, np.int64),  # slots
            np.zeros(D, f8),  # level
            np.zeros(D, f8),  # persistent bytes
            np.zeros((D, pcap), f8),  # pending frees: times
            np.zeros((D, pcap), f8),  # ... bytes
            np.zeros(D, np.int64),  # ... count
            np.zeros((D, n + 2), f8),  # exact mode: suffix adds not applied yet (difference array)
            np.full(D, _NONE, np.int64),  # ... the earliest slot they reach
            np.zeros(D, f8),  # ... their sum
            np.array([exact]),
        )
        alloc_total = np.zeros(D, f8)
        ev = (
            np.zeros(n_ev, f8),
            np.zeros(n_ev, np.int8),
            np.zeros(n_ev, np.int64),
            np.zeros(n_ev, f8),
            np.zeros(n_ev, np.int32),
            np.zeros(1, np.int64),
        )
        rows = D if sct is None else 4 * D  # m-SCT: the pairs waiting for their data and three released classes
        hd, ho, hg = np.zeros((rows, hcap), f8), np.zeros((rows, hcap), np.int64), np.zeros((rows, hcap), np.int64)
        res = np.zeros(9, f8)
        excluded = np.zeros(D, np.bool_)
        status = etf_run(
            *(graph_args + sct_args),
            dev,
            start,
            end,
            slot_of,
            avail,
            group_dev,
            group_slot,
            arr,
            ce_t,
            ce_k,
            log_,
            tried,
            mem,
            alloc_total,
            ev,
            hd,
            ho,
            hg,
            res,
            excluded,
        )
        if status != OVERFLOW:
            break
        if res[1] == 0:
            hcap *= 2
        else:
            pcap *= 2
        log.debug("etf_kernel: a table was full; running again with more room (%d, %d)", hcap, pcap)
    if status != OK:
        _raise(model, status, res, tried, dev)
    # issue 22: the tables only the list scheduling needed go before the Python lists below are built (at
    # 300,000 ops they are most of the placement's peak memory)
    del graph_args, sct_args, no_sct, allowed, lens, gid, tried, ce_t, ce_k, hd, ho, hg
    # the predicted peaks: `DeviceMemory.exact_peak` (events sorted per device) and `DeviceMemory.bound`
    k = int(ev[5][0])
    ev_t, ev_k, ev_s, ev_b, ev_d = (a[:k] for a in ev[:5])
    srt = np.lexsort((ev_b, ev_s, ev_k, ev_t, ev_d))
    del ev_t, ev_k, ev_s
    db = ev_b[srt]
    cuts = np.searchsorted(ev_d[srt], np.arange(D + 1))
    del ev, ev_b, ev_d, srt
    val, mn, level, mpers = mem[1], mem[5], mem[6], mem[7]
    peaks = []
    for p in range(D):
        seg = db[cuts[p] : cuts[p + 1]]
        peak = max(0.0, float(np.cumsum(seg).max())) if len(seg) else 0.0
        exact_peak = float(mpers[p]) + peak
        top = float(val[p, : mn[p]].max())
        bound = float(mpers[p]) + (top if not float(level[p]) > top else float(level[p]))
        peaks.append(min(exact_peak, bound))
    del mem, db
    # the model's placement state
    model.dev[:] = dev.tolist()
    model.start[:] = start.tolist()
    model.end[:] = end.tolist()
    model.avail[:] = avail.tolist()
    model.slot_of[:] = slot_of.tolist()
    model.group_dev[:] = group_dev.tolist()
    model.group_slot[:] = group_slot.tolist()
    order = log_.tolist()
    model.log[:] = list(zip(order, dev[log_].tolist()))
    for p in range(D):
        model.order[p][:] = log_[dev[log_] == p].tolist()
    model.n_placed = n
    model.compiled = (peaks, arr)
    return res, excluded


def _raise(model: ExecModel, status: int, res: np.ndarray, tried: np.ndarray, dev: np.ndarray) -> None:
    """The exception `PairQueue` raises in the same situation (`PairQueue._refused`, `_stuck`, `check_alive`)."""
    names = model.idx.names
    o, g, p, need = int(res[0]), int(res[1]), int(res[2]), float(res[3])
    if status in (GROUP_REFUSED, GROUP_STUCK):
        msg = (
            f"op {names[o]!r} of colocation group {model.group_names[g]!r} must go to device "
            f"{model.cluster.devices[p].name!r}, which would need {need:.6g} of {model.mem[p].limit:.6g} bytes"
        )
        if status == GROUP_STUCK:
            msg += " even once everything else placeable was placed"
        raise GroupOverflow(msg, g, p)
    if status == INFEASIBLE:
        t = {q: float(tried[o, q]) for q in range(model.D) if not np.isnan(tried[o, q])}
        raise model.infeasible(o, t)
    stuck = [names[i] for i in np.flatnonzero(dev < 0)[:3]]
    raise InfeasiblePlacement(f"{int((dev < 0).sum())} ops could not be placed, e.g. {stuck}")
