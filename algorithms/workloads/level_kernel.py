"""The draws of `synthetic.level_dag`'s levels compiled with numba (issue 22: a 10^6-op graph).

`draw_levels` consumes CPython's Mersenne Twister (MT19937, the generator of `random.Random`) exactly as
`level_dag`'s level loop does, op by op and trial by trial, and returns what it drew: each level's width, each
forward op's #ops, memory and tensor draws and its device-type draw, and the forward edges in drawing order.
The generator's state goes in and comes back as `random.Random.getstate` holds it, so the Python code that
follows (random edges, colocation groups) continues the same stream: the graph is the one the Python loop
builds, op for op and edge for edge (`tests/test_level_kernel.py` compares the two).

The draws are CPython's (`Modules/_randommodule.c`, `Lib/random.py`, 3.8 and later): ``genrand_uint32`` (the
reference MT19937 of Matsumoto and Nishimura), ``random()`` = ``(a * 2^26 + b) / 2^53`` with ``a``, ``b`` the
top 27 and 26 bits of two words, ``randint(lo, hi)`` = ``lo + r`` with ``r`` the top ``k`` bits of one word,
``k`` the bit length of ``hi - lo + 1``, drawn again while ``r > hi - lo`` (`Random._randbelow_with_getrandbits`).

Complexity: O(levels * limit * width^2) draws, a few nanoseconds each; the first call compiles the kernel
(seconds) and caches it on disk (numba ``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_N, _M = 624, 397
_MATRIX_A, _UPPER, _LOWER = 0x9908B0DF, 0x80000000, 0x7FFFFFFF


@njit(cache=True)
def _twist(mt):
    for kk in range(_N - _M):
        y = (mt[kk] & _UPPER) | (mt[kk + 1] & _LOWER)
        mt[kk] = mt[kk + _M] ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
    for kk in range(_N - _M, _N - 1):
        y = (mt[kk] & _UPPER) | (mt[kk + 1] & _LOWER)
        mt[kk] = mt[kk + (_M - _N)] ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
    y = (mt[_N - 1] & _UPPER) | (mt[0] & _LOWER)
    mt[_N - 1] = mt[_M - 1] ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)


@njit(cache=True)
def _word(mt, st):
    """CPython's ``genrand_uint32``: the next 32-bit word (an int64 in [0, 2^32)); ``st[0]`` the position."""
    if st[0] >= _N:
        _twist(mt)
        st[0] = 0
    y = mt[st[0]]
    st[0] += 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y


@njit(cache=True)
def _random(mt, st):
    """``random.Random.random``."""
    a = _word(mt, st) >> 5
    b = _word(mt, st) >> 6
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def _randint(mt, st, lo, hi):
    """``random.Random.randint(lo, hi)`` for ``1 <= hi - lo + 1 <= 2^32``."""
    n = hi - lo + 1
    k = 0
    while (n >> k) > 0:
        k += 1
    r = _word(mt, st) >> (32 - k)
    while r >= n:
        r = _word(mt, st) >> (32 - k)
    return lo + r


@njit(cache=True)
def draw_levels(mt, st, levels, wmin, wmax, ranges, p_cpu, p_cpu_gpu, probs, limit, max_ops):
    """`level_dag`'s level loop (module docstring).  ``mt`` (624 words) and ``st[0]`` (the position) are the
    generator's state, updated in place; ``ranges``: (lo, hi) of #ops, memory and tensor draws; ``probs[dist]``
    the edge probability between levels ``dist`` apart (``probs[0]`` unused); ``limit`` the edge level limit
    (0: none); ``max_ops`` the most forward ops there can be (levels * wmax).

    Returns (width per level, per op (#ops, memory, tensor) draws, per op device-type code (0 none, 1 CPU,
    2 GPU), edge sources, edge destinations), the edges in drawing order."""
    width = np.empty(levels, np.int64)
    draws = np.empty((max_ops, 3), np.int64)
    dtc = np.zeros(max_ops, np.int8)
    first = np.empty(levels + 1, np.int64)  # first op of each level
    cap = 1024
    src = np.empty(cap, np.int64)
    dst = np.empty(cap, np.int64)
    ne = 0
    k = 0
    for lv in range(levels):
        w = _randint(mt, st, wmin, wmax)
        width[lv] = w
        first[lv] = k
        for _ in range(w):
            for c in range(3):
                draws[k, c] = _randint(mt, st, ranges[c, 0], ranges[c, 1])
            u = _random(mt, st)
            if u < p_cpu:
                dtc[k] = 1
            elif u < p_cpu_gpu:
                dtc[k] = 2
            k += 1
        first[lv + 1] = k
        lo = 0 if limit <= 0 else max(0, lv - limit)
        for plv in range(lo, lv):
            p = probs[lv - plv]
            if p <= 0:
                continue
            for a in range(first[plv], first[plv + 1]):
                for b in range(first[lv], k):
                    if _random(mt, st) < p:
                        if ne == cap:
                            cap *= 2
                            src2 = np.empty(cap, np.int64)
                            dst2 = np.empty(cap, np.int64)
                            src2[:ne] = src[:ne]
                            dst2[:ne] = dst[:ne]
                            src, dst = src2, dst2
                        src[ne] = a
                        dst[ne] = b
                        ne += 1
    return width, draws[:k].copy(), dtc[:k].copy(), src[:ne].copy(), dst[:ne].copy()
