"""Compiled pieces of m-SCT's SCT LP preparation (issue 22), with numba: the exact reduction of implied edges
(`sct_lp.implied_edges_kept`) on arrays, the heads and tails of `sct_lp._heads_tails`, the single-parent
elimination of `sct_lp._eliminate_single_parents` (`eliminate`), and the windowed LP's tails and left-justified
starts (`comm_free_tails`, `left_starts`, the loops of `sct_lp.sct_lp_windowed`).  m-SCT's list scheduling is
compiled in `etf_kernel` (`run_sct`).  Each is a port, operation for operation, of the Python code it replaces
(the same float additions in the same order); `tests/test_sct_kernel.py` and `tests/test_sct_lp_build.py`
compare them.

`implied_kept` is a port of `sct_lp.implied_edges_kept` (whose docstring describes the reduction and its
exactness), operation for operation: the same bounded longest-path passes (the same ops popped, in the same
order: a min-heap of op indices, duplicates kept), the same float sums, so the same mask.  The Python function
stays the reference; `tests/test_sct_kernel.py` compares the two on random graphs.  O(V budget d log budget),
at about 1/30 of the Python function's time.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _push(heap, hn, v):
    pos = hn
    while pos > 0:
        par = (pos - 1) >> 1
        if v < heap[par]:
            heap[pos] = heap[par]
            pos = par
        else:
            break
    heap[pos] = v
    return hn + 1


@njit(cache=True)
def _pop(heap, hn):
    """Remove the smallest entry of heap[:hn] (returned first) and return it and the new size."""
    top = heap[0]
    hn -= 1
    v = heap[hn]
    pos = 0
    child = 1
    while child < hn:
        if child + 1 < hn and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] < v:
            heap[pos] = heap[child]
            pos = child
            child = 2 * pos + 1
        else:
            break
    if hn > 0:
        heap[pos] = v
    return top, hn


@njit(cache=True)
def implied_kept(sptr, sdst, pptr, psrc, p, c, budget):
    """`sct_lp.implied_edges_kept` on CSR arrays: edge e's destination ``sdst[e]`` (edges numbered in successor
    order, op i's out-edges ``sptr[i]:sptr[i+1]``), op j's producers ``psrc[pptr[j]:pptr[j+1]]`` (any order),
    p per op, c per edge.  Returns the mask of the edges kept."""
    n = sptr.shape[0] - 1
    keep = np.ones(sdst.shape[0], np.bool_)
    d = np.zeros(n)
    mark = np.zeros(n, np.int64)  # d[m] holds op i's pass value when mark[m] == i + 1 (the dict's keys)
    heap = np.empty(sdst.shape[0] + n + 1, np.int64)
    for i in range(n):
        a, b = sptr[i], sptr[i + 1]
        if b == a:
            continue
        hi = sdst[a]
        for e in range(a + 1, b):
            if sdst[e] > hi:
                hi = sdst[e]
        stamp = i + 1
        hn = 0
        any_d = False
        for e in range(a, b):
            j = sdst[e]
            if j < hi:
                d[j] = p[j]
                mark[j] = stamp
                any_d = True
                hn = _push(heap, hn, j)
        pops = 0
        while hn > 0 and pops < budget:
            k, hn = _pop(heap, hn)
            pops += 1
            dk = d[k]
            for e in range(sptr[k], sptr[k + 1]):
                m = sdst[e]
                if m < hi:
                    nd = dk + p[m]
                    if mark[m] != stamp:
                        d[m] = nd
                        mark[m] = stamp
                        hn = _push(heap, hn, m)
                    elif nd > d[m]:
                        d[m] = nd
        if any_d:
            for t in range(a, b):
                j = sdst[t]
                ce = c[t]
                for q in range(pptr[j], pptr[j + 1]):
                    m = psrc[q]
                    if m != i and (d[m] if mark[m] == stamp else -1.0) >= ce:
                        keep[t] = False
                        break
    return keep


@njit(cache=True)
def heads_tails(src, dst, p, c, h0, h1, t1):
    """The two passes of `sct_lp._heads_tails` over the edges (sources ascending), in place on h0, h1 (heads,
    started at the releases) and t1 (tails, started at p + tail): the same additions in the same order."""
    for e in range(src.shape[0]):
        i, j = src[e], dst[e]
        a = h0[i] + p[i]
        if a > h0[j]:
            h0[j] = a
        a = h1[i] + p[i] + c[e]
        if a > h1[j]:
            h1[j] = a
    for e in range(src.shape[0] - 1, -1, -1):
        i, j = src[e], dst[e]
        a = p[i] + c[e] + t1[j]
        if a > t1[i]:
            t1[i] = a


@njit(cache=True)
def eliminate(ks, kd, p, n, max_terms):
    """`sct_lp._eliminate_single_parents` on arrays: (anchor, offset, terms, nterms, gone), op v's x terms
    ``terms[v, :nterms[v]]`` (kept-edge indices, in the tuple's order).  The same ops in the same order, the
    same offset additions."""
    indeg = np.zeros(n, np.int64)
    for t in range(kd.shape[0]):
        indeg[kd[t]] += 1
    in_edge = np.full(n, -1, np.int64)
    for t in range(kd.shape[0]):
        if indeg[kd[t]] == 1:
            in_edge[kd[t]] = t
    anchor = np.arange(n)
    offset = np.zeros(n)
    terms = np.full((n, max_terms), -1, np.int64)
    nterms = np.zeros(n, np.int64)
    gone = np.zeros(n, np.bool_)
    for v in range(n):
        t = in_edge[v]
        if t < 0:
            continue
        u = ks[t]
        m = nterms[u]
        if m + 1 > max_terms:
            continue
        anchor[v] = anchor[u]
        offset[v] = offset[u] + p[u]
        for q in range(m):
            terms[v, q] = terms[u, q]
        terms[v, m] = t
        nterms[v] = m + 1
        gone[v] = True
    return anchor, offset, terms, nterms, gone


@njit(cache=True)
def comm_free_tails(succ_ptr, succ_k, p):
    """The longest path after each op's end without communication (`sct_lp_windowed`'s tails): op i's
    consumers ``succ_k[succ_ptr[i]:succ_ptr[i+1]]`` in list order, the same comparisons."""
    n = succ_ptr.shape[0] - 1
    t0 = np.zeros(n)
    for i in range(n - 1, -1, -1):
        best = 0.0
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            j = succ_k[e]
            a = p[j] + t0[j]
            if a > best:
                best = a
        t0[i] = best
    return t0


@njit(cache=True)
def left_starts(ev, src, dst, p, c, x, start):
    """Left-justified starts under x over the edges `ev` (ascending), in place on `start`: ``start[j] =
    max(start[j], start[i] + p[i] + c[e] x[e])`` edge after edge, as `sct_lp_windowed`'s loop."""
    for q in range(ev.shape[0]):
        e = ev[q]
        i = src[e]
        j = dst[e]
        a = start[i] + p[i] + c[e] * x[e]
        if a > start[j]:
            start[j] = a
