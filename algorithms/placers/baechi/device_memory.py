"""Memory of one device while Baechi's list placers place ops (seed 001 section 4.2): an upper bound of its
use over time, cut into the slots between op starts, plus the exact allocation events for the final peak.

Used by `exec_model.ExecModel`; see its module docstring for what is charged when.  `etf_kernel` holds a
compiled port of this class (on arrays, for m-ETF on large graphs): a change here must be made there too.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right

import numpy as np

#: slots per block of `DeviceMemory.bmax` (the block maxima that make a range maximum O(S / B + B))
_B = 256


class DeviceMemory:
    """Upper bound of one device's memory use over time while ops are being placed (Baechi 4.2).

    The time axis is cut into *slots*: slot 0 is [0, first start), slot k the span from the k-th op start on
    the device to the next one.  ``val[k]`` bounds the dynamic (non-persistent) bytes in use at any moment
    of slot k; persistent bytes are kept apart in `persistent`, held for the whole step.  An allocation at
    time t adds to the slot holding t and every later one; a free at t subtracts from the slot after the one
    holding t (so a slot keeps its peak); a free inside the last slot waits in `pending` until a later slot
    opens.  `level` is what a slot opened now would start from.  Op starts on a device come in
    non-decreasing order (list scheduling appends), so slots are only ever appended.

    The true allocation and free events are also recorded (`events`) so that the exact peak can be
    recomputed once every free is known (`exact_peak`).

    Range maxima (issue 22).  Every update of ``val`` is a suffix add (slot k to the last slot) or an append,
    and the queries are maxima over slot ranges.  ``bmax[b]`` holds the maximum of block b (slots
    ``b * _B`` to ``b * _B + _B - 1``) once the block is full: a suffix add recomputes the full block it
    starts in and adds to the later full blocks' maxima (nothing more when it starts in the last, open block,
    the usual case), and a range maximum reads at most two partial blocks and the maxima of the full blocks
    between, O(S / _B + _B) instead of O(S) for S slots; the placers ask one per op they try.  The values
    are exactly those of ``val[a:c].max()``: rounding is monotone, so adding b to a block's maximum gives
    the maximum of the block's entries each plus b, bit for bit.
    """

    __slots__ = (
        "limit",
        "persistent",
        "starts",
        "val",
        "bmax",
        "fullmax",
        "n",
        "level",
        "pending",
        "events",
        "alloc_total",
    )

    def __init__(self, limit: float, capacity: int):
        self.limit = limit
        self.persistent = 0.0
        self.starts: list[float] = [0.0]
        self.val = np.zeros(capacity + 2)
        self.bmax = np.zeros((capacity + 2) // _B + 1)
        self.fullmax: float | None = None  # max of bmax over the full blocks (None: to recompute)
        #: every byte ever allocated (frees not subtracted): no slot can exceed it, so a request within
        #: ``limit - persistent - alloc_total`` fits without looking at the slots (`ExecModel.fits`)
        self.alloc_total = 0.0
        self.n = 1
        self.level = 0.0
        self.pending: list[tuple[float, float]] = []
        self.events: list[tuple[float, int, int, float]] = []

    # ----------------------------------------------------------------- queries
    def slot(self, t: float) -> int:
        n = self.n
        if t >= self.starts[n - 1]:  # the open slot: the usual case (an op starting now, its own bytes)
            return n - 1
        return bisect_right(self.starts, t, 0, n) - 1

    def range_max(self, a: int, c: int) -> float:
        """``val[a:c].max()`` (a < c <= n) through the block maxima. O(S / _B + _B); O(_B) for the whole
        range (the maximum of the full blocks is cached until a suffix add reaches them)."""
        val = self.val
        if c - a <= 2 * _B:
            return val[a:c].max()
        if a == 0 and c == self.n:
            full = c // _B
            fm = self.fullmax
            if fm is None:
                fm = self.fullmax = self.bmax[:full].max()
            if full * _B == c:
                return fm
            mt = val[full * _B : c].max()
            return mt if mt > fm else fm
        ba, bc = a // _B, (c - 1) // _B
        m = val[a : (ba + 1) * _B].max()
        if bc > ba + 1:
            mb = self.bmax[ba + 1 : bc].max()
            if mb > m:
                m = mb
        mt = val[bc * _B : c].max()
        return mt if mt > m else m

    def _suffix_add(self, k: int, b: float) -> None:
        """Add b to slots k..n-1 and keep the maxima of the full blocks exact (the last, open block has none:
        `range_max` reads its slots)."""
        n = self.n
        if k >= n:
            return
        if k == n - 1 and n % _B:  # the open slot of the open block: one element, no block maximum to keep
            self.val[k] += b  # the same float64 addition as the slice's
            return
        self.val[k:n] += b
        bk, full = k // _B, n // _B
        if bk >= full:  # within the open block: the usual case (an op starting now, a recent free)
            return
        bmax = self.bmax
        self.fullmax = None
        if k % _B:
            bmax[bk] = self.val[bk * _B : (bk + 1) * _B].max()
            bk += 1
        if bk < full:
            bmax[bk:full] += b

    def _pending_upto(self, s: float) -> float:
        return sum(b for t, b in self.pending if t <= s)

    def bound_if(
        self,
        s: float,
        persist: float,
        at_start: float,
        copies: list[tuple[float, float]],
        release: tuple[int, float] | None = None,
    ) -> float:
        """Upper bound of this device's peak if an op started at `s` allocating `persist` persistent bytes,
        `at_start` bytes at its start, received `copies` (arrival, bytes), and released `release` =
        (slot, bytes) of a colocation reservation. O(len(copies) log + S) with numpy."""
        new = self.level - self._pending_upto(s) + at_start
        pts: list[tuple[int, float]] = []
        for a, b in copies:
            new += b
            pts.append((self.slot(a), b))
        if release is not None and release[1]:
            new -= release[1]
            pts.append((release[0], -release[1]))
        best = new
        n = self.n
        if not pts:
            m = self.range_max(0, n)
            return self.persistent + persist + (m if m > best else best)
        pts.sort()
        k0, add = 0, 0.0
        for k, b in pts:
            if k > k0:
                m = self.range_max(k0, k) + add
                if m > best:
                    best = m
                k0 = k
            add += b
        if k0 < n:
            m = self.range_max(k0, n) + add
            if m > best:
                best = m
        return self.persistent + persist + best

    def bound(self) -> float:
        """Current upper bound of the peak (persistent + the largest slot)."""
        return self.persistent + max(float(self.range_max(0, self.n)), self.level)

    # ----------------------------------------------------------------- updates
    def open_slot(self, s: float) -> int:
        """Start a new slot at time s (an op starts); returns its index."""
        pend = self.pending
        while pend and pend[0][0] <= s:
            self.level -= heapq.heappop(pend)[1]
        n = self.n
        self.val[n] = self.level
        if (n + 1) % _B == 0:  # block n // _B is full now: its maximum is kept from here on
            m = self.bmax[n // _B] = self.val[n + 1 - _B : n + 1].max()
            if self.fullmax is not None and m > self.fullmax:
                self.fullmax = m
        self.starts.append(s)
        self.n = n + 1
        return n

    def alloc(self, t: float, b: float, real: bool = True, seq: int = 0) -> None:
        """Allocate `b` bytes at time t; `seq` orders events of one instant (2k: op in slot k starts)."""
        if not b:
            return
        n = self.n
        if t >= self.starts[n - 1] and n % _B:  # `_suffix_add` of the open slot (its fast path), inlined
            self.val[n - 1] += b
        else:
            self._suffix_add(self.slot(t), b)
        self.level += b
        self.alloc_total += b
        if real:
            self.events.append((t, 1, seq, b))

    def free(self, t: float, b: float, since: float = -1.0, real: bool = True, seq: int = 0) -> None:
        """Free `b` bytes at time t that were allocated at time `since` (`seq` as in `alloc`, used when
        since == t: bytes of a zero-length op)."""
        if not b:
            return
        if real:
            self.events.append((t, 1, seq, -b) if since >= t else (t, 0, 0, -b))
        k = self.slot(t)
        if k >= self.n - 1:
            heapq.heappush(self.pending, (t, b))
        else:
            self._suffix_add(k + 1, -b)
            self.level -= b

    def release(self, k: int, b: float) -> None:
        """Give back `b` reserved bytes in slots k.. (a colocation member is being placed)."""
        if not b:
            return
        self._suffix_add(k, -b)
        self.level -= b

    def exact_peak(self) -> float:
        """Exact peak from the recorded events.  At equal times, frees come before allocations (the simulator
        processes completions before it dispatches), except frees of bytes allocated at that very time (a
        zero-length op), which come in op order: op k's allocation, op k's frees, op k+1's allocation.
        Valid once every free is known. O(E log E)."""
        cur = peak = 0.0
        for _, _, _, d in sorted(self.events):
            cur += d
            if cur > peak:
                peak = cur
        return self.persistent + peak
