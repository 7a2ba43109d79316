"""Baechi's placement-time execution model (seed 001 section 4.2) shared by m-ETF and m-SCT: when does an op
start on a device, which transfers does that cause, and does the device's memory hold it.

While m-ETF and m-SCT place ops they simulate the training step they are building, the way Baechi's
Execution Simulator (ES) does, and the way `algorithms.simulator.simulate` replays it afterwards:

* Time.  An op placed on device p starts at ``max(avail[p], data ready on p)`` and is appended to p's
  order (list scheduling without insertion into idle gaps), so replaying `Placement.order` with the
  simulator's static-order mode reproduces every start and end time.
* Communication (4.1, 3.4).  The output of producer j crosses to device p once (one transfer per
  (producer, destination device), cached there afterwards) and takes
  ``cluster.latency_table[q][p] + bytes / cluster.bandwidth_table[q][p]``.  In ``parallel`` mode a transfer
  starts when j ends.  In ``sequential`` mode every device sends one tensor at a time and receives one at a
  time, and the queues serve transfers in the order they are requested, when their producers end
  (`algorithms.comm_queue`, the one model of transfer order the simulator also uses): a transfer starts at
  ``max(end of j, the sender's and the receiver's queue free of the transfers requested before it)``; the
  queue wait is thus added to the earliest schedulable time of equation (1), as section 3.4 prescribes.
* Memory (4.2).  Persistent bytes are held for the whole step; temporary bytes while the op runs; the output
  from the op's start until its last local consumer has finished and every outgoing transfer has arrived;
  a received copy from its arrival until its last consumer on that device has finished.  When the first op
  of a colocation group is placed, the group's memory is reserved on that device (3.1, 4.2): by default the
  persistent bytes of every member at once (see `ExecModel` for the larger reservations on offer).

Choices where the paper is vague (recorded here, repeated in the placers' docstrings):

* The simulator sends one copy per (producer, device) sized by the largest edge to that device.  The
  placer fixes a transfer when the first consumer lands on a device; a later consumer with a larger edge
  extends the cached arrival from then on (ops placed before keep their times).  Predicted and simulated
  times therefore agree exactly when each
  producer's edges to one device carry the same bytes (the thesis' model: every out-edge carries the
  producer's output), which holds for `tests.strategies.random_dags` and most real graphs.
* Sequential mode: the paper's ES puts a request in the queues when it is made during placement; the
  simulator, like a runtime, when the producer ends.  A list scheduler learns of a transfer when the first
  consumer lands on its device, possibly after transfers requested later were planned, so the transfer is
  placed at its request-order place in the queues (`comm_queue.KeyedLinks`).  If it would delay a transfer
  planned after it (or a later consumer makes a planned transfer larger, or moves it ahead of another of its
  producer's transfers), the times of every op placed so far are recomputed by replaying them in their
  per-device order with the simulator's rules (`_retime`, O((V + E) log V) each, counted in
  ``info["n_retimed"]``), and the memory accounting is rebuilt from the new times.  So after every commit
  the model's times are the simulator's replay of the ops placed so far, and the placement's predicted
  times are the simulator's (ties between ops that take no time aside, see `comm_queue`).  A re-timing
  moves ops later than the times their memory was checked at, so a placement may still overflow in the
  replay: `safeguards.place_checked` keeps its sequential check.  Our choice, since equation (1) only sees
  the op's own start: a pair whose new transfers would delay planned ones is estimated later by the sum of
  the delays they cause on the shared queues (`comm_queue.KeyedLinks.probe`, `DELAY_PENALTY`), so that the
  list scheduler prefers a pair that leaves the plan as it is.  A re-timing costs a replay and a rebuild of
  the memory accounting, O(V) Python work, and on training graphs about one commit in three delays a planned
  transfer; so a stale plan is re-timed at most once every ceil(V / `RETIMES`) commits (every time on graphs
  of up to 32 ops), and once more when the placement is read (`sync`): in between, estimates are made on
  the stale plan (the transfers placed after a delayed one keep their planned times), and the placement's
  predicted times are the simulator's either way.  Measured on a 704-op training graph
  (`tests.scale_fixture`, sequential case; re-timing at every delay): m-ETF's placement ran 0.409 s without
  the delay rule and 0.215 s with it, against 0.209 s for the placement-order queues of before (whose own
  prediction was 0.169 s); with `RETIMES` = 32, 0.214 s.
* Memory during placement is an *upper bound* (`DeviceMemory`): the future of an output is unknown until
  its last consumer is placed, so it is held open-ended until then; a free is applied only from the next
  op-start "slot" on.  A placement that passes the check therefore never overflows the device when the
  simulator replays it (parallel mode).  The exact peak (`DeviceMemory.exact_peak`) is recomputed from the
  recorded allocation events once every op is placed; it equals the simulator's peak for graphs whose ops
  all take positive time (ties between zero-length events may be ordered differently).  The bound itself is
  kept by `device_memory.DeviceMemory`; the queues that choose what to place next are in `pair_queue`
  (m-ETF) and `sct_queue` (m-SCT).

m-ETF runs a compiled port of this model's parallel mode with `pair_queue.PairQueue` on large graphs
(`etf_kernel`); a change here must be made there too (`tests/test_etf_kernel.py` compares the two).

Complexity: each estimate costs O(in-degree) (plus O(k log T) for k new transfers among T planned in
sequential mode); each memory check O(k + S / 8) numpy work for k new copies and S ops already on the
device; each sequential re-timing O((V + E) log V) plus rebuilding the memory accounting.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...cluster import Cluster
from ...comm_queue import KeyedLinks, TransferKey, replay, transfer_key
from ...errors import ConfigError, InfeasiblePlacement
from ...graph import OpGraph
from ...placement import Placement
from .device_memory import DeviceMemory

log = logging.getLogger(__name__)

#: Sequential mode: a pair whose transfers would delay planned ones is estimated later by the delays it causes
#: (module docstring); False only to measure the rule.
DELAY_PENALTY = True

#: Sequential mode: at most about this many re-timings while placing (one every ceil(V / RETIMES) commits at
#: most, plus one at the end); see the module docstring.
RETIMES = 32

#: What a colocation group reserves when its first member is placed (see `ExecModel`).
GROUP_RESERVE = ("persistent", "transient", "full")


@dataclass(slots=True)
class Estimate:
    """Earliest schedulable time of an op on a device (equation (1) plus the queue wait of 3.4)."""

    start: float
    data_ready: float
    #: transfers this placement would start: (producer, src device, start, arrival)
    new: list[tuple[int, int, float, float]] = field(default_factory=list)
    #: larger re-sends of an already cached producer (parallel mode): (producer, arrival)
    extend: list[tuple[int, float]] = field(default_factory=list)
    #: sequential mode: committing it reorders or delays planned transfers, so the plan must be re-timed
    retime: bool = False


def durations(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Execution time per op and device, an ops x devices float64 array (`ExecModel.dur`): each value the float
    the simulator computes, compute / speed (the op's time for the device's type when it has one).  A function
    of its own so that m-SCT can start its LP, which needs only the mean of each row (`mean_durations`), before
    the rest of the `ExecModel` is built (`MSCTPlacer.place`).  O(n D)."""
    idx = graph.index()
    devs = cluster.devices
    n, D = idx.n, len(devs)
    if any(idx.compute_by_type):
        per_op = (idx.exec_time(i, d.type, d.speed) for i in range(n) for d in devs)
        return np.fromiter(per_op, np.float64, n * D).reshape(n, D)
    speeds = np.array([d.speed for d in devs], np.float64)
    return np.divide.outer(np.array(idx.compute_s, np.float64).reshape(n), speeds)


def mean_durations(dur: np.ndarray) -> np.ndarray:
    """Each row's mean of a `durations` array (`ExecModel.mean_durations`, whose docstring says which floats).
    O(n D)."""
    n, D = dur.shape
    if D == 0:
        return np.zeros(n)
    acc = dur[:, 0].copy()
    for p in range(1, D):
        acc += dur[:, p]
    return acc / D


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
    A later member that does not fit on its group's device raises `InfeasiblePlacement`.  `margins` keeps
    that many bytes free on each device (the replay check of `safeguards`).  With
    ``memory_aware=False`` the memory is tracked (for reporting) but never
    refused, which gives the classical, memory-oblivious ETF / SCT.
    """

    def __init__(
        self,
        graph: OpGraph,
        cluster: Cluster,
        memory_aware: bool = True,
        group_reserve: str = "persistent",
        margins: list[float] | None = None,
    ):
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
        #: execution time per op and device, an ops x devices float64 array (issue 22: a list of D Python floats
        #: per op took 1.8 M objects, 55 MB, at 300,000 ops on four devices; the array takes 9.6 MB).  Each value
        #: is the float the simulator computes, compute / speed; Python code reads them back as Python floats
        #: (``dur.item(o, p)``, `mean_durations`), so every sum and comparison is the one of the list-based model.
        self.dur: np.ndarray = durations(graph, cluster)
        self.persist = idx.persistent
        self.temp = idx.temporary
        self.out = idx.output
        self.copyb = idx.copy_bytes  # bytes of a received copy (as the simulator charges it)
        self.ntens = idx.copy_tensors  # latencies a transfer of the op pays (coarse ops: their tensors)
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
        if n and D and all(t is None for t in idx.device_type):  # no constraint: one shared list of every device
            self.allowed = [list(range(D))] * n
        for i in range(n if not self.allowed else 0):
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
                if group_reserve == "full":
                    ext = sum(self.copyb[j] for j, _ in self.pred[i] if gid[j] != k)
                    self.share[i] = self.temp[i] + self.out[i] + ext
                elif group_reserve == "transient":
                    self.share[i] = self.temp[i] + self.out[i]
                self.group_persist[k] += self.persist[i]
                self.group_share[k] += self.share[i]
        # position of each consumer in its producer's successor list (the order of one producer's transfers;
        # sequential mode only)
        self.succ_pos: list[dict[int, int]] = (
            [{c: k for k, (c, _) in enumerate(s)} for s in self.succ] if self.sequential else []
        )
        self.margins = margins or [0.0] * D  # bytes kept free on each device (`safeguards.place_checked`)
        #: per device, bumped whenever its clock or its memory changes (a refused op may fit after a bump)
        self.version = [0] * D
        self.n_retimed = 0
        self.delay_penalty = DELAY_PENALTY
        self._replaying = False
        #: set by `etf_kernel.run`: (predicted peak per device, arrivals of the transfers as an ops x devices
        #: array, NaN where none) of a placement computed by the compiled list scheduling, whose memory
        #: accounting and transfers are not mirrored into this object
        self.compiled: tuple[list[float], Any] | None = None
        self.stale = False  # a commit delayed planned transfers and the plan is not re-timed yet
        self.since_retime = 0
        self.retime_gap = max(1, -(-n // RETIMES))
        self._reset()

    def _reset(self) -> None:
        """The placement state: nothing placed.  Lists are refilled in place, since the queues hold references
        to some of them (`pair_queue.PairQueue._loop` reads ``dev`` through a local name)."""
        n, D = self.n, self.D
        devs = self.cluster.devices
        per_dev_cap = n + 1
        fresh: dict[str, list] = {
            "group_dev": [-1] * len(self.members),
            "group_slot": [0] * len(self.members),
            "dev": [-1] * n,
            "slot_of": [0] * n,
            "start": [0.0] * n,
            "end": [0.0] * n,
            "avail": [0.0] * D,
            "arr": [None] * n,  # producer -> {device: arrival}
            "cons_end": [None] * n,  # producer -> {device: (end of its last consumer there, slot)}
            "left_cons": [len(s) for s in self.succ],
            "order": [[] for _ in range(D)],
            "mem": [DeviceMemory(d.memory_bytes - self.margins[k], per_dev_cap) for k, d in enumerate(devs)],
            #: committed (op, device) in placement order (what `_retime` replays)
            "log": [],
        }
        for name, value in fresh.items():
            old = getattr(self, name, None)
            if old is None:
                setattr(self, name, value)
            else:
                old[:] = value
        self.dev: list[int]
        self.slot_of: list[int]
        self.start: list[float]
        self.end: list[float]
        self.avail: list[float]
        self.group_dev: list[int]
        self.group_slot: list[int]
        self.arr: list[dict[int, float] | None]
        self.cons_end: list[dict[int, tuple[float, int]] | None]
        self.left_cons: list[int]
        self.order: list[list[int]]
        self.mem: list[DeviceMemory]
        self.log: list[tuple[int, int]]
        self.n_placed = 0
        #: sequential mode: the planned transfers in request order, and (producer, device) -> its key and bytes
        self.links = KeyedLinks(D)
        self.xfer: dict[tuple[int, int], tuple[tuple[float, int, int], float]] = {}

    def mean_durations(self) -> np.ndarray:
        """Each op's mean execution time over the devices (what m-SCT's LP takes as the op's compute time): the
        durations of the op's row added left to right, divided by D, for all ops at once: the floats that
        ``sum(row) / D`` gives in Python 3.11 (plain left-to-right addition; `_mean_durations_loop`, the code
        before session 16, is the reference of tests/test_exec_model_dur.py).  O(n D)."""
        return mean_durations(self.dur)

    def _mean_durations_loop(self) -> list[float]:
        """`mean_durations` with Python's `sum` over each row (its code before session 16)."""
        D, out = self.D, []
        for k in range(0, self.n, 65536):
            out.extend([sum(row) / D for row in self.dur[k : k + 65536].tolist()])
        return out

    # ----------------------------------------------------------------- estimates
    def estimate(self, o: int, p: int) -> Estimate:
        """Earliest schedulable time of op o on device p: equation (1) with the communication model of the
        module docstring. All of o's inputs must be placed. O(in-degree)."""
        dev, end, arr = self.dev, self.end, self.arr
        lat, bw, nt = self.lat, self.bw, self.ntens
        dr = 0.0
        if not self.sequential:
            extend = None
            trans = None
            for j, b in self.pred[o]:
                q = dev[j]
                if q == p:
                    a = end[j]
                else:
                    a = end[j] + (lat[q][p] * nt[j] + b / bw[q][p])
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
        retime = False
        for j, b in self.pred[o]:
            q = dev[j]
            if q == p:
                a = end[j]
            else:
                aj = arr[j]
                ex = aj.get(p) if aj is not None else None
                if ex is None:
                    new.append((transfer_key(end[j], j, self.succ_pos[j][o]), j, q, b))
                    continue
                a = ex
                if not retime:
                    retime = self._reorders(j, p, self.succ_pos[j][o], b)
            if a > dr:
                dr = a
        trans = []
        if new:
            new.sort()
            times, delay = self.links.probe([(k, q, p, lat[q][p] * nt[j] + b / bw[q][p]) for k, j, q, b in new])
            for (_, j, q, _), (s0, a) in zip(new, times):
                trans.append((j, q, s0, a))
                if a > dr:
                    dr = a
            if delay > 0.0:
                retime = True
                if self.delay_penalty:
                    dr += delay
        av = self.avail[p]
        return Estimate(av if av > dr else dr, dr, trans, retime=retime)

    def _reorders(self, j: int, p: int, rank: int, nbytes: float) -> bool:
        """Sequential mode: whether a new consumer (at position `rank` of j's successors, reading `nbytes`) of
        the planned transfer of j to p changes the plan: a larger tensor, or an earlier first consumer that
        moves the transfer ahead of another of j's transfers."""
        key, sent = self.xfer[(j, p)]
        if nbytes > sent:
            return True
        if rank >= key[2]:
            return False
        for r in self.arr[j] or ():
            if r != p and rank < self.xfer[(j, r)][0][2] < key[2]:
                return True
        return False

    def data_ready(self, o: int, p: int) -> float:
        """``estimate(o, p).data_ready`` without building the estimate: the key of the pair queues, asked
        for every device an op may use when it becomes ready (issue 22: the same value, no allocation in
        parallel mode). O(in-degree)."""
        if self.sequential:
            return self.estimate(o, p).data_ready
        dev, end, arr, lat, bw, nt = self.dev, self.end, self.arr, self.lat, self.bw, self.ntens
        dr = 0.0
        for j, b in self.pred[o]:
            q = dev[j]
            if q == p:
                a = end[j]
            else:
                a = end[j] + (lat[q][p] * nt[j] + b / bw[q][p])
                aj = arr[j]
                if aj is not None:
                    ex = aj.get(p)
                    if ex is not None and ex >= a:
                        a = ex
            if a > dr:
                dr = a
        return dr

    def data_ready_all(self, o: int, ps: list[int]) -> list[float]:
        """``[data_ready(o, p) for p in ps]`` in one pass over o's inputs (parallel mode; the key of every
        pair an op gets when it becomes ready). O(in-degree x len(ps))."""
        if self.sequential:
            return [self.estimate(o, p).data_ready for p in ps]
        dev, end, arr, lat, bw, nt = self.dev, self.end, self.arr, self.lat, self.bw, self.ntens
        drs = [0.0] * len(ps)
        for j, b in self.pred[o]:
            q = dev[j]
            ej = end[j]
            aj = arr[j]
            latq, bwq = lat[q], bw[q]
            ntj = nt[j]
            for i, p in enumerate(ps):
                if q == p:
                    a = ej
                else:
                    a = ej + (latq[p] * ntj + b / bwq[p])
                    if aj is not None:
                        ex = aj.get(p)
                        if ex is not None and ex >= a:
                            a = ex
                if a > drs[i]:
                    drs[i] = a
        return drs

    def data_ready_anywhere(self, o: int) -> float:
        """Time by which o's inputs could be on every device (communication queues ignored): an op is
        *urgent* in SCT once it can start right away on any device."""
        t = 0.0
        dev, end, lat, bw, nt = self.dev, self.end, self.lat, self.bw, self.ntens
        D = self.D
        for j, b in self.pred[o]:
            q = dev[j]
            worst = 0.0
            for p in range(D):
                if p != q:
                    c = lat[q][p] * nt[j] + b / bw[q][p]
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
        """Whether device p holds op o as estimated: `need` within the limit.  First a bound in O(copies):
        no slot holds more than every byte ever allocated on the device (`DeviceMemory.alloc_total`), so a
        request that fits on top of all of them fits (issue 22: with ample memory no slot is looked at);
        the same answer as `need` alone."""
        if not self.memory_aware:
            return True
        m = self.mem[p]
        persist, at_start, copies, _ = self._mem_request(o, p, est)
        top = m.persistent + persist + m.alloc_total + at_start
        for _, b in copies:
            top += b
        if top * (1 + 1e-9) <= m.limit:  # the margin covers rounding in the slots' sums of many ops
            return True
        return self.need(o, p, est) <= m.limit

    # ----------------------------------------------------------------- commit
    def commit(self, o: int, p: int, est: Estimate) -> None:
        """Place op o on device p at its estimated start; update clocks, transfers, queues and memory."""
        persist, at_start, copies, release = self._mem_request(o, p, est)
        s = est.start
        e = s + self.dur.item(o, p)
        self.dev[o] = p
        self.start[o] = s
        self.end[o] = e
        self.avail[p] = e
        self.order[p].append(o)
        self.n_placed += 1
        self.log.append((o, p))
        # transfers
        for j, q, s0, a in est.new:
            aj = self.arr[j]
            if aj is None:
                aj = self.arr[j] = {}
            aj[p] = a
            if self.sequential and not self._replaying:
                key = transfer_key(self.end[j], j, self.succ_pos[j][o])
                self.links.add(key, q, p, s0, a)
                self.xfer[(j, p)] = (key, self._edge_bytes(j, o))
        if self.sequential and not self._replaying:
            for j, _ in self.pred[o]:  # a planned transfer whose first consumer is now o: its key moves
                q = self.dev[j]
                x = self.xfer.get((j, p)) if q != p else None
                if x is not None and self.succ_pos[j][o] < x[0][2]:
                    key = transfer_key(x[0][0], j, self.succ_pos[j][o])
                    aj = self.arr[j]
                    assert aj is not None
                    s0 = self.links.send[q].starts[self.links.send[q].keys.index(x[0])]
                    self.links.remove(x[0], q, p)
                    self.links.add(key, q, p, s0, aj[p])
                    self.xfer[(j, p)] = (key, max(x[1], self._edge_bytes(j, o)))
        for j, a in est.extend:
            cached = self.arr[j]
            if cached is not None and a > cached[p]:  # an extension is of a cached transfer
                cached[p] = a
        # memory
        m = self.mem[p]
        self.version[p] += 1
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
        ek = (e, k_new)
        cons_end, left_cons = self.cons_end, self.left_cons
        for j, _ in self.pred[o]:
            ce = cons_end[j]
            if ce is None:
                cons_end[j] = {p: ek}
            else:
                cur = ce.get(p)
                if cur is None or cur <= ek:
                    ce[p] = ek
            left_cons[j] -= 1
            if left_cons[j] == 0:
                self._release_output(j)
        if not self.succ[o]:
            m.free(e, self.out[o], s, seq=2 * k_new + 1)
        if not self._replaying:
            self.since_retime += 1
            if est.retime:
                self.stale = True
            if self.stale and self.since_retime >= self.retime_gap:
                self._retime()

    def sync(self) -> None:
        """Re-time the plan if a commit left it stale (sequential mode, `RETIMES`)."""
        if self.stale:
            self._retime()

    def _edge_bytes(self, j: int, o: int) -> float:
        return self.succ[j][self.succ_pos[j][o]][1]

    # ----------------------------------------------------------------- sequential re-timing
    def _replay(self) -> tuple[list[float], dict[tuple[int, int], tuple[TransferKey, float, float, float]]]:
        """`comm_queue.replay` of the ops placed so far in their per-device order."""
        dev, dur = self.dev, self.dur
        durs = [dur.item(o, dev[o]) if dev[o] >= 0 else 0.0 for o in range(self.n)]
        return replay(self.order, dev, durs, self.succ, self.pred, self.cluster.transfer_time, self.ntens)

    def _retime(self) -> None:
        """Recompute the times of every placed op by `_replay` and rebuild the model (clocks, transfers,
        queues, memory) by committing the ops again, in placement order, at those times."""
        self.n_retimed += 1
        self.stale = False
        self.since_retime = 0
        start, xfer = self._replay()
        log = list(self.log)
        self._reset()
        self._replaying = True
        try:
            for o, p in log:
                new = []
                for j, _ in self.pred[o]:
                    q = self.dev[j]
                    aj = self.arr[j]
                    if q != p and (aj is None or p not in aj):
                        x = xfer[(j, p)]
                        new.append((j, q, x[1], x[2]))
                self.commit(o, p, Estimate(start[o], start[o], new))
        finally:
            self._replaying = False
        for (j, p), (key, s0, a, nbytes) in xfer.items():
            self.links.add(key, self.dev[j], p, s0, a)
            self.xfer[(j, p)] = (key, nbytes)
        for p in range(self.D):
            self.version[p] += 1

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
                self.version[r] += 1
        self.mem[q].free(t, self.out[j], self.start[j], seq=seq)
        self.version[q] += 1

    # ----------------------------------------------------------------- results
    def planned_transfers(self) -> dict[tuple[int, int], tuple[float, float]]:
        """(producer, device) -> (start, arrival) of every transfer the model has planned. O(T log T)."""
        self.sync()
        out: dict[tuple[int, int], tuple[float, float]] = {}
        if self.compiled is not None:
            arr = self.compiled[1]
            for j, p in zip(*(arr == arr).nonzero()):  # not NaN
                out[(int(j), int(p))] = (self.end[j], float(arr[j, p]))
            return out
        for j, aj in enumerate(self.arr):
            for p, a in (aj or {}).items():
                if self.sequential:
                    q = self.links.send[self.dev[j]]
                    k = bisect.bisect_left(q.keys, self.xfer[(j, p)][0])
                    out[(j, p)] = (q.starts[k], a)
                else:
                    out[(j, p)] = (self.end[j], a)
        return out

    def makespan(self) -> float:
        return max(self.end, default=0.0)

    def placement(self, info: dict[str, Any]) -> Placement:
        self.sync()
        names = self.idx.names
        devs = self.cluster.devices
        assign = {names[i]: devs[self.dev[i]].name for i in range(self.n)}
        order = {d.name: [names[i] for i in self.order[k]] for k, d in enumerate(devs)}
        info = dict(info)
        info["predicted_makespan_s"] = self.makespan()
        info["n_ops"] = self.n
        if self.sequential:
            info["n_retimed"] = self.n_retimed
        for k, d in enumerate(devs):
            info[f"predicted_peak_bytes.{d.name}"] = (
                self.compiled[0][k] if self.compiled is not None else min(self.mem[k].exact_peak(), self.mem[k].bound())
            )
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
