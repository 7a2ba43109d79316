"""Baechi's placement-time execution model (seed 001 section 4.2) shared by m-ETF and m-SCT.

While m-ETF and m-SCT place ops they simulate the training step they are building, the way Baechi's
Execution Simulator (ES) does, and the way `algorithms.simulator.simulate` replays it afterwards:

* Time.  An op placed on device p starts at ``max(avail[p], data ready on p)`` and is appended to p's
  order (list scheduling without insertion into idle gaps), so replaying `Placement.order` with the
  simulator's static-order mode reproduces every start and end time.
* Communication (4.1, 3.4).  The output of producer j crosses to device p once (one transfer per
  (producer, destination device), cached there afterwards) and takes
  ``cluster.latency_table[q][p] + bytes / cluster.bandwidth_table[q][p]``.  In ``parallel`` mode a transfer
  starts when j ends.  In ``sequential`` mode every device sends one tensor at a time and receives one at a
  time: a transfer starts at ``max(end of j, sender's send queue free, receiver's receive queue free)``; the
  queue wait is thus added to the earliest schedulable time of equation (1), as section 3.4 prescribes.
* Memory (4.2).  Persistent bytes are held for the whole step; temporary bytes while the op runs; the output
  from the op's start until its last local consumer has finished and every outgoing transfer has arrived;
  a received copy from its arrival until its last consumer on that device has finished.  When the first op
  of a colocation group is placed, the group's memory is reserved on that device (3.1, 4.2): by default the
  persistent bytes of every member at once (see `ExecModel` for the larger reservations on offer).

Choices where the paper is vague (recorded here, repeated in the placers' docstrings):

* The simulator sends one copy per (producer, device) sized by the largest edge to that device.  The
  placer fixes a transfer when the first consumer lands on a device; a later consumer with a larger edge
  extends the cached arrival from then on (ops placed before keep their times).  Predicted and simulated times therefore agree exactly when each
  producer's edges to one device carry the same bytes (the thesis' model: every out-edge carries the
  producer's output), which holds for `tests.strategies.random_dags` and most real graphs.
* In sequential mode the placer reserves the communication queues in placement order, whereas the
  simulator serves requests in the order the producers finish; the prediction is then an estimate.
* Memory during placement is an *upper bound* (`DeviceMemory`): the future of an output is unknown until
  its last consumer is placed, so it is held open-ended until then; a free is applied only from the next
  op-start "slot" on.  A placement that passes the check therefore never overflows the device when the
  simulator replays it (parallel mode).  The exact peak (`DeviceMemory.exact_peak`) is recomputed from the
  recorded allocation events once every op is placed; it equals the simulator's peak for graphs whose ops
  all take positive time (ties between zero-length events may be ordered differently).

Complexity: each estimate costs O(in-degree) (plus a sort of the new transfers in sequential mode); each
memory check O(k + S / 8) numpy work for k new copies and S ops already on the device.
"""

from __future__ import annotations

import heapq
import logging
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...cluster import Cluster
from ...errors import ConfigError, InfeasiblePlacement
from ...graph import OpGraph
from ...placement import Placement

log = logging.getLogger(__name__)

#: When m-SCT excludes a device (see `PairQueue`): "exhausted" -- the op could not fit there even with no
#: transient memory live; "refusal" -- at the first op the device cannot hold when it is chosen.
EXCLUSIONS = ("exhausted", "refusal")

#: What a colocation group reserves when its first member is placed (see `ExecModel`).
GROUP_RESERVE = ("persistent", "transient", "full")


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
    """

    __slots__ = ("limit", "persistent", "starts", "val", "n", "level", "pending", "events")

    def __init__(self, limit: float, capacity: int):
        self.limit = limit
        self.persistent = 0.0
        self.starts: list[float] = [0.0]
        self.val = np.zeros(capacity + 2)
        self.n = 1
        self.level = 0.0
        self.pending: list[tuple[float, float]] = []
        self.events: list[tuple[float, int, int, float]] = []

    # ----------------------------------------------------------------- queries
    def slot(self, t: float) -> int:
        return bisect_right(self.starts, t, 0, self.n) - 1

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
        val, n = self.val, self.n
        if not pts:
            m = val[:n].max()
            return self.persistent + persist + (m if m > best else best)
        pts.sort()
        k0, add = 0, 0.0
        for k, b in pts:
            if k > k0:
                m = val[k0:k].max() + add
                if m > best:
                    best = m
                k0 = k
            add += b
        if k0 < n:
            m = val[k0:n].max() + add
            if m > best:
                best = m
        return self.persistent + persist + best

    def bound(self) -> float:
        """Current upper bound of the peak (persistent + the largest slot)."""
        return self.persistent + max(float(self.val[: self.n].max()), self.level)

    # ----------------------------------------------------------------- updates
    def open_slot(self, s: float) -> int:
        """Start a new slot at time s (an op starts); returns its index."""
        pend = self.pending
        while pend and pend[0][0] <= s:
            self.level -= heapq.heappop(pend)[1]
        n = self.n
        self.val[n] = self.level
        self.starts.append(s)
        self.n = n + 1
        return n

    def alloc(self, t: float, b: float, real: bool = True, seq: int = 0) -> None:
        """Allocate `b` bytes at time t; `seq` orders events of one instant (2k: op in slot k starts)."""
        if not b:
            return
        k = self.slot(t)
        self.val[k : self.n] += b
        self.level += b
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
            self.val[k + 1 : self.n] -= b
            self.level -= b

    def release(self, k: int, b: float) -> None:
        """Give back `b` reserved bytes in slots k.. (a colocation member is being placed)."""
        if not b:
            return
        self.val[k : self.n] -= b
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


@dataclass(slots=True)
class Estimate:
    """Earliest schedulable time of an op on a device (equation (1) plus the queue wait of 3.4)."""

    start: float
    data_ready: float
    #: transfers this placement would start: (producer, src device, start, arrival)
    new: list[tuple[int, int, float, float]] = field(default_factory=list)
    #: larger re-sends of an already cached producer (parallel mode): (producer, arrival)
    extend: list[tuple[int, float]] = field(default_factory=list)


class GroupOverflow(InfeasiblePlacement):
    """A later member of a colocation group does not fit on the device its group is pinned to; carries the
    group and device indices so that a placer can retry with the group kept off that device."""

    def __init__(self, message: str, group: int, device: int):
        super().__init__(message)
        self.group = group
        self.device = device


def place_with_group_retries(run, D: int, max_retries: int):
    """Run a list-scheduling placement, ``run(banned)``, again each time it ends in `GroupOverflow`, with
    the failing (group, device) pair added to ``banned`` (a set of ``group * D + device``) so that the group's
    first member takes its next device choice.  Baechi 3.1 places a colocation group where its memory fits
    when its first member is placed; under dynamic memory (4.2) that cannot be known in advance (a group
    joining a forward op and its backward ops needs its memory long after the first member runs), so the
    check is made a posteriori.  Returns (run's result, retries); re-raises after `max_retries`.  Each
    retry costs one list scheduling pass (not the LP of m-SCT)."""
    banned: set[int] = set()
    for retry in range(max_retries + 1):
        try:
            return run(banned), retry
        except GroupOverflow as exc:
            if retry == max_retries:
                raise
            log.info("%s; retrying with that group kept off that device", exc)
            banned.add(exc.group * D + exc.device)
    raise AssertionError("unreachable")


class ExecModel:
    """The placement-time simulation of Baechi's ES (module docstring): device clocks, transfers and their
    cache, communication queues, dynamic memory, colocation-group reservations.

    Ops are integer indices of `graph.index()`.  A placer asks `estimate(o, p)` and `fits(o, p, est)`, then
    `commit(o, p, est)`.

    `group_reserve` says what a colocation group reserves on its device when its first member is placed
    (Baechi 4.2 reserves "memory for a colocation group" without saying which): ``persistent`` (default) the
    members' persistent bytes, which are held for the whole step anyway; ``transient`` also each later
    member's temporary + output bytes, held until that member is placed; ``full`` also the outputs of its
    inputs from outside the group (possible received copies).  The larger reservations make a later member
    certain to fit but hold memory that other ops could use meanwhile; on training graphs, where a group
    joins a forward op and its backward ops, they exhaust the devices long before memory really runs out.
    A later member that does not fit on its group's device raises `InfeasiblePlacement`.  With ``memory_aware=False`` the memory is tracked (for reporting) but never
    refused, which gives the classical, memory-oblivious ETF / SCT.
    """

    def __init__(self, graph: OpGraph, cluster: Cluster, memory_aware: bool = True, group_reserve: str = "persistent"):
        if group_reserve not in GROUP_RESERVE:
            raise ConfigError(f"placer.group_reserve: {group_reserve!r} is not one of {GROUP_RESERVE}")
        self.graph = graph
        self.cluster = cluster
        self.memory_aware = memory_aware
        idx = graph.index()
        self.idx = idx
        n = idx.n
        self.n = n
        devs = cluster.devices
        D = len(devs)
        self.D = D
        self.sequential = cluster.mode == "sequential"
        self.lat = cluster.latency_table
        self.bw = cluster.bandwidth_table
        self.pred = idx.pred
        self.succ = idx.succ
        # execution time per op and device
        if any(idx.compute_by_type):
            self.dur = [[idx.exec_time(i, d.type, d.speed) for d in devs] for i in range(n)]
        else:
            speeds = [d.speed for d in devs]  # compute / speed, exactly as the simulator computes it
            self.dur = [[c / v for v in speeds] for c in idx.compute_s]
        self.persist = idx.persistent
        self.temp = idx.temporary
        self.out = idx.output
        self.copyb = idx.copy_bytes  # bytes of a received copy (as the simulator charges it)
        # device-type constraints (an op inherits its colocation group's)
        gid: list[int] = [-1] * n
        groups: dict[str, int] = {}
        self.members: list[list[int]] = []
        for i, g in enumerate(idx.colocation):
            if g is None:
                continue
            k = groups.get(g)
            if k is None:
                k = groups[g] = len(self.members)
                self.members.append([])
            gid[i] = k
            self.members[k].append(i)
        self.group_names = list(groups)
        self.gid = gid
        gtype: list[str | None] = [None] * len(self.members)
        for k, mem in enumerate(self.members):
            for i in mem:
                if idx.device_type[i] is not None:
                    gtype[k] = idx.device_type[i]
                    break
        self.allowed: list[list[int]] = []
        cache: dict[str | None, list[int]] = {}
        for i in range(n):
            t = gtype[gid[i]] if gid[i] >= 0 else idx.device_type[i]
            lst = cache.get(t)
            if lst is None:
                lst = cache[t] = [p for p, d in enumerate(devs) if t is None or d.type == t]
                if not lst:
                    raise InfeasiblePlacement(
                        f"op {idx.names[i]!r} needs a {t} device but cluster {cluster.name!r} has none"
                    )
            self.allowed.append(lst)
        # colocation reservations: a member's share = temp + out + outputs of inputs from outside the group
        self.share = [0.0] * n
        self.group_persist = [0.0] * len(self.members)
        self.group_share = [0.0] * len(self.members)
        for k, mem in enumerate(self.members):
            for i in mem:
                ext = sum(self.copyb[j] for j, _ in self.pred[i] if gid[j] != k)
                if group_reserve == "full":
                    self.share[i] = self.temp[i] + self.out[i] + ext
                elif group_reserve == "transient":
                    self.share[i] = self.temp[i] + self.out[i]
                self.group_persist[k] += self.persist[i]
                self.group_share[k] += self.share[i]
        self.group_dev = [-1] * len(self.members)
        self.group_slot = [0] * len(self.members)
        # state
        self.dev = [-1] * n
        self.slot_of = [0] * n
        self.start = [0.0] * n
        self.end = [0.0] * n
        self.avail = [0.0] * D
        self.send_free = [0.0] * D
        self.recv_free = [0.0] * D
        self.arr: list[dict[int, float] | None] = [None] * n  # producer -> {device: arrival}
        self.cons_end: list[dict[int, tuple[float, int]] | None] = [None] * n  # -> {device: (end, slot)}
        self.left_cons = [len(s) for s in self.succ]
        self.order: list[list[int]] = [[] for _ in range(D)]
        per_dev_cap = n + 1
        self.mem = [DeviceMemory(d.memory_bytes, per_dev_cap) for d in devs]
        self.n_placed = 0

    # ----------------------------------------------------------------- estimates
    def estimate(self, o: int, p: int) -> Estimate:
        """Earliest schedulable time of op o on device p: equation (1) with the communication model of the
        module docstring. All of o's inputs must be placed. O(in-degree)."""
        dev, end, arr = self.dev, self.end, self.arr
        lat, bw = self.lat, self.bw
        dr = 0.0
        if not self.sequential:
            extend = None
            trans = None
            for j, b in self.pred[o]:
                q = dev[j]
                if q == p:
                    a = end[j]
                else:
                    a = end[j] + (lat[q][p] + b / bw[q][p])
                    aj = arr[j]
                    ex = aj.get(p) if aj is not None else None
                    if ex is None:
                        if trans is None:
                            trans = []
                        trans.append((j, q, end[j], a))
                    elif ex >= a:
                        a = ex
                    else:
                        if extend is None:
                            extend = []
                        extend.append((j, a))
                if a > dr:
                    dr = a
            av = self.avail[p]
            est = Estimate(av if av > dr else dr, dr)
            if trans:
                est.new = trans
            if extend:
                est.extend = extend
            return est
        new = []
        for j, b in self.pred[o]:
            q = dev[j]
            if q == p:
                a = end[j]
            else:
                aj = arr[j]
                ex = aj.get(p) if aj is not None else None
                if ex is None:
                    new.append((end[j], j, q, b))
                    continue
                a = ex
            if a > dr:
                dr = a
        trans = []
        if new:
            new.sort()
            rf = self.recv_free[p]
            sf: dict[int, float] = {}
            for e, j, q, b in new:
                s0 = max(e, sf.get(q, self.send_free[q]), rf)
                a = s0 + (lat[q][p] + b / bw[q][p])
                sf[q] = a
                rf = a
                trans.append((j, q, s0, a))
                if a > dr:
                    dr = a
        av = self.avail[p]
        return Estimate(av if av > dr else dr, dr, trans)

    def data_ready_anywhere(self, o: int) -> float:
        """Time by which o's inputs could be on every device (communication queues ignored): an op is
        *urgent* in SCT once it can start right away on any device."""
        t = 0.0
        dev, end, lat, bw = self.dev, self.end, self.lat, self.bw
        D = self.D
        for j, b in self.pred[o]:
            q = dev[j]
            worst = 0.0
            for p in range(D):
                if p != q:
                    c = lat[q][p] + b / bw[q][p]
                    if c > worst:
                        worst = c
            a = end[j] + worst
            if a > t:
                t = a
        return t

    # ----------------------------------------------------------------- memory
    def _mem_request(self, o: int, p: int, est: Estimate):
        g = self.gid[o]
        at_start = self.temp[o] + self.out[o]
        release = None
        if g < 0:
            persist = self.persist[o]
        elif self.group_dev[g] < 0:
            persist = self.group_persist[g]
            at_start += self.group_share[g] - self.share[o]
        else:
            persist = 0.0
            release = (self.group_slot[g], self.share[o])
        copies = [(a, self.copyb[j]) for j, _, _, a in est.new] if est.new else []
        return persist, at_start, copies, release

    def need(self, o: int, p: int, est: Estimate) -> float:
        """Upper bound of device p's peak memory if o were placed there as estimated."""
        persist, at_start, copies, release = self._mem_request(o, p, est)
        return self.mem[p].bound_if(est.start, persist, at_start, copies, release)

    def exhausted(self, o: int, p: int, est: Estimate) -> bool:
        """True when device p could not hold op o even with none of its transient memory live: what stays
        allocated for the whole step (persistent bytes, colocation reservations) plus o's own bytes and
        copies already exceed the limit, so waiting for frees cannot help."""
        persist, at_start, copies, release = self._mem_request(o, p, est)
        mem = self.mem[p]
        floor = mem.persistent + persist + at_start + sum(b for _, b in copies)
        if release is not None:
            floor -= release[1]
        return floor > mem.limit

    def fits(self, o: int, p: int, est: Estimate) -> bool:
        if not self.memory_aware:
            return True
        return self.need(o, p, est) <= self.mem[p].limit

    # ----------------------------------------------------------------- commit
    def commit(self, o: int, p: int, est: Estimate) -> None:
        """Place op o on device p at its estimated start; update clocks, transfers, queues and memory."""
        persist, at_start, copies, release = self._mem_request(o, p, est)
        s = est.start
        e = s + self.dur[o][p]
        self.dev[o] = p
        self.start[o] = s
        self.end[o] = e
        self.avail[p] = e
        self.order[p].append(o)
        self.n_placed += 1
        # transfers
        for j, q, s0, a in est.new:
            aj = self.arr[j]
            if aj is None:
                aj = self.arr[j] = {}
            aj[p] = a
            if self.sequential:
                if a > self.send_free[q]:
                    self.send_free[q] = a
                if a > self.recv_free[p]:
                    self.recv_free[p] = a
        for j, a in est.extend:
            if a > self.arr[j][p]:
                self.arr[j][p] = a
        # memory
        m = self.mem[p]
        m.persistent += persist
        k_new = m.open_slot(s)
        g = self.gid[o]
        if release is not None:
            m.release(release[0], release[1])
        if g >= 0 and self.group_dev[g] < 0:
            self.group_dev[g] = p
            self.group_slot[g] = k_new
            m.alloc(s, self.group_share[g] - self.share[o], real=False)
        self.slot_of[o] = k_new
        for a, b in copies:
            m.alloc(a, b, seq=2 * k_new - 1)
        m.alloc(s, self.temp[o] + self.out[o], seq=2 * k_new)
        m.free(e, self.temp[o], s, seq=2 * k_new + 1)
        # consumers' bookkeeping: frees become known once a producer's last consumer is placed
        for j, _ in self.pred[o]:
            ce = self.cons_end[j]
            if ce is None:
                ce = self.cons_end[j] = {}
            if ce.get(p, (-1.0, 0)) <= (e, k_new):
                ce[p] = (e, k_new)
            self.left_cons[j] -= 1
            if self.left_cons[j] == 0:
                self._release_output(j)
        if not self.succ[o]:
            m.free(e, self.out[o], s, seq=2 * k_new + 1)

    def _release_output(self, j: int) -> None:
        q = self.dev[j]
        ce = self.cons_end[j] or {}
        local = ce.get(q, (self.end[j], self.slot_of[j]))
        t = max(self.end[j], local[0])
        seq = 2 * max(self.slot_of[j], local[1]) + 1
        arr = self.arr[j]
        if arr:
            for r, a in arr.items():
                if a > t:
                    t = a
                er, kr = ce[r]
                self.mem[r].free(er, self.copyb[j], a, seq=2 * kr + 1)
        self.mem[q].free(t, self.out[j], self.start[j], seq=seq)

    # ----------------------------------------------------------------- results
    def makespan(self) -> float:
        return max(self.end, default=0.0)

    def placement(self, info: dict[str, Any]) -> Placement:
        names = self.idx.names
        devs = self.cluster.devices
        assign = {names[i]: devs[self.dev[i]].name for i in range(self.n)}
        order = {d.name: [names[i] for i in self.order[k]] for k, d in enumerate(devs)}
        info = dict(info)
        info["predicted_makespan_s"] = self.makespan()
        info["n_ops"] = self.n
        for k, d in enumerate(devs):
            info[f"predicted_peak_bytes.{d.name}"] = min(self.mem[k].exact_peak(), self.mem[k].bound())
        return Placement(assign, order, info)

    def infeasible(self, o: int, tried: dict[int, float]) -> InfeasiblePlacement:
        """An error naming op o (and its colocation group) and what each device could offer."""
        names = self.idx.names
        g = self.gid[o]
        what = f"op {names[o]!r}"
        if g >= 0:
            what += f" (colocation group {self.group_names[g]!r}, {len(self.members[g])} ops)"
        parts = []
        for p in self.allowed[o]:
            d = self.cluster.devices[p]
            need = tried.get(p)
            if need is None:
                parts.append(f"{d.name}: excluded or not tried")
            else:
                parts.append(f"{d.name}: would need {need:.6g} of {d.memory_bytes:.6g} bytes")
        return InfeasiblePlacement(
            f"{what} fits on no device: "
            + "; ".join(parts)
            + ". Give the devices more memory or place fewer ops together."
        )


class PairQueue:
    """The queue of (op, device) pairs of m-ETF (seed 001 section 2.3), shared with m-SCT (2.4).

    A pair exists for every ready, unplaced op and every device it may use.  Pairs are kept in one binary
    heap per device, ordered by the op's data-ready time on that device; since the earliest schedulable
    time (equation (1)) of a pair on p is ``max(avail[p], data ready)``, device p's head is p's best pair
    and the queue's head is the best of the D heads -- the single pair queue of the paper, split by device
    so that a device's clock moving on does not invalidate its pairs.  Invalidation is lazy: pairs of placed
    ops, dropped pairs and stale generations are discarded when they reach a head, and a stored data-ready
    time that grew (sequential queues) sends the pair back when it is about to be placed; nothing is
    re-sorted.  The head pair is placed if the device can hold it (`ExecModel.fits`); otherwise the pair is
    dropped (m-ETF) or the device is excluded from further placement (m-SCT, ``exclude_full``; with
    ``exclusion="exhausted"`` only when the device could not hold the op even with no transient memory live,
    otherwise the pair is dropped as in m-ETF: under dynamic memory a device refusing an op because tensors
    are live at that moment has not run out of memory, those tensors are freed later).  Colocation
    is co-adjusted (3.1): the first member placed pins its group to the device and reserves the group's
    memory; if the group does not fit, the pair is dropped and the algorithm's next choice is taken.

    m-ETF breaks ties by earlier data-ready time, then op index, then device index.  With
    `favorite_parent` (m-SCT), pairs that could start at the same time are ordered by class as SCT does:
    0 for a favorite child on its favorite parent's device, 1 for an *urgent* op (its inputs could be on
    every device by then), 2 otherwise (`_head`); a favorite child's pairs on other devices are considered
    only once its parent's device cannot take it (memory, device type, exclusion): the favorite child waits
    for its parent's device.

    Complexity: O(V D (log V + d)) for in-degree d, plus the memory checks and the re-estimations that
    sequential queues cause.
    """

    def __init__(
        self,
        model: ExecModel,
        favorite_parent: list[int] | None = None,
        exclude_full: bool = False,
        exclusion: str = "exhausted",
        banned: set[int] | None = None,
    ):
        if exclusion not in EXCLUSIONS:
            raise ConfigError(f"placer.exclusion: {exclusion!r} is not one of {EXCLUSIONS}")
        self.m = model
        self.banned = banned or set()  # group * D + device: an unpinned group may not start there
        self.fav = favorite_parent
        self.exclude_full = exclude_full
        self.exclusion = exclusion
        n, D = model.n, model.D
        self.excluded = [False] * D
        self.dropped: set[int] = set()
        self.gen = [0] * n
        self.ready: set[int] = set()
        self.urgent_at = [0.0] * n
        self.tried: dict[int, dict[int, float]] = {}
        self.dheap: list[list[tuple[float, int, int]]] = [[] for _ in range(D)]  # (data ready, op, gen)
        self.c_fav: list[list[tuple[int, int]]] = [[] for _ in range(D)]  # released, class 0
        self.c_urg: list[list[tuple[int, int]]] = [[] for _ in range(D)]  # released, class 1
        self.c_non: list[list[tuple[float, int, int]]] = [[] for _ in range(D)]  # released, class 2
        self.n_dropped = 0
        self.n_reestimated = 0

    # ----------------------------------------------------------------- helpers
    def usable(self, o: int, p: int) -> bool:
        m = self.m
        g = m.gid[o]
        if g >= 0:
            if m.group_dev[g] >= 0:
                return p == m.group_dev[g]
            if self.banned and g * m.D + p in self.banned:
                return False
        return not self.excluded[p] and (o * m.D + p) not in self.dropped

    def favorite_device(self, o: int) -> int:
        """The device of o's favorite parent if o may still go there, else -1."""
        if self.fav is None or self.fav[o] < 0:
            return -1
        pf = self.m.dev[self.fav[o]]
        return pf if pf in self.m.allowed[o] and self.usable(o, pf) else -1

    def push_all(self, o: int) -> None:
        pf = self.favorite_device(o)
        for p in self.m.allowed[o]:
            if pf >= 0 and p != pf:
                # a favorite child's pair elsewhere never precedes the pair on its parent's device (same or
                # later time, worse class); it is pushed when that device stops being usable (`refresh`)
                continue
            if self.usable(o, p):
                d = self.m.estimate(o, p).data_ready
                heapq.heappush(self.dheap[p], (d, o, self.gen[o]))

    def make_ready(self, o: int) -> None:
        self.ready.add(o)
        if self.fav is not None:
            self.urgent_at[o] = self.m.data_ready_anywhere(o)
        self.check_alive(o)
        self.push_all(o)

    def check_alive(self, o: int) -> None:
        if not any(self.usable(o, p) for p in self.m.allowed[o]):
            raise self.m.infeasible(o, self.tried.get(o, {}))

    def refresh(self, o: int) -> None:
        self.gen[o] += 1
        self.push_all(o)

    # ----------------------------------------------------------------- main loop
    def run(self) -> None:
        m = self.m
        left = [len(pr) for pr in m.pred]
        self.left = left
        for o in range(m.n):
            if left[o] == 0:
                self.make_ready(o)
        if self.fav is None:
            self._run_per_device()
        else:
            self._run_classes()
        if m.n_placed < m.n:
            stuck = [m.idx.names[i] for i in range(m.n) if m.dev[i] < 0]
            raise InfeasiblePlacement(f"{len(stuck)} ops could not be placed, e.g. {stuck[:3]}")

    def _placed(self, o: int, first_of_group: bool) -> None:
        m = self.m
        self.ready.discard(o)
        if first_of_group:
            for mem in m.members[m.gid[o]]:
                if mem in self.ready:
                    self.refresh(mem)
        left = self.left
        for k, _ in m.succ[o]:
            left[k] -= 1
            if left[k] == 0:
                self.make_ready(k)

    def _run_per_device(self) -> None:
        """m-ETF without classes: the pair queue split by device.  Within device p the pairs are ordered by
        data-ready time, so the head has p's earliest schedulable time ``max(avail[p], data ready)``; the
        global head is the best of the D device heads.  Ties: earlier data, then op index, then device."""
        m = self.m
        D = m.D
        dheap = self.dheap
        gen = self.gen
        dev = m.dev
        while True:
            best = None
            for p in range(D):
                h = dheap[p]
                while h:
                    d, o, g = h[0]
                    if dev[o] >= 0 or g != gen[o] or not self.usable(o, p):
                        heapq.heappop(h)
                        continue
                    break
                if not h:
                    continue
                d, o, g = h[0]
                av = m.avail[p]
                k = (av if av > d else d, d, o, p)
                if best is None or k < best:
                    best = k
            if best is None:
                return
            _, d, o, p = best
            est = m.estimate(o, p)
            if est.data_ready > d:  # stored data-ready time was a lower bound (sequential queues)
                self.n_reestimated += 1
                heapq.heapreplace(dheap[p], (est.data_ready, o, gen[o]))
                continue
            heapq.heappop(dheap[p])
            self._try_commit(o, p, est)

    def _valid(self, o: int, p: int, g: int) -> bool:
        return self.m.dev[o] < 0 and g == self.gen[o] and self.usable(o, p)

    def _head(self, p: int):
        """m-SCT: device p's best pair as (time, class, op, heap holding it), or None.

        Pairs wait in ``dheap[p]`` by data-ready time; once ready by p's available time they are *released*
        into one of three heaps by class: favorite child of an op on p (0), urgent (1: its inputs could be
        on any device by now), others (2, keyed by the time they become urgent).  Released pairs all start
        at ``avail[p]``, so the best class wins, then the lower op index."""
        m = self.m
        av = m.avail[p]
        pend, fav, urg, non = self.dheap[p], self.c_fav[p], self.c_urg[p], self.c_non[p]
        while pend and pend[0][0] <= av:
            _, o, g = heapq.heappop(pend)
            if not self._valid(o, p, g):
                continue
            fp = self.fav[o]
            if fp >= 0 and m.dev[fp] == p:
                heapq.heappush(fav, (o, g))
            elif self.urgent_at[o] <= av:
                heapq.heappush(urg, (o, g))
            else:
                heapq.heappush(non, (self.urgent_at[o], o, g))
        while non and non[0][0] <= av:
            _, o, g = heapq.heappop(non)
            heapq.heappush(urg, (o, g))
        for cls, h in ((0, fav), (1, urg), (2, non)):  # among released pairs a lower class wins
            while h and not self._valid(h[0][-2], p, h[0][-1]):
                heapq.heappop(h)
            if h:
                return (av, cls, h[0][-2], h)
        while pend and not self._valid(pend[0][1], p, pend[0][2]):
            heapq.heappop(pend)
        if not pend:
            return None
        d, o, _ = pend[0]
        fp = self.fav[o]
        cls = 0 if fp >= 0 and m.dev[fp] == p else (1 if d >= self.urgent_at[o] else 2)
        return (d, cls, o, pend)

    def _run_classes(self) -> None:
        """m-SCT's loop: the best of the D device heads (`_head`) by (time, class, op, device)."""
        m = self.m
        D = m.D
        while True:
            best = None
            for p in range(D):
                h = self._head(p)
                if h is not None and (best is None or (h[0], h[1], h[2], p) < best[:4]):
                    best = (h[0], h[1], h[2], p, h[3])
            if best is None:
                return
            t, _, o, p, heap = best
            est = m.estimate(o, p)
            heapq.heappop(heap)
            if est.start > t:  # its stored data-ready time was a lower bound (sequential queues)
                self.n_reestimated += 1
                heapq.heappush(self.dheap[p], (est.data_ready, o, self.gen[o]))
                continue
            self._try_commit(o, p, est)

    def _try_commit(self, o: int, p: int, est: Estimate) -> bool:
        """Place op o on device p as estimated if its memory fits there (else record the refusal)."""
        m = self.m
        if not m.fits(o, p, est):
            self._no_fit(o, p, est)
            return False
        grp = m.gid[o]
        first_of_group = grp >= 0 and m.group_dev[grp] < 0
        m.commit(o, p, est)
        self._placed(o, first_of_group)
        return True

    def _no_fit(self, o: int, p: int, est: Estimate) -> None:
        m = self.m
        need = m.need(o, p, est)
        self.tried.setdefault(o, {})[p] = need
        g = m.gid[o]
        name = m.idx.names[o]
        dname = m.cluster.devices[p].name
        if g >= 0 and m.group_dev[g] >= 0:
            raise GroupOverflow(
                f"op {name!r} of colocation group {m.group_names[g]!r} must go to device {dname!r}, which "
                f"would need {need:.6g} of {m.mem[p].limit:.6g} bytes",
                g,
                p,
            )
        if self.exclude_full and g < 0 and (self.exclusion == "refusal" or m.exhausted(o, p, est)):
            log.debug("device %s cannot hold op %s (%.6g bytes needed): excluded", dname, name, need)
            self.excluded[p] = True
            for r in sorted(self.ready):
                if m.dev[r] < 0:
                    self.check_alive(r)
                    if self.fav is not None and self.fav[r] >= 0 and m.dev[self.fav[r]] == p:
                        self.refresh(r)
            return
        self.dropped.add(o * m.D + p)
        self.n_dropped += 1
        self.check_alive(o)
        if self.fav is not None and self.fav[o] >= 0 and m.dev[self.fav[o]] == p:
            self.refresh(o)
