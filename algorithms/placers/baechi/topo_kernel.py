"""m-TOPO's fill (Baechi, seed 001, section 2.2) compiled with numba (issue 22), for graphs of 10^5-10^6 ops.

What it computes.  Exactly what `MTOPOPlacer._fill` computes (`MTOPOPlacer`'s docstring states the algorithm:
the topological walk that fills the devices one after another up to their caps, with the dynamic memory
accounting of Baechi 4.2): the same device for every op, the same static bytes, predicted peaks, checked
uses, overflow count and first overflow, or the same `InfeasiblePlacement` (the kernel returns the op and the
current device; the caller words the message as the Python code does).  It is a port, line for line, of that
function and of `_StepHistory` over arrays; the Python code stays the reference and the code path for small
graphs.  `tests/test_topo_kernel.py` compares the two.

How the state maps to arrays (V ops, D devices):

* Each op's distinct inputs in increasing index order (the Python code's ``sorted({j for j, _ in pred[i]})``):
  a CSR copy of the index's inputs, each segment sorted and its repeats dropped (`distinct_sorted`).
* Colocation groups: a group id per op (-1 for none) and each group's members in index order (CSR); device
  types as integer codes (-1 for none), one code per distinct type name of the ops and the devices.
* ``copies`` (producer -> devices holding a received copy) is a V x D byte matrix; a producer's row is cleared
  when its last consumer ran, as the Python code pops it.  Its devices are visited in index order where the
  Python code iterates a set: each device's level changes once, so the order does not matter.
* `_StepHistory` is the same (D, V + 1) array of transient bytes with the same block maxima (`_B` steps a
  block), updated element by element in the same order as numpy's slice add, so every value and every range
  maximum is the same float.
* Range maxima scan with numba's ``fastmath`` flags ``nnan`` and ``nsz`` (`_max`), so that the loop runs in
  SIMD lanes: the entries are finite byte counts, never NaN, and -0.0 only where the graph gives -0.0 bytes
  (a difference of equal numbers is +0.0); the maximum of such numbers is the same float in any order of
  comparison (but for the sign of a zero maximum, which compares equal).  No other arithmetic is
  reordered: adds and sums are plain IEEE operations in the Python code's order.
* The sums of the Python code (received copies' bytes, a group's bytes) add left to right from 0, as Python
  3.11's ``sum`` does (Python 3.12 compensates float sums, which could differ in the last bit).

Complexity: that of the Python code, O(V + E) plus, per received copy, O(span) for the add over the steps it
spans and O(V / B + B) per range maximum; memory O(V D).  On the benchmark's random training graphs m-TOPO's
contiguous fill sends most forward ops' outputs to their backward consumers on a later device, so the adds
total about V^2 / 7 steps (1.4e10 at 300K ops, 0.37 ns each): they are most of what is left of the fill's
time at 10^5-10^6 ops, as they were the numpy part of the Python code's.  The first call compiles the kernel
(seconds) and caches it on disk (numba ``cache=True``, under ``__pycache__``); later processes load it in well
under a second.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: steps per block of the history's block maxima (`m_topo._B`)
B = 256

OK = 0
INFEASIBLE = 1  # the op of the second result fits on no device from the current one (third result) on


@njit(cache=True)
def distinct_sorted(ptr, nbr, n):
    """Each op's neighbours sorted in increasing order with repeats dropped: (pointer, neighbours)."""
    out_ptr = np.zeros(n + 1, np.int64)
    out = np.empty(nbr.shape[0], np.int64)
    k = 0
    for x in range(n):
        seg = np.sort(nbr[ptr[x] : ptr[x + 1]])
        for e in range(seg.shape[0]):
            if e == 0 or seg[e] != seg[e - 1]:
                out[k] = seg[e]
                k += 1
        out_ptr[x + 1] = k
    return out_ptr, out[:k].copy()


@njit(cache=True)
def single_device_peak(pred_ptr, pred_j, nsucc, temporary, output):
    """The peak of the transient bytes of `memory.single_device_need` (a one-device run in topological order;
    the need is the persistent bytes' sum plus this peak), the same loop over arrays."""
    n = temporary.shape[0]
    remaining = nsucc.copy()
    live = 0.0
    peak = 0.0
    for i in range(n):
        live += temporary[i] + output[i]
        if live > peak:
            peak = live
        live -= temporary[i] + (0.0 if nsucc[i] > 0 else output[i])
        for e in range(pred_ptr[i], pred_ptr[i + 1]):
            j = pred_j[e]
            remaining[j] -= 1
            if remaining[j] == 0:
                live -= output[j]
    return peak


@njit(cache=True, fastmath={"nnan", "nsz"})
def _max(row, a, c):
    """``row[a:c].max()`` for a < c.  The values are finite byte counts, none -0.0, so their maximum is the same
    whatever the order of the comparisons: the flags let the loop run in SIMD lanes (`fill`'s docstring)."""
    m = row[a]
    for s in range(np.uint64(a + 1), np.uint64(c)):
        m = max(m, row[s])
    return m


@njit(cache=True)
def _range_max(val, bmax, p, a, c):
    """``val[p, a:c].max()`` for a < c (`_StepHistory.range_max`)."""
    row = val[p]
    ba = -(-a // B)
    bc = c // B
    if bc - ba < 2:
        return _max(row, a, c)
    m = _max(bmax[p], ba, bc)
    if a < ba * B:
        h = _max(row, a, ba * B)
        if h > m:
            m = h
    if bc * B < c:
        t = _max(row, bc * B, c)
        if t > m:
            m = t
    return m


@njit(cache=True)
def _add_max(val, bmax, closed, p, a, c, b):
    """Add b to ``val[p, a:c]`` and return the range's new maximum (`_StepHistory.add_max`)."""
    row = val[p]
    for s in range(np.uint64(a), np.uint64(c)):  # unsigned: no check for negative indices, a SIMD loop
        row[s] += b
    bm = bmax[p]
    ba = -(-a // B)
    bc = c // B
    for k in range(ba, bc):
        bm[k] += b
    b0 = a // B
    b1 = (c - 1) // B
    if b0 < closed and not (ba <= b0 < bc):
        bm[b0] = _max(row, b0 * B, (b0 + 1) * B)
    if b1 != b0 and b1 < closed and not (ba <= b1 < bc):
        bm[b1] = _max(row, b1 * B, (b1 + 1) * B)
    return _range_max(val, bmax, p, a, c)


@njit(cache=True)
def fill(
    src_ptr,
    src_j,
    nsucc,
    persistent,
    temporary,
    output,
    copy_bytes,
    group,
    grp_ptr,
    grp_mem,
    op_type,
    dev_type,
    caps,
    limit,
):
    """One pass of m-TOPO's fill (`MTOPOPlacer._fill`) over arrays.  Returns (status, op of the error or -1,
    current device at the error, dev, used, top, overflows, checked, first_over op, first_over device)."""
    n = persistent.shape[0]
    D = caps.shape[0]
    used = np.zeros(D)
    checked = np.zeros(D)
    persist = np.zeros(D)
    dyn = np.zeros(D)
    peak = np.zeros(D)
    steps = n + 1
    val = np.zeros((D, steps))
    bmax = np.zeros((D, steps // B + 1))
    closed = 0
    remaining = nsucc.copy()
    copies = np.zeros((n, D), np.uint8)
    dev = np.full(n, -1, np.int64)
    overflows = 0
    fo_op = -1
    fo_dev = -1
    cur = 0
    lim = limit * (1 + 1e-12)
    nb = np.empty(0)  # bytes of the copies a candidate device would receive, in input order
    if n > 0:
        nb = np.empty(max(1, int(np.max(src_ptr[1:] - src_ptr[:-1]))))
    na = np.empty(nb.shape[0], np.int64)  # their arrival steps

    for i in range(n):
        lo = src_ptr[i]
        hi = src_ptr[i + 1]
        if dev[i] < 0:
            g = group[i]
            base = 0.0
            p_new = 0.0
            want = -1
            if g >= 0:
                for k in range(grp_ptr[g], grp_ptr[g + 1]):
                    mb = grp_mem[k]
                    base += persistent[mb] + temporary[mb] + output[mb]
                for k in range(grp_ptr[g], grp_ptr[g + 1]):
                    p_new += persistent[grp_mem[k]]
                for k in range(grp_ptr[g], grp_ptr[g + 1]):
                    if op_type[grp_mem[k]] >= 0:
                        want = op_type[grp_mem[k]]
                        break
            else:
                base += persistent[i] + temporary[i] + output[i]
                p_new += persistent[i]
                want = op_type[i]
            chosen = -1
            for p in range(cur, D):
                if want >= 0 and dev_type[p] != want:
                    continue
                nn = 0
                s = 0.0
                for e in range(lo, hi):
                    j = src_j[e]
                    if dev[j] != p and copies[j, p] == 0:
                        na[nn] = j + 1
                        nb[nn] = copy_bytes[j]
                        s += copy_bytes[j]
                        nn += 1
                now = dyn[p] + s + temporary[i] + output[i]
                # retro: the peak over the steps since the first arrival with the new copies added
                best = 0.0
                add = 0.0
                for k in range(nn):
                    add += nb[k]
                    top_hi = na[k + 1] if k + 1 < nn else i
                    if top_hi > na[k]:
                        rm = _range_max(val, bmax, p, na[k], top_hi) + add
                        if rm > best:
                            best = rm
                top = peak[p]
                if now > top:
                    top = now
                if best > top:
                    top = best
                if persist[p] + p_new + top <= caps[p]:
                    chosen = p
                    if persist[p] + p_new + top > checked[p]:
                        checked[p] = persist[p] + p_new + top
                    break
                cur = p + 1
            if chosen < 0:
                return INFEASIBLE, i, cur, dev, used, peak, overflows, checked, fo_op, fo_dev
            used[chosen] += base
            persist[chosen] += p_new
            if g >= 0:
                for k in range(grp_ptr[g], grp_ptr[g + 1]):
                    dev[grp_mem[k]] = chosen
            else:
                dev[i] = chosen
        # run op i on its device
        q = dev[i]
        for e in range(lo, hi):
            j = src_j[e]
            if dev[j] != q and copies[j, q] == 0:
                copies[j, q] = 1
                b = copy_bytes[j]
                if j + 1 < i:
                    h = _add_max(val, bmax, closed, q, j + 1, i, b)
                    if h > peak[q]:
                        peak[q] = h
                dyn[q] += b
        dyn[q] += temporary[i] + output[i]
        if dyn[q] > peak[q]:
            peak[q] = dyn[q]
        if persist[q] + peak[q] > lim[q]:
            if overflows == 0:
                fo_op = i
                fo_dev = q
            overflows += 1
        for d in range(D):
            val[d, i] = dyn[d]
        if (i + 1) % B == 0:
            blk = i // B
            for d in range(D):
                bmax[d, blk] = _max(val[d], blk * B, (blk + 1) * B)
            closed = blk + 1
        dyn[q] -= temporary[i]
        if nsucc[i] == 0:
            dyn[q] -= output[i]
        for e in range(lo, hi):
            j = src_j[e]
            remaining[j] -= 1
            if remaining[j] == 0:
                dyn[dev[j]] -= output[j]
                for r in range(D):
                    if copies[j, r]:
                        copies[j, r] = 0
                        dyn[r] -= copy_bytes[j]
    return OK, -1, cur, dev, used, persist + peak, overflows, checked, fo_op, fo_dev
