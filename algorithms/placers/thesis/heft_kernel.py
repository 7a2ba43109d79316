"""HEFT (thesis, seed 004, section 4.3; Topcuoglu, Hariri and Wu 2002) compiled with numba (issue 22), for graphs
of 10^5-10^6 ops.

What it computes.  Exactly what `heft._place_python` computes (`HEFTPlacer`'s docstring states the algorithm):
the same upward ranks (`upward_rank`, eq. 4.1-4.2), the same priority list, and for every op the same device,
start, finish and slot position, hence the same placement, per-device order and makespan estimate, or the same
`InfeasiblePlacement` (the unit and the devices' remaining memory at that moment).  It is a port of that code
over arrays; the Python code stays the reference and the code path for small graphs.  `tests/test_heft_kernel.py`
compares the two (and the slot-by-slot scan of commit 19d8e23) on random graphs.

How the state maps to arrays (V ops, E edges, U assignment units, D devices, B = `heft.SLOT_BLOCK`):

* Ranks: `upward_rank_arrays` over the consumers' CSR arrays (`sim_kernel.index_arrays`): the same
  ``c_ij = mean latency + bytes / mean rate`` and ``w_i + max(...)`` additions as `common.upward_rank` (a
  maximum does not depend on the order it is taken in).  The priority list is a stable argsort of ``-rank``:
  ties in index order, as ``sorted(key=(-rank, i))``.
* Timelines: the blocks of `heft.SlotTimeline` in a pool of fixed-size rows (``2 B + 1`` slots: a block is
  split in halves once it holds more than ``2 B``), with per block its slots' starts, ends, ops and gaps, its
  count, its last end and its largest gap; each device lists its blocks in time order.  `_find` and `_insert`
  are `SlotTimeline.find` and `SlotTimeline.insert` (the same bisections, the same first gap ``>= dur``, the
  same float expressions), so the block layout, and with it every answer, is the Python timeline's.
* A device's largest idle gap (the Python code's lazy max-heap of positive gaps): the maximum of its blocks'
  largest gaps, kept up to date when it grows and recomputed over the device's blocks after the block that
  held it lost it; it serves the same test ``max gap < duration`` (then the op can only be appended).
* Per op and candidate device the same lower bound of the finish time, the same order of the gap searches
  (by bound, then device index) and the same early stop; the choice is the lowest (finish, device) either way.
* Units: ``unit_of``, ``unit_size``, ``unit_type`` (device type code, -1 for none), ``unit_dev`` (-1 while
  unassigned); devices: ``dev_type``, ``speed``, ``cap``, ``used`` (added to in the Python code's order, so
  every float sum is the same sum).  Execution times: ``base[i, t] / speed[d]`` with ``base`` the op's base
  time for the device's type (`GraphIndex.exec_time`, the same division).

Complexity: that of the Python code without its interpreter steps: O(V log V) for the priority list, O((V + E)
D) for the ready times, per op and searched device one gap search (O(log V) bisections plus at most 2B + V/B
comparisons) and per op one insertion (O(B) moves, amortised O(V / B^2) for splits).  Memory O(V T + E + V) for
T device types (the slot pool holds at most V + D B slots).  The first call compiles the kernel (seconds) and
caches it on disk (numba ``cache=True``, under ``__pycache__``); later processes load it in well under a second.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ...cluster import Cluster
from ...graph import GraphIndex
from ...sim_kernel import index_arrays
from .common import AssignState, Unit, average_comm, average_speed

# statuses of `heft_run`
OK = 0
INFEASIBLE = 1  # a unit fits on no device; its id in the second result


@njit(cache=True)
def _rank_run(succ_ptr, succ_k, succ_b, w, lat, rate, comm):
    """``rank_u(i) = w_i + max(0, max over consumers j of c_ij + rank_u(j))``, consumers of op i at
    ``succ_ptr[i]:succ_ptr[i+1]``; ``c_ij = lat + bytes / rate`` when `comm`, else 0."""
    n = w.shape[0]
    rank = np.zeros(n)
    for i in range(n - 1, -1, -1):
        best = 0.0
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            c = (lat + succ_b[e] / rate) if comm else 0.0
            v = c + rank[succ_k[e]]
            if v > best:
                best = v
        rank[i] = w[i] + best
    return rank


def upward_rank_arrays(idx: GraphIndex, cluster: Cluster) -> np.ndarray:
    """`common.upward_rank`'s rank as an array, compiled: the same floats.  O(V + E + D^2)."""
    a = index_arrays(idx)
    savg = average_speed(cluster)
    lat, rate = average_comm(cluster)
    types = [d.type for d in cluster.devices]
    w = np.fromiter(idx.compute_s, np.float64, idx.n) / savg
    for i, by in enumerate(idx.compute_by_type):
        if by:  # the mean of its base times over the devices, summed in device order as `upward_rank` does
            cs = idx.compute_s[i]
            w[i] = (sum(by.get(t, cs) for t in types) / len(types)) / savg
    return _rank_run(a["succ_ptr"], a["succ_k"], a["succ_b"], w, float(lat), float(rate), len(types) > 1)


@njit(cache=True)
def _bisect_right(arr, lo, hi, x):
    """First index k in [lo, hi) with arr[k] > x (``bisect.bisect_right``)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if x < arr[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def _find(d, ready, dur, dblk, dnb, bs, be, bg, bcnt, blast, bgmax):
    """`SlotTimeline.find` on device d: (start, block position, slot index)."""
    nb = dnb[d]
    if nb == 0:
        return ready, 0, 0
    # bisect_right over the blocks' last ends, in the device's block order
    lo, hi = 0, nb
    while lo < hi:
        mid = (lo + hi) >> 1
        if ready < blast[dblk[d, mid]]:
            hi = mid
        else:
            lo = mid + 1
    b = lo
    if b == nb:
        return ready, nb - 1, bcnt[dblk[d, nb - 1]]
    k = dblk[d, b]
    cnt = bcnt[k]
    j = _bisect_right(be[k], 0, cnt, ready)
    if bs[k, j] - ready >= dur:
        return ready, b, j
    for h in range(j + 1, cnt):
        if dur <= bg[k, h]:
            return be[k, h - 1], b, h
    for b2 in range(b + 1, nb):
        k2 = dblk[d, b2]
        if dur <= bgmax[k2]:
            for h in range(bcnt[k2]):
                if dur <= bg[k2, h]:
                    if h:
                        return be[k2, h - 1], b2, h
                    return blast[dblk[d, b2 - 1]], b2, h
    last = dblk[d, nb - 1]
    return blast[last], nb - 1, bcnt[last]


@njit(cache=True)
def _dev_gap_set(d, old, new, dmax, dirty):
    """A block of device d changed its largest gap from `old` to `new`: keep the device's largest gap."""
    if dirty[d]:
        return
    if new > dmax[d]:
        dmax[d] = new
    elif old == dmax[d] and new < old:
        dirty[d] = True


@njit(cache=True)
def _insert(d, b, j, start, end, op, block, dblk, dnb, bs, be, bg, bo, bcnt, blast, bgmax, nblk, dmax, dirty):
    """`SlotTimeline.insert` on device d: op's slot [start, end) before slot j of the device's block b; splits
    a block of more than 2 `block` slots.  Returns the number of blocks allocated in the pool."""
    if dnb[d] == 0:
        k = nblk
        nblk += 1
        bs[k, 0] = start
        be[k, 0] = end
        bo[k, 0] = op
        g0 = start - 0.0
        bg[k, 0] = g0
        bcnt[k] = 1
        blast[k] = end
        bgmax[k] = g0
        dblk[d, 0] = k
        dnb[d] = 1
        dmax[d] = g0
        dirty[d] = False
        return nblk
    k = dblk[d, b]
    cnt = bcnt[k]
    if j:
        prev_end = be[k, j - 1]
    elif b:
        prev_end = blast[dblk[d, b - 1]]
    else:
        prev_end = 0.0
    g_before = start - prev_end
    old = bgmax[k]
    if j < cnt:
        replaced = bg[k, j]
        g_after = bs[k, j] - end
        bg[k, j] = g_after
        for h in range(cnt, j, -1):
            bs[k, h] = bs[k, h - 1]
            be[k, h] = be[k, h - 1]
            bo[k, h] = bo[k, h - 1]
            bg[k, h] = bg[k, h - 1]
        bs[k, j] = start
        be[k, j] = end
        bo[k, j] = op
        bg[k, j] = g_before
        cnt += 1
        bcnt[k] = cnt
        if replaced >= old:
            m = bg[k, 0]
            for h in range(1, cnt):
                if bg[k, h] > m:
                    m = bg[k, h]
            bgmax[k] = m
        else:
            m = old
            if g_before > m:
                m = g_before
            if g_after > m:
                m = g_after
            bgmax[k] = m
    else:
        bs[k, cnt] = start
        be[k, cnt] = end
        bo[k, cnt] = op
        bg[k, cnt] = g_before
        cnt += 1
        bcnt[k] = cnt
        blast[k] = end
        if g_before > old:
            bgmax[k] = g_before
    _dev_gap_set(d, old, bgmax[k], dmax, dirty)
    if cnt > 2 * block:  # split in halves (`SlotTimeline._split`): the largest gap of the pair is unchanged
        h = cnt // 2
        k2 = nblk
        nblk += 1
        m0 = bg[k, 0]
        for t in range(1, h):
            if bg[k, t] > m0:
                m0 = bg[k, t]
        m1 = bg[k, h]
        for t in range(h, cnt):
            bs[k2, t - h] = bs[k, t]
            be[k2, t - h] = be[k, t]
            bo[k2, t - h] = bo[k, t]
            bg[k2, t - h] = bg[k, t]
            if bg[k, t] > m1:
                m1 = bg[k, t]
        bcnt[k2] = cnt - h
        blast[k2] = be[k, cnt - 1]
        bgmax[k2] = m1
        bcnt[k] = h
        blast[k] = be[k, h - 1]
        bgmax[k] = m0
        nb = dnb[d]
        for t in range(nb, b + 1, -1):
            dblk[d, t] = dblk[d, t - 1]
        dblk[d, b + 1] = k2
        dnb[d] = nb + 1
    return nblk


@njit(cache=True)
def _max_gap(d, dblk, dnb, bgmax, dmax, dirty):
    """The device's largest positive idle gap, 0.0 when it has none (the Python code's lazy max-heap)."""
    if dirty[d]:
        m = bgmax[dblk[d, 0]]
        for t in range(1, dnb[d]):
            v = bgmax[dblk[d, t]]
            if v > m:
                m = v
        dmax[d] = m
        dirty[d] = False
    m = dmax[d]
    return m if m > 0.0 else 0.0


@njit(cache=True)
def heft_run(
    order,
    pred_ptr,
    pred_j,
    pred_b,
    base,
    unit_of,
    unit_size,
    unit_type,
    dev_type,
    dev_tcol,
    speed,
    cap,
    lat,
    bw,
    insertion,
    block,
):
    """HEFT's processor selection over the priority list `order` (`heft._place_python`'s loop); op i's base
    time on device d's type is ``base[i, dev_tcol[d]]`` (`base_times`).  Returns (status, unit, dev_of, unit_dev,
    used, finish, slot_ops, dev_ptr): status OK or INFEASIBLE (then `unit` fits on no device and the rest is the
    state at that moment); the ops of device d in slot order are ``slot_ops[dev_ptr[d]:dev_ptr[d+1]]``."""
    n = order.shape[0]
    nd = speed.shape[0]
    nu = unit_size.shape[0]
    dev_of = np.full(n, -1, np.int64)
    unit_dev = np.full(nu, -1, np.int64)
    used = np.zeros(nd)
    finish = np.zeros(n)
    maxb = nd + n // block + 2
    width = 2 * block + 1
    bs = np.empty((maxb, width))
    be = np.empty((maxb, width))
    bg = np.empty((maxb, width))
    bo = np.empty((maxb, width), np.int64)
    bcnt = np.zeros(maxb, np.int64)
    blast = np.zeros(maxb)
    bgmax = np.zeros(maxb)
    dblk = np.empty((nd, maxb), np.int64)
    dnb = np.zeros(nd, np.int64)
    dmax = np.zeros(nd)
    dirty = np.zeros(nd, np.bool_)
    nblk = 0
    cand = np.empty(nd, np.int64)
    lbs = np.empty(nd)
    s0s = np.empty(nd)
    durs = np.empty(nd)
    exact = np.empty(nd, np.bool_)
    status = OK
    bad = -1
    for q in range(n):
        i = order[q]
        u = unit_of[i]
        nc = 0
        if unit_dev[u] >= 0:
            cand[0] = unit_dev[u]
            nc = 1
        else:
            ut = unit_type[u]
            for d in range(nd):
                if (ut < 0 or dev_type[d] == ut) and used[d] + unit_size[u] <= cap[d]:
                    cand[nc] = d
                    nc += 1
            if nc == 0:
                status = INFEASIBLE
                bad = u
                break
        # per candidate the lower bound of the finish time (exact when it can only append), kept sorted by
        # (bound, device): an insertion sort, as `bounds.sort()` orders the Python tuples
        for c in range(nc):
            d = cand[c]
            ready = 0.0
            for e in range(pred_ptr[i], pred_ptr[i + 1]):
                p = pred_j[e]
                dp = dev_of[p]
                if dp == d:
                    a = finish[p]
                else:
                    a = finish[p] + lat[dp, d] + pred_b[e] / bw[dp, d]
                if a > ready:
                    ready = a
            dur = base[i, dev_tcol[d]] / speed[d]
            if dnb[d] > 0 and (not insertion or _max_gap(d, dblk, dnb, bgmax, dmax, dirty) < dur):
                e_last = blast[dblk[d, dnb[d] - 1]]
                s0 = e_last if e_last > ready else ready
                lb = s0 + dur
                ex = True
            else:
                s0 = ready
                lb = ready + dur
                ex = False
            t = c
            while t > 0 and (lbs[t - 1] > lb or (lbs[t - 1] == lb and cand[t - 1] > d)):
                cand[t] = cand[t - 1]
                lbs[t] = lbs[t - 1]
                s0s[t] = s0s[t - 1]
                durs[t] = durs[t - 1]
                exact[t] = exact[t - 1]
                t -= 1
            cand[t] = d
            lbs[t] = lb
            s0s[t] = s0
            durs[t] = dur
            exact[t] = ex
        best_f = np.inf
        best_d = -1
        best_s = 0.0
        best_b = 0
        best_j = 0
        for c in range(nc):
            lb = lbs[c]
            d = cand[c]
            if lb > best_f or (lb == best_f and d > best_d):
                break
            dur = durs[c]
            if exact[c]:
                s = s0s[c]
                bb = dnb[d] - 1
                jj = bcnt[dblk[d, bb]]
            else:
                s, bb, jj = _find(d, s0s[c], dur, dblk, dnb, bs, be, bg, bcnt, blast, bgmax)
            f = s + dur
            if f < best_f or (f == best_f and d < best_d):
                best_f = f
                best_d = d
                best_s = s
                best_b = bb
                best_j = jj
        if unit_dev[u] < 0:
            unit_dev[u] = best_d
            used[best_d] += unit_size[u]
        dev_of[i] = best_d
        nblk = _insert(
            best_d,
            best_b,
            best_j,
            best_s,
            best_f,
            i,
            block,
            dblk,
            dnb,
            bs,
            be,
            bg,
            bo,
            bcnt,
            blast,
            bgmax,
            nblk,
            dmax,
            dirty,
        )
        finish[i] = best_f
    # the ops of every device in slot order
    dev_ptr = np.zeros(nd + 1, np.int64)
    for d in range(nd):
        tot = 0
        for t in range(dnb[d]):
            tot += bcnt[dblk[d, t]]
        dev_ptr[d + 1] = dev_ptr[d] + tot
    slot_ops = np.empty(dev_ptr[nd], np.int64)
    for d in range(nd):
        w = dev_ptr[d]
        for t in range(dnb[d]):
            k = dblk[d, t]
            for h in range(bcnt[k]):
                slot_ops[w] = bo[k, h]
                w += 1
    return status, bad, dev_of, unit_dev, used, finish, slot_ops, dev_ptr


def unit_arrays(st: AssignState, units: list[Unit], unit_of: list[int]) -> tuple[np.ndarray, ...]:
    """(unit_of, unit_size, unit_type, dev_type) for `heft_run`: type codes over the cluster's device types.
    O(V + U)."""
    codes = {t: k for k, t in enumerate(sorted(set(st.types)))}
    nu = len(units)
    unit_type = np.fromiter((-1 if u.device_type is None else codes[u.device_type] for u in units), np.int64, nu)
    unit_size = np.fromiter((u.size for u in units), np.float64, nu)
    dev_type = np.array([codes[t] for t in st.types], np.int64)
    return np.asarray(unit_of, np.int64), unit_size, unit_type, dev_type


def base_times(idx: GraphIndex, types: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(base, dev_tcol): op i's base time on device d is ``base[i, dev_tcol[d]]``, the `GraphIndex.exec_time`
    numerator (``compute_by_type`` for d's type, else ``compute_s``); one column per distinct device type.
    O(V T)."""
    distinct = sorted(set(types))
    codes = {t: k for k, t in enumerate(distinct)}
    n = idx.n
    base = np.empty((n, len(distinct)))
    base[:, :] = np.fromiter(idx.compute_s, np.float64, n)[:, None]
    for i, by in enumerate(idx.compute_by_type):
        if by:
            cs = idx.compute_s[i]
            for t, k in codes.items():
                base[i, k] = by.get(t, cs)
    return base, np.array([codes[t] for t in types], np.int64)
