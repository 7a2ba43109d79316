"""Compiled pieces of m-SCT's SCT LP preparation (issue 22), with numba: the exact reduction of implied edges
(`sct_lp.implied_edges_kept`) on arrays.  m-SCT's list scheduling is compiled in `etf_kernel` (`run_sct`).

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
