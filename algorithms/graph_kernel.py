"""Kahn's topological order of `OpGraph._build_index` compiled with numba (issue 22: 10^6 ops).

`kahn` is `graph._kahn` on arrays: ops numbered 0..n-1 in insertion order, successors in CSR form, ties broken
by the smallest number (a binary min-heap; the numbers are unique, so any min-heap pops the order
`heapq` pops).  Complexity O((V + E) log V); the first call compiles (seconds) and caches on disk.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def kahn(ptr, dst, n):
    """The topological order of ops 0..n-1 (op k's successors: ``dst[ptr[k]:ptr[k + 1]]``), smallest number
    first among the ops whose predecessors are all placed; fewer than n ops when there is a cycle."""
    deg = np.zeros(n, np.int64)
    for e in range(dst.shape[0]):
        deg[dst[e]] += 1
    heap = np.empty(n, np.int64)
    hn = 0
    for k in range(n):  # ascending: already a heap
        if deg[k] == 0:
            heap[hn] = k
            hn += 1
    res = np.empty(n, np.int64)
    nr = 0
    while hn > 0:
        k = heap[0]
        hn -= 1
        last = heap[hn]
        pos = 0
        child = 1
        while child < hn:
            if child + 1 < hn and heap[child + 1] < heap[child]:
                child += 1
            if heap[child] < last:
                heap[pos] = heap[child]
                pos = child
                child = 2 * pos + 1
            else:
                break
        if hn > 0:
            heap[pos] = last
        res[nr] = k
        nr += 1
        for e in range(ptr[k], ptr[k + 1]):
            m = dst[e]
            deg[m] -= 1
            if deg[m] == 0:
                pos = hn
                hn += 1
                while pos > 0:
                    par = (pos - 1) >> 1
                    if m < heap[par]:
                        heap[pos] = heap[par]
                        pos = par
                    else:
                        break
                heap[pos] = m
    return res[:nr]
