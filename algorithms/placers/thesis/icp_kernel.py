"""Iterated Critical Path (thesis, seed 004, section 4.5) compiled with numba (issue 22), for graphs of 10^5-10^6
ops.

What it computes.  Exactly what `icp._place_python` computes (`IteratedCriticalPathPlacer`'s docstring states
the algorithm): the same sinks chosen, the same paths and subpaths, the same devices, the same number of
paths, and the same `InfeasiblePlacement` (the unit and the devices' remaining memory at that moment).  It is a
port, line for line, of that function over arrays; the Python function stays the reference and the code path
for small graphs.  `tests/test_icp_kernel.py` compares the two (and the version of commit 19d8e23) on random
graphs.

How the state maps to arrays (V ops, E edges, U assignment units, D devices):

* The remaining edges (the sets ``rpred`` / ``rsucc`` of the Python code): each op's inputs and consumers in
  CSR form (``pred_ptr`` / ``succ_ptr`` from `sim_kernel.index_arrays`), of which the first ``pred_n[x]`` /
  ``succ_n[x]`` entries are the remaining ones; removing an edge swaps it with the segment's last remaining
  entry (O(degree)).  The Python code only asks a set for membership, emptiness, a maximum and the members
  whose path predecessor is a given op, none of which depends on the iteration order.
* ``src``, ``val`` (= src + #ops), ``par`` (path predecessor): one entry per op.
* The sinks' lazy max-heap ``(val, op)`` is a min-heap on ``(-val, op)``, as ``heapq`` on the Python tuples.
  Equal keys are equal entries, so any binary heap pops the same sequence as ``heapq`` (no need to copy its
  sift order).  The heap grows (doubling) when full.
* The ops to recompute (the Python code's heap of op indices and its ``queued`` flags) are a three-level
  bitset: a bit per op, above it a bit per nonzero word, above that a bit per nonzero word of the middle
  level.  A push sets three bits; popping the smallest op reads the lowest set bit of three words (the top
  level is scanned from the last op popped, since every op pushed during the recomputations is a consumer of
  the op popped: later in topological order).  The same pop order as the heap.
* Units: ``unit_of`` (op -> unit), ``unit_size``, ``unit_type`` (device type code, -1 for none),
  ``unit_nmem`` (members), ``unit_exec[u, d]`` (`AssignState.exec_on`), ``unit_dev`` (-1 while unassigned);
  devices: ``dev_type``, ``cap``, ``used``, ``load`` (eq. 4.5's exec_min), updated in the Python code's order,
  so every float sum is the same sum, term for term.  (The sums of a piece's sizes add left to right as
  Python 3.11's ``sum`` does; Python 3.12 compensates float sums, which could differ in the last bit.)
* A path's subpaths are runs of one buffer (``piece_units``, ends in ``piece_end``); the Python code's
  ``cur_ids`` set is a stamp per unit.  A subpath that fits nowhere is split in halves depth-first (first half
  first) with an explicit stack instead of the recursion.

Complexity: that of the Python code, O(P * L + R * (k + log V)) (see `IteratedCriticalPathPlacer`; the
bitset makes a recomputation's queueing O(1) instead of O(log V)), memory O(V + E).  On the benchmark's random
graphs (about 55 recomputations per op, each over ~2.7 remaining inputs) the loop takes about 0.2 us per
recomputation against 2.5 us in Python: 7.5 us per op at 10K ops, where every array fits in the cache, 16 us
at 1M, where an op's inputs and consumers lie far apart in the arrays (docs/scale.md, "ICP compiled").  The
first call compiles the kernel (seconds) and caches it on disk (numba ``cache=True``, under ``__pycache__``);
later processes load it in well under a second.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ...graph import GraphIndex
from ...sim_kernel import index_arrays
from .common import AssignState, Unit

#: First size of the sinks' heap (None: 2 V); tests set it small to exercise its growth.
FIRST_ROOM: int | None = None

# statuses of `icp_run`
OK = 0
INFEASIBLE = 1  # a single unit fits on no device; its id in the second result
NO_SINK = 2  # ops remain unassigned but no sink is left (cannot happen on a DAG)


@njit(cache=True)
def _sink_lt(k0, v0, k1, v1):
    return k0 < k1 or (k0 == k1 and v0 < v1)


@njit(cache=True)
def _sink_push(hk, hv, hn, key, v):
    """Push (key, v) on the min-heap of hn entries (the arrays have room); returns hn + 1."""
    pos = hn
    while pos > 0:
        par = (pos - 1) >> 1
        if _sink_lt(key, v, hk[par], hv[par]):
            hk[pos] = hk[par]
            hv[pos] = hv[par]
            pos = par
        else:
            break
    hk[pos] = key
    hv[pos] = v
    return hn + 1


@njit(cache=True)
def _sink_pop(hk, hv, hn):
    """Remove the root of the min-heap of hn > 0 entries; returns hn - 1."""
    last = hn - 1
    key, v = hk[last], hv[last]
    pos = 0
    child = 1
    while child < last:
        right = child + 1
        if right < last and _sink_lt(hk[right], hv[right], hk[child], hv[child]):
            child = right
        if _sink_lt(hk[child], hv[child], key, v):
            hk[pos] = hk[child]
            hv[pos] = hv[child]
            pos = child
            child = 2 * pos + 1
        else:
            break
    if last > 0:
        hk[pos] = key
        hv[pos] = v
    return last


@njit(cache=True)
def _room(hk, hv, hn):
    """The sinks' heap arrays with room for one more entry (twice the size when full)."""
    if hn < hk.shape[0]:
        return hk, hv
    return np.concatenate((hk, np.empty_like(hk))), np.concatenate((hv, np.empty_like(hv)))


_U1 = np.uint64(1)
_U63 = np.uint64(63)


@njit(cache=True)
def _bit(i):
    """The bit of position i in its 64-bit word."""
    return _U1 << (np.uint64(i) & _U63)


@njit(cache=True)
def _ctz(w):
    """Index of the lowest set bit of the nonzero uint64 w."""
    k = 0
    for s in (32, 16, 8, 4, 2, 1):
        m = (_U1 << np.uint64(s)) - _U1
        if (w & m) == 0:
            w >>= np.uint64(s)
            k += s
    return k


@njit(cache=True)
def _set_add(b0, b1, b2, i):
    """Add op i to the set of ops to recompute: a bitset (b0) with a bit per nonzero word above it (b1, b2)."""
    j = i >> 6
    k = j >> 6
    b0[j] |= _bit(i)
    b1[k] |= _bit(j)
    b2[k >> 6] |= _bit(k)


@njit(cache=True)
def _set_has(b0, i):
    return (b0[i >> 6] & _bit(i)) != 0


@njit(cache=True)
def _set_pop_min(b0, b1, b2, k2):
    """Remove and return the smallest op of the nonempty set, whose top-level words before k2 are empty."""
    while b2[k2] == 0:
        k2 += 1
    k = (k2 << 6) + _ctz(b2[k2])
    j = (k << 6) + _ctz(b1[k])
    i = (j << 6) + _ctz(b0[j])
    b0[j] &= ~_bit(i)
    if b0[j] == 0:
        b1[k] &= ~_bit(j)
        if b1[k] == 0:
            b2[k2] &= ~_bit(k)
    return i


@njit(cache=True)
def _distinct(ptr, nbr, n):
    """Copy of the CSR neighbours with repeated neighbours of an op dropped (a set's contents), and each op's
    count of distinct neighbours."""
    out = nbr.copy()
    cnt = np.zeros(n, np.int64)
    seen = np.full(n, -1, np.int64)
    for x in range(n):
        k = ptr[x]
        for e in range(ptr[x], ptr[x + 1]):
            y = nbr[e]
            if seen[y] != x:
                seen[y] = x
                out[k] = y
                k += 1
        cnt[x] = k - ptr[x]
    return out, cnt


@njit(cache=True)
def _remove(ptr, nbr, cnt, x, y):
    """Remove y from x's remaining neighbours (swap with the last remaining one); nothing if absent."""
    lo = ptr[x]
    hi = lo + cnt[x]
    for e in range(lo, hi):
        if nbr[e] == y:
            nbr[e] = nbr[hi - 1]
            nbr[hi - 1] = y
            cnt[x] -= 1
            return


@njit(cache=True)
def icp_run(
    pred_ptr, pred_j, succ_ptr, succ_k, ops, unit_of, unit_size, unit_type, unit_nmem, unit_exec, dev_type, cap, room
):
    """The ICP loop (`icp._place_python`) over arrays; `room` is the first size of the sinks' heap.  Returns
    (status, unit of the error or -1, paths, unit_dev, used, load)."""
    n = ops.shape[0]
    nu = unit_size.shape[0]
    nd = cap.shape[0]
    pj, pn = _distinct(pred_ptr, pred_j, n)
    sk, sn = _distinct(succ_ptr, succ_k, n)
    unit_dev = np.full(nu, -1, np.int64)
    used = np.zeros(nd)
    load = np.zeros(nd)

    # operations source rank (eq. 4.3) and path predecessors; ties to the lowest index
    src = np.zeros(n)
    par = np.full(n, -1, np.int64)
    val = np.zeros(n)
    for i in range(n):
        best, bp = 0.0, -1
        for e in range(pred_ptr[i], pred_ptr[i] + pn[i]):
            p = pj[e]
            vp = src[p] + ops[p]
            if bp < 0 or vp > best or (vp == best and p < bp):
                best, bp = vp, p
        src[i] = best
        par[i] = bp
    for i in range(n):
        val[i] = src[i] + ops[i]

    # the sinks' lazy heap, keyed (-val, op)
    hk = np.empty(max(room, 1))
    hv = np.empty(max(room, 1), np.int64)
    hn = 0
    for v in range(n):
        if sn[v] == 0:
            hk, hv = _room(hk, hv, hn)
            hn = _sink_push(hk, hv, hn, -val[v], v)

    # the ops to recompute, popped smallest (first in topological order) first: a three-level bitset
    w0 = (n + 63) >> 6
    w1 = (w0 + 63) >> 6
    b0 = np.zeros(w0, np.uint64)
    b1 = np.zeros(w1, np.uint64)
    b2 = np.zeros((w1 + 63) >> 6, np.uint64)
    path = np.empty(n, np.int64)
    piece_units = np.empty(n, np.int64)
    piece_end = np.empty(n + 1, np.int64)
    mark = np.zeros(nu, np.int64)
    stamp = 0
    todo = np.empty(n, np.int64)  # a piece's unassigned units
    stack = np.empty(256, np.int64)  # (lo, hi) ranges of `todo` still to place: at most one per halving, < 64

    left = n
    paths = 0
    while left > 0:
        # the sink ending the longest remaining path
        while True:
            if hn == 0:
                return NO_SINK, -1, paths, unit_dev, used, load
            key, v = hk[0], hv[0]
            hn = _sink_pop(hk, hv, hn)
            if sn[v] > 0 or -key != val[v]:
                continue  # stale entry
            if unit_dev[unit_of[v]] >= 0 and pn[v] == 0:
                continue  # nothing left to do from this sink
            break
        paths += 1
        length = 0
        x = v
        while x >= 0:
            path[length] = x
            length += 1
            x = par[x]
        for k in range(length // 2):
            path[k], path[length - 1 - k] = path[length - 1 - k], path[k]

        # subpaths: runs of units not yet assigned, cut at assigned ones and at contradicting device types
        npieces = 0
        m = 0
        cur_len = 0
        cur_type = -1
        stamp += 1
        for k in range(length):
            u = unit_of[path[k]]
            if unit_dev[u] >= 0:
                if cur_len > 0:
                    piece_end[npieces] = m
                    npieces += 1
                cur_len = 0
                cur_type = -1
                stamp += 1
                continue
            if mark[u] == stamp:
                continue
            t = unit_type[u]
            if t >= 0 and cur_type >= 0 and t != cur_type:
                piece_end[npieces] = m
                npieces += 1
                cur_len = 0
                cur_type = -1
                stamp += 1
            piece_units[m] = u
            m += 1
            mark[u] = stamp
            cur_len += 1
            if cur_type < 0:
                cur_type = t
        if cur_len > 0:
            piece_end[npieces] = m
            npieces += 1

        # each subpath to the feasible device of least exec_min (eq. 4.5), split in halves where none fits
        start = 0
        for q in range(npieces):
            nt = 0
            for k in range(start, piece_end[q]):
                u = piece_units[k]
                if unit_dev[u] < 0:
                    todo[nt] = u
                    nt += 1
                    left -= unit_nmem[u]
            start = piece_end[q]
            if nt == 0:
                continue
            stack[0] = 0
            stack[1] = nt
            sp = 2
            while sp > 0:
                hi = stack[sp - 1]
                lo = stack[sp - 2]
                sp -= 2
                want = -1
                size = 0.0
                for k in range(lo, hi):
                    u = todo[k]
                    if want < 0:
                        want = unit_type[u]
                    size += unit_size[u]
                best = -1
                for d in range(nd):
                    if (want < 0 or dev_type[d] == want) and used[d] + size <= cap[d]:
                        if best < 0 or load[d] < load[best]:
                            best = d
                if best >= 0:
                    for k in range(lo, hi):
                        u = todo[k]
                        unit_dev[u] = best
                        used[best] += unit_size[u]
                        load[best] += unit_exec[u, best]
                elif hi - lo == 1:
                    return INFEASIBLE, todo[lo], paths, unit_dev, used, load
                else:
                    half = (hi - lo) // 2
                    stack[sp] = lo + half  # second half, placed after the first
                    stack[sp + 1] = hi
                    stack[sp + 2] = lo
                    stack[sp + 3] = lo + half
                    sp += 4

        # remove the path's edges and update ranks downstream
        wn = 0
        for k in range(length - 1):
            a = path[k]
            b = path[k + 1]
            _remove(succ_ptr, sk, sn, a, b)
            _remove(pred_ptr, pj, pn, b, a)
            if sn[a] == 0:
                hk, hv = _room(hk, hv, hn)
                hn = _sink_push(hk, hv, hn, -val[a], a)
            if not _set_has(b0, b):
                _set_add(b0, b1, b2, b)
                wn += 1
        k2 = 0  # every op added from now on comes after the op popped (a successor): the minimum only grows
        while wn > 0:
            x = _set_pop_min(b0, b1, b2, k2)
            k2 = x >> 18
            wn -= 1
            best, bp = 0.0, -1
            for e in range(pred_ptr[x], pred_ptr[x] + pn[x]):
                p = pj[e]
                vp = val[p]
                if bp < 0 or vp > best or (vp == best and p < bp):
                    best, bp = vp, p
            par[x] = bp
            if best != src[x]:
                src[x] = best
                val[x] = best + ops[x]
                # only a successor whose path predecessor is x can see its rank or path predecessor change
                for e in range(succ_ptr[x], succ_ptr[x] + sn[x]):
                    y = sk[e]
                    if par[y] == x and not _set_has(b0, y):
                        _set_add(b0, b1, b2, y)
                        wn += 1
                if sn[x] == 0:
                    hk, hv = _room(hk, hv, hn)
                    hn = _sink_push(hk, hv, hn, -val[x], x)
        hk, hv = _room(hk, hv, hn)
        hn = _sink_push(hk, hv, hn, -val[v], v)  # its popped entry may still be current
    return OK, -1, paths, unit_dev, used, load


def unit_arrays(
    st: AssignState, units: list[Unit], unit_of: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(unit_of, unit_size, unit_type, unit_nmem, unit_exec, dev_type, cap) for `icp_run`.  ``unit_exec[u, d]``
    is `AssignState.exec_on` (base time of the unit for d's type / d's speed, the same float division).
    O(V + U * T + U * D) for T device types."""
    codes = {t: k for k, t in enumerate(sorted(set(st.types)))}
    nu = len(units)
    unit_type = np.fromiter((-1 if u.device_type is None else codes[u.device_type] for u in units), np.int64, nu)
    unit_size = np.fromiter((u.size for u in units), np.float64, nu)
    unit_nmem = np.fromiter((len(u.members) for u in units), np.int64, nu)
    unit_exec = np.empty((nu, st.nd))
    for t in codes:
        base = np.fromiter((u.base_by_type.get(t, u.ops) for u in units), np.float64, nu)
        for d in range(st.nd):
            if st.types[d] == t:
                unit_exec[:, d] = base / st.speed[d]
    dev_type = np.array([codes[t] for t in st.types], np.int64)
    return (
        np.asarray(unit_of, np.int64),
        unit_size,
        unit_type,
        unit_nmem,
        unit_exec,
        dev_type,
        np.array(st.cap, np.float64),
    )


def run(idx: GraphIndex, st: AssignState, units: list[Unit], unit_of: list[int]) -> int:
    """Run `icp_run` on the graph and write its assignment into `st`; the number of paths.  Raises what the
    Python code raises (`InfeasiblePlacement` with the same message, or the same `AssertionError`)."""
    a = index_arrays(idx)
    ops = np.asarray(idx.compute_s, np.float64)
    room = FIRST_ROOM if FIRST_ROOM is not None else 2 * idx.n
    status, err, paths, unit_dev, used, load = icp_run(
        a["pred_ptr"], a["pred_j"], a["succ_ptr"], a["succ_k"], ops, *unit_arrays(st, units, unit_of), room
    )
    st.used = used.tolist()
    st.used_np[:] = used
    st.load = load.tolist()
    st.load_np[:] = load
    st.unit_dev = unit_dev.tolist()
    st.dev_of = unit_dev[np.asarray(unit_of, np.int64)].tolist() if unit_of else []
    if status == INFEASIBLE:
        raise st.infeasible(units[err], "iterated critical path: ")
    if status == NO_SINK:
        raise AssertionError("iterated critical path: no sink left while ops remain unassigned")
    return int(paths)
