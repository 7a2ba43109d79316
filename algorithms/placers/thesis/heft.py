"""HEFT with the thesis' adaptations (seed 004, section 4.3; Topcuoglu, Hariri and Wu, TPDS 2002)."""

from __future__ import annotations

import heapq
import logging
import math
import operator
from bisect import bisect_right
from itertools import chain, compress, count, islice, repeat
from types import ModuleType

import numpy as np
from tqdm import tqdm

from ... import compiled_mode
from ...base import Placer
from ...cluster import Cluster
from ...graph import OpGraph, gc_paused
from ...placement import Placement
from . import common
from .common import AssignState, build_units, upward_rank

log = logging.getLogger(__name__)

#: Graphs of at least this many ops are placed by the compiled loop (`heft_kernel`, numba installed): the same
#: placement and order; smaller ones by `_place_python`, which needs no compiled code loaded.  Set to None to
#: always use the Python code.
COMPILED_MIN_OPS: int | None = 2000


def _kernel(graph: OpGraph) -> ModuleType | None:
    """The `heft_kernel` module when it applies to this graph (`COMPILED_MIN_OPS`), else None."""
    if not compiled_mode.applies(graph.index().n, COMPILED_MIN_OPS):
        return None
    try:
        from . import heft_kernel
    except ImportError as exc:  # numba missing: the Python code gives the same placement, slower
        log.info("HEFT: compiled loop unavailable (%s); using the Python one", exc)
        return None
    return heft_kernel


_le = operator.le

#: slots per block of a `SlotTimeline` (blocks hold B..2B slots once split)
SLOT_BLOCK = 512


class SlotTimeline:
    """One device's timeline for HEFT's insertion-based policy: the time slots of the ops placed on it, in time
    order, with the idle gap before each slot, answering "the first gap of length >= d that starts at or after
    the ready time t" without walking the slots one by one.

    The slots are kept as a list of blocks (at most ``2 * block`` slots each, split in halves when longer), each
    block holding its slots' starts, ends, ops and *gaps* (``gap[k] = start[k] - end[k - 1]``, the first slot's
    gap measured from time 0), plus per block its last end and its largest gap.  A query (`find`) does what the
    reference slot scan (thesis 4.3: "starting at this computed time each device is checked in order to find a
    time slot which is big enough") does, in the same order and with the same floating-point expressions:

    1. the first slot ending after t (``bisect_right`` over the ends: over the blocks' last ends, then in the
       block); the op fits before it when ``start - t >= d`` (the gap that contains t, cut at t);
    2. else the first later slot whose gap is ``>= d``: the rest of the block, then the first block whose
       largest gap is ``>= d``, then the first such slot in it.  The op then starts at the previous slot's end;
    3. else it is appended after the last slot (``max(t, last end)``).

    Steps 2's scans over a block's gaps and over the blocks' largest gaps run as C-level iterations (``map`` and
    ``compress``) and stop at the first hit.  The equivalence with the slot scan needs the slots' ends to be
    non-decreasing in slot order, which insertions keep (an op goes into a gap no shorter than it); rounding
    could break it only by an op overlapping a following zero-length slot by one ulp, after an exact tie in
    ``start - t >= d`` (not seen in the fuzz tests, tests/test_heft_slots.py).

    Complexity, with n slots on the device and block size B (512): `find` O(log n) for the bisections plus at
    most 2B + n/B comparisons done in C (so O(log n) Python steps per query); `insert` O(B) (list insertions
    inside one block, a C memmove) plus O(n/B) for a split, which happens once per B insertions into a block.
    With n up to 10^6 slots the C-level terms stay below a few microseconds.
    """

    __slots__ = ("block", "starts", "ends", "ops", "gaps", "last", "gmax", "n")

    def __init__(self, block: int = SLOT_BLOCK):
        if block < 1:
            raise ValueError(f"SlotTimeline block size must be >= 1, got {block}")
        self.block = block
        self.starts: list[list[float]] = []
        self.ends: list[list[float]] = []
        self.ops: list[list[int]] = []
        self.gaps: list[list[float]] = []
        self.last: list[float] = []  # last end of each block (non-decreasing)
        self.gmax: list[float] = []  # largest gap of each block
        self.n = 0

    def end(self) -> float:
        """End of the last slot (0.0 when empty)."""
        return self.last[-1] if self.last else 0.0

    def append_pos(self) -> tuple[int, int]:
        """The position after the last slot."""
        if not self.starts:
            return 0, 0
        return len(self.starts) - 1, len(self.starts[-1])

    def find(self, ready: float, dur: float) -> tuple[float, int, int]:
        """The earliest start >= `ready` of an op of duration `dur` in this timeline and the position it goes
        to, ``(start, block, index)``: the op is inserted before slot ``index`` of ``block`` (``index`` equal to
        the block's length on the last block: appended)."""
        last = self.last
        nb = len(last)
        if nb == 0:
            return ready, 0, 0
        b = bisect_right(last, ready)
        if b == nb:  # every slot ends by `ready`
            return ready, nb - 1, len(self.starts[-1])
        j = bisect_right(self.ends[b], ready)
        if self.starts[b][j] - ready >= dur:
            return ready, b, j
        gaps = self.gaps[b]
        hit = next(compress(count(j + 1), map(_le, repeat(dur), islice(gaps, j + 1, None))), -1)
        if hit >= 0:
            return self.ends[b][hit - 1], b, hit
        b2 = next(compress(count(b + 1), map(_le, repeat(dur), islice(self.gmax, b + 1, None))), -1)
        if b2 < 0:
            return last[-1], nb - 1, len(self.starts[-1])
        hit = next(compress(count(), map(_le, repeat(dur), self.gaps[b2])))
        return (self.ends[b2][hit - 1] if hit else last[b2 - 1]), b2, hit

    def insert(self, b: int, j: int, start: float, end: float, op: int) -> tuple[float, float | None, float]:
        """Put op's slot ``[start, end)`` before slot `j` of block `b` (a position `find` or `append_pos`
        returned). Returns (the gap before the new slot, the replaced gap or None when appended, the gap after
        the new slot or 0.0 when appended), for the caller's bookkeeping."""
        self.n += 1
        if not self.starts:
            self.starts.append([start])
            self.ends.append([end])
            self.ops.append([op])
            g0 = start - 0.0
            self.gaps.append([g0])
            self.last.append(end)
            self.gmax.append(g0)
            return g0, None, 0.0
        starts, ends, gaps = self.starts[b], self.ends[b], self.gaps[b]
        prev_end = ends[j - 1] if j else (self.last[b - 1] if b else 0.0)
        g_before = start - prev_end
        replaced: float | None = None
        g_after = 0.0
        if j < len(starts):
            replaced = gaps[j]
            g_after = starts[j] - end
            gaps[j] = g_after
            gaps.insert(j, g_before)
            starts.insert(j, start)
            ends.insert(j, end)
            self.ops[b].insert(j, op)
            if replaced >= self.gmax[b]:
                self.gmax[b] = max(gaps)
            else:
                self.gmax[b] = max(self.gmax[b], g_before, g_after)
        else:
            gaps.append(g_before)
            starts.append(start)
            ends.append(end)
            self.ops[b].append(op)
            self.last[b] = end
            if g_before > self.gmax[b]:
                self.gmax[b] = g_before
        if len(starts) > 2 * self.block:
            self._split(b)
        return g_before, replaced, g_after

    def _split(self, b: int) -> None:
        h = len(self.starts[b]) // 2
        s, e, o, g = self.starts[b], self.ends[b], self.ops[b], self.gaps[b]
        self.starts[b : b + 1] = [s[:h], s[h:]]
        self.ends[b : b + 1] = [e[:h], e[h:]]
        self.ops[b : b + 1] = [o[:h], o[h:]]
        self.gaps[b : b + 1] = [g[:h], g[h:]]
        self.last[b : b + 1] = [e[h - 1], e[-1]]
        self.gmax[b : b + 1] = [max(g[:h]), max(g[h:])]

    def op_order(self) -> list[int]:
        """The ops in slot order."""
        return list(chain.from_iterable(self.ops))


class HEFTPlacer(Placer):
    """HEFT (thesis 4.3): ops by descending upward rank, each on the feasible device of earliest finish time.

    Task prioritizing: the upward rank of eq. 4.1 with the thesis' averages (eq. 4.2: computation cost
    ``#ops / speed_avr``; communication cost ``bytes / average transfer rate``, see `common.upward_rank`). Ops are
    taken in descending rank, ties broken by topological position (so a predecessor always comes first).

    Processor selection: for every *feasible* device (thesis' first adaptation) the op's earliest start is the
    latest arrival of its inputs, ``max over preds p of finish(p) + transfer_time(d(p), d, bytes)`` (0 on the
    same device; the cluster's per-pair latency and rate), and the op is inserted into the first idle gap of the
    device's timeline that starts at or after that time and is long enough (insertion-based policy). The op goes
    to the device with the lowest finish time (ties: lowest device index).

    Colocation (thesis' second adaptation): the first member of a colocation group to come up chooses the
    device, among devices feasible for the *whole* group, by its own earliest finish time; the whole group is
    then bound to that device (its memory reserved), but each later member gets its time slot only when its
    own turn in the priority list comes, on the bound device. Device feasibility also counts memory: a unit
    must fit entirely into the device's remaining memory (4.1).

    The per-device orders of the resulting timelines are returned as `Placement.order`; `info` holds HEFT's
    own makespan estimate (``heft_makespan_s``). Transfers are modelled as in the simulator's parallel mode
    (a tensor crosses once per destination device and starts when the producer finishes).

    Implementation: every device's timeline is a `SlotTimeline`, which finds the first long-enough gap at or
    after the ready time without walking the slots one by one (the scan the thesis describes, and the
    implementation before issue 22, cost O(slots) per op: 32.7 s CPU at 100K ops, past 600 s at 300K). Every
    device also keeps its idle gaps' lengths in a max-heap: per op and candidate device, the finish time is exact
    when the device's largest gap is shorter than the op (it can only append), and bounded below by ``ready +
    duration`` otherwise; the gap searches run in increasing bound order and stop as soon as no remaining device
    can beat the best finish time found (ties to the lowest device index, as searching every device would give).
    The choices (device, start, finish, order) are those of the slot scan; tests/test_heft_slots.py compares
    both on random graphs and clusters.  Graphs of `COMPILED_MIN_OPS` ops or more run the same ranks and loop
    compiled with numba (`heft_kernel`: the timelines' blocks in arrays), smaller ones `_place_python`; both
    give the same placement, order and estimate (tests/test_heft_kernel.py compares them).

    Complexity: O(V log V + (V + E) * D + V * D log D) Python steps (sorting by rank, ready times, bounds),
    plus per op and searched device one `SlotTimeline.find` (O(log V) Python steps and O(B + V / B) C-level
    comparisons, B = 512) and per op one `SlotTimeline.insert` (O(B) memmove, amortised O(V / B^2) for splits).
    Memory O(V + E + D).  The compiled loop makes the same steps without the interpreter.
    """

    name = "heft"

    def __init__(self, insertion: bool = True):
        self.insertion = bool(insertion)

    @gc_paused()  # units and lists by the million, no cycles; the collector would walk the graph each time
    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        kernel = _kernel(graph)
        if kernel is None:
            return _place_python(graph, cluster, self.insertion)
        return _place_compiled(kernel, graph, cluster, self.insertion)


def _place_compiled(kernel: ModuleType, graph: OpGraph, cluster: Cluster, insertion: bool) -> Placement:
    """HEFT by `heft_kernel` (ranks and processor selection compiled): `_place_python`'s placement, order and
    estimate, or its `InfeasiblePlacement`."""
    idx = graph.index()
    units, unit_of = build_units(graph, cluster)
    st = AssignState(graph, cluster, units, unit_of)
    if upward_rank is common.upward_rank:
        rank = kernel.upward_rank_arrays(idx, cluster)
    else:  # a rank definition put in its place (benchmarks/compare_saga.py runs HEFT with saga's ranks)
        rank = np.asarray(upward_rank(graph, cluster)[0], dtype=np.float64)
    order = np.argsort(-rank, kind="stable")  # descending rank, ties by topological position
    a = kernel.index_arrays(idx)
    uof, usize, utype, dtype = kernel.unit_arrays(st, units, unit_of)
    base, dcol = kernel.base_times(idx, st.types)
    lat = np.array(cluster.latency_table, dtype=np.float64).reshape(st.nd, st.nd)
    bw = np.array(cluster.bandwidth_table, dtype=np.float64).reshape(st.nd, st.nd)
    status, bad, dev_of, unit_dev, used, finish, slot_ops, dev_ptr = kernel.heft_run(
        order,
        a["pred_ptr"],
        a["pred_j"],
        a["pred_b"],
        base,
        uof,
        usize,
        utype,
        dtype,
        dcol,
        np.array(st.speed, np.float64),
        np.array(st.cap, np.float64),
        lat,
        bw,
        insertion,
        SLOT_BLOCK,
    )
    st.used = used.tolist()
    st.used_np[:] = used
    st.unit_dev = unit_dev.tolist()
    st.dev_of = dev_of.tolist()
    if status == kernel.INFEASIBLE:
        raise st.infeasible(units[bad], "HEFT: ")
    names = idx.names
    ops = slot_ops.tolist()
    ptr = dev_ptr.tolist()
    sched = {cluster.devices[d].name: [names[i] for i in ops[ptr[d] : ptr[d + 1]]] for d in range(st.nd)}
    est = float(finish.max()) if idx.n else 0.0
    log.debug("HEFT estimated makespan %.6g s", est)
    return st.placement(order=sched, heft_makespan_s=est)


def _place_python(graph: OpGraph, cluster: Cluster, insertion: bool) -> Placement:
    """HEFT in Python (`HEFTPlacer`'s algorithm, `SlotTimeline` per device): the reference of `heft_kernel` and
    the code path for small graphs."""
    idx = graph.index()
    units, unit_of = build_units(graph, cluster)
    st = AssignState(graph, cluster, units, unit_of)
    rank, _, _, _ = upward_rank(graph, cluster)
    order = sorted(range(idx.n), key=lambda i: (-rank[i], i))
    nd = st.nd
    lat, bw = cluster.latency_table, cluster.bandwidth_table
    types, speed = st.types, st.speed
    tls = [SlotTimeline(SLOT_BLOCK) for _ in range(nd)]
    finish = [0.0] * idx.n
    dev_of = st.dev_of
    pred = idx.pred

    # idle gaps before each device's last slot: a max-heap of lengths with lazy deletion, so that a device
    # whose largest gap is shorter than the op can only append (no search)
    gap_heap: list[list[float]] = [[] for _ in range(nd)]
    gap_live: list[dict[float, int]] = [dict() for _ in range(nd)]

    def gap_add(d: int, length: float) -> None:
        if length > 0:
            live = gap_live[d]
            live[length] = live.get(length, 0) + 1
            heapq.heappush(gap_heap[d], -length)

    def gap_remove(d: int, length: float) -> None:
        if length > 0:
            gap_live[d][length] -= 1

    def max_gap(d: int) -> float:
        h, live = gap_heap[d], gap_live[d]
        while h and live.get(-h[0], 0) == 0:
            heapq.heappop(h)
        return -h[0] if h else 0.0

    for i in tqdm(order, desc="HEFT: scheduling ops", unit="op", disable=None, leave=False):
        u = units[unit_of[i]]
        if st.assigned(u):
            cands = [st.unit_dev[u.id]]
        else:
            cands = st.feasible(u)
            if not cands:
                raise st.infeasible(u, "HEFT: ")
        # Per device a lower bound of the finish time: exact (append after the last slot) when no idle gap
        # is long enough, else ready + duration. Gap searches run in bound order and stop once no device can
        # beat the best finish time found: the same choice as searching every device.
        bounds = []
        pi = pred[i]
        for d in cands:
            ready = 0.0
            for p, b in pi:
                dp = dev_of[p]
                a = finish[p] if dp == d else finish[p] + lat[dp][d] + b / bw[dp][d]
                if a > ready:
                    ready = a
            dur = idx.exec_time(i, types[d], speed[d])
            tl = tls[d]
            if tl.n and (not insertion or max_gap(d) < dur):
                e_last = tl.last[-1]
                s0 = e_last if e_last > ready else ready
                bounds.append((s0 + dur, d, s0, dur, True))
            else:
                bounds.append((ready + dur, d, ready, dur, False))
        bounds.sort()
        best_f, best_d, best_s, best_b, best_j = math.inf, -1, 0.0, 0, 0
        for lb, d, ready, dur, exact in bounds:
            if lb > best_f or (lb == best_f and d > best_d):
                break
            if exact:
                s = ready
                bb, jj = tls[d].append_pos()
            else:
                s, bb, jj = tls[d].find(ready, dur)
            f = s + dur
            if f < best_f or (f == best_f and d < best_d):
                best_f, best_d, best_s, best_b, best_j = f, d, s, bb, jj
        if not st.assigned(u):
            st.assign(u, best_d)
        g_before, replaced, g_after = tls[best_d].insert(best_b, best_j, best_s, best_f, i)
        if replaced is not None:
            gap_remove(best_d, replaced)
            gap_add(best_d, g_after)
        gap_add(best_d, g_before)
        finish[i] = best_f
    names = idx.names
    sched = {cluster.devices[d].name: [names[i] for i in tls[d].op_order()] for d in range(nd)}
    est = max(finish, default=0.0)
    log.debug("HEFT estimated makespan %.6g s", est)
    return st.placement(order=sched, heft_makespan_s=est)
