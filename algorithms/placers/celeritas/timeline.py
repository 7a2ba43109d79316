"""Op-level timetable for Adjusting Placement: the simulator's execution model (`algorithms.simulator`), so
that the makespan Celeritas plans is the makespan the simulator replays (issue 17, item 7).

Celeritas' Algorithm 2 plans on the coarse graph: one EST per coarse node, one communication cost per coarse
edge (eq. 7). The ops of a coarse node do not all run where the node goes (a member of a colocation group
pinned elsewhere follows its group, `CoarseState`), they start as soon as their own inputs have arrived, and a
tensor crosses to a device once however many consumers it has there; the coarse plan then differed from the
simulator's replay in most cases (up to 48%). `Timeline` keeps the plan at the level of ops instead:

* each op runs on its device non-preemptively, inserted into the earliest idle slot at or after its inputs
  are ready (the paper's insertion: "checks the load on d_k to see if there is a time slot to insert v_i");
* the output of producer p crosses to device d once, when p ends; its size is the largest edge from p to a
  consumer on d (the simulator's rule), and its time is ``Cluster.transfer_time``;
* congestion (Celeritas 6.1: "we treat the data transmission process as an additional task, by adding a new
  operation node for data transmission on the devices which need to send or receive data"): with
  `congestion`, every transfer is a task on the sending device's send channel and on the receiving device's
  receive channel, so that simultaneous communications of one device queue. The channels are separate from
  the device's compute (as TensorFlow's Send/Recv run beside its kernels). The paper does not say in which
  order the tasks of a channel run; here they run in the order they are requested, when their producers end
  (`algorithms.comm_queue`, the one model of transfer order the simulator's sequential mode uses): a
  transfer planned after others requested later goes ahead of them. When that delays a transfer already
  planned (or a later consumer makes a planned transfer larger or moves it ahead of another of its
  producer's transfers), the committed plan is re-timed at `commit`: its ops are replayed in their per-device
  order by the simulator's rules (`comm_queue.replay`, O((V + E) log V)), and the busy intervals and
  transfers rebuilt from the new times (``n_retimed``). Candidates that `try_place` evaluates are not
  re-timed (that would cost a replay per device per node), so a candidate's times can be optimistic; and a
  stale plan is re-timed at most once every `retime_gap` commits (the placer asks for about 32 re-timings
  per placement, `placer.RETIMES`) and when the plan is read (`makespan`, `order_key`), so on large graphs
  some candidates are judged on a stale plan while the final plan is still the simulator's; a
  candidate whose transfers delay planned ones is judged later by the sum of the delays it causes on the
  shared channels (`DELAY_PENALTY`; `try_place` adds it to the start and finish it returns).

Replay. Ordering each device's ops by (planned start, nonzero duration, placement order) and replaying them in
the simulator gives back the planned times exactly when the simulator's transfers follow the same model:
parallel communication without `congestion`, and sequential communication with it. Insertion only fills
gaps, so every op's planned start is max(its ready time, the end of the op before it on its device), the
recurrence the simulator runs. A residual remains in parallel mode when a consumer placed later raises the
size of a transfer already planned (edges of different sizes from one producer to one device): the consumers
planned before it keep the earlier arrival. In sequential mode the re-timing covers it; ops that take no
time and end together may be served in another order (`comm_queue`).

Evaluation of a candidate is tentative: `try_place` schedules a node's members and `undo` takes them back,
so that Algorithm 2 can compare devices. O(k log B + scans) per op with k inputs and B busy intervals on a
device; the insertion scans are amortised over the idle slots.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from ...cluster import Cluster
from ...comm_queue import KeyedLinks, TransferKey, replay, transfer_key
from ...graph import GraphIndex


def earliest_slot(starts: list[float], ends: list[float], ready: float, dur: float) -> float:
    """Earliest t >= ready with [t, t + dur) free, given sorted, disjoint busy intervals (zero-length ones are
    points that nothing is inserted across)."""
    k = bisect.bisect_right(ends, ready)
    t = ready
    while k < len(starts):
        if t + dur <= starts[k]:
            return t
        if ends[k] > t:
            t = ends[k]
        k += 1
    return t


def insert(starts: list[float], ends: list[float], s: float, e: float) -> None:
    """Insert [s, e) keeping both lists sorted; a point goes before an interval starting at the same time."""
    k = bisect.bisect_right(starts, s)
    while k > 0 and starts[k - 1] == s and ends[k - 1] > e:
        k -= 1
    starts.insert(k, s)
    ends.insert(k, e)


def remove(starts: list[float], ends: list[float], s: float, e: float) -> None:
    """Remove one interval [s, e) inserted before."""
    k = bisect.bisect_left(starts, s)
    while starts[k] != s or ends[k] != e:
        k += 1
    del starts[k]
    del ends[k]


#: With congestion, a candidate whose transfers delay planned ones is judged later by the sum of the delays
#: (`comm_queue.KeyedLinks.probe`), so that Adjusting Placement prefers a device that leaves the plan as it
#: is (our choice; see the module docstring). False only to measure the rule.
DELAY_PENALTY = True


class Timeline:
    """The op-level plan: device, start and finish of every placed op, the busy intervals of every device
    (and, with `congestion`, of its send and receive channels), and the planned transfers."""

    def __init__(self, idx: GraphIndex, cluster: Cluster, congestion: bool, retime_gap: int = 1):
        self.idx = idx
        self.cluster = cluster
        self.congestion = congestion
        devs = cluster.devices
        nd = len(devs)
        self.spec = [(d.type, d.speed) for d in devs]
        self.dev = [-1] * idx.n
        self.start = [0.0] * idx.n
        self.fin = [0.0] * idx.n
        self.rank = [0] * idx.n  # placement order, the last key of the per-device order
        self._counter = 0
        self.busy: list[tuple[list[float], list[float]]] = [([], []) for _ in range(nd)]
        #: congestion: the planned transfers in request order on every send and receive channel
        self.links = KeyedLinks(nd)
        #: (producer, device) -> (start, arrival, bytes) of the planned transfer
        self.transfers: dict[tuple[int, int], tuple[float, float, float]] = {}
        #: congestion: (producer, device) -> the planned transfer's place in the channels' order
        self.keys: dict[tuple[int, int], TransferKey] = {}
        #: position of each consumer in its producer's successor list (the order of one producer's transfers)
        self.succ_pos: list[dict[int, int]] = [{c: k for k, (c, _) in enumerate(su)} for su in idx.succ]
        self.n_retimed = 0
        self.retime_gap = max(1, int(retime_gap))  # commits between two re-timings at least
        self._since = 0
        self._pending = False  # a committed placement delayed planned transfers; not re-timed yet
        self.delay_penalty = DELAY_PENALTY
        self._stale = False  # the tentative placement delays planned transfers: re-time at `commit`
        self._penalty = 0.0  # the delays the tentative placement causes to planned transfers
        self._undo: list[tuple] = []

    def exec_time(self, i: int, d: int) -> float:
        t, sp = self.spec[d]
        return self.idx.exec_time(i, t, sp)

    # ------------------------------------------------------------------ transfers
    def _xfer_time(self, p: int, dp: int, d: int, nbytes: float) -> float:
        """Seconds p's output takes from device dp to d: `Cluster.transfer_time`, with one latency per tensor of a
        coarse op (`GraphIndex.copy_tensors`), as the simulator charges it."""
        dt = self.cluster.transfer_time(dp, d, nbytes)
        k = self.idx.copy_tensors[p]
        return dt if k == 1.0 else dt + (k - 1.0) * self.cluster.transfer_time(dp, d, 0.0)

    def _arrival(self, p: int, d: int, nbytes: float, consumer: int) -> float:
        key = (p, d)
        old = self.transfers.get(key)
        rank = self.succ_pos[p][consumer]
        oldkey = self.keys.get(key) if self.congestion else None
        if old is not None and old[2] >= nbytes and (oldkey is None or oldkey[2] <= rank):
            return old[1]
        dp = self.dev[p]
        ready = self.fin[p]
        if self.congestion:
            if old is not None:
                assert oldkey is not None
                self._stale = True  # larger, or ahead of another of p's transfers: re-time at commit
                nbytes = max(nbytes, old[2])
                rank = min(rank, oldkey[2])
                self.links.remove(oldkey, dp, d)
            dt = self._xfer_time(p, dp, d, nbytes)
            tkey = transfer_key(ready, p, rank)
            ((t1, t2),), delay = self.links.probe([(tkey, dp, d, dt)])
            if delay > 0.0:
                self._stale = True
                self._penalty += delay
            self.links.add(tkey, dp, d, t1, t2)
            self.keys[key] = tkey
            new = (t1, t2, nbytes)
            self._undo.append(("xfer", key, old, new, oldkey, tkey))
        else:
            dt = self._xfer_time(p, dp, d, nbytes)
            new = (ready, ready + dt, nbytes)
            self._undo.append(("xfer", key, old, new, None, None))
        self.transfers[key] = new
        return new[1]

    # ------------------------------------------------------------------ ops
    def try_place(self, members: Sequence[tuple[int, int]]) -> tuple[float, float]:
        """Schedule ops (index, device), given in topological order and with every predecessor placed or
        earlier in `members`; returns (earliest start, latest finish) among them. Undo with `undo`."""
        idx = self.idx
        self._penalty = 0.0
        first, last = float("inf"), 0.0
        for i, d in members:
            ready = 0.0
            for p, b in idx.pred[i]:
                dp = self.dev[p]
                x = self.fin[p] if dp == d else self._arrival(p, d, max(b, 0.0), i)
                if x > ready:
                    ready = x
            dur = self.exec_time(i, d)
            bs, be = self.busy[d]
            s = earliest_slot(bs, be, ready, dur)
            insert(bs, be, s, s + dur)
            self._undo.append(("op", i, self.dev[i], self.start[i], self.fin[i], self.rank[i]))
            self.dev[i] = d
            self.start[i] = s
            self.fin[i] = s + dur
            self.rank[i] = self._counter
            self._counter += 1
            first = min(first, s)
            last = max(last, s + dur)
        pen = self._penalty if self.delay_penalty else 0.0
        return (first + pen if members else 0.0), last + pen

    def undo(self) -> None:
        """Take back everything scheduled since the last `commit`."""
        while self._undo:
            rec = self._undo.pop()
            if rec[0] == "op":
                _, i, d0, s0, f0, r0 = rec
                d = self.dev[i]
                bs, be = self.busy[d]
                remove(bs, be, self.start[i], self.fin[i])
                self.dev[i], self.start[i], self.fin[i], self.rank[i] = d0, s0, f0, r0
                self._counter -= 1
            else:
                _, key, old, new, oldkey, tkey = rec
                if self.congestion:
                    dp = self.dev[key[0]]
                    self.links.remove(tkey, dp, key[1])
                    if old is not None:
                        self.links.add(oldkey, dp, key[1], old[0], old[1])
                        self.keys[key] = oldkey
                    else:
                        del self.keys[key]
                if old is None:
                    del self.transfers[key]
                else:
                    self.transfers[key] = old
        self._stale = False

    def commit(self) -> None:
        self._undo.clear()
        self._pending = self._pending or self._stale
        self._stale = False
        self._since += 1
        if self._pending and self._since >= self.retime_gap:
            self._retime()

    def sync(self) -> None:
        """Re-time the plan if a commit left it stale (`retime_gap`)."""
        if self._pending:
            self._retime()

    def _retime(self) -> None:
        """Re-time the committed plan (module docstring): replay its ops in their per-device order by the
        simulator's rules and rebuild the busy intervals, transfers and channels from the new times."""
        self.n_retimed += 1
        self._pending = False
        self._since = 0
        nd = len(self.busy)
        placed = [i for i in range(self.idx.n) if self.dev[i] >= 0]
        order: list[list[int]] = [[] for _ in range(nd)]
        for i in sorted(placed, key=self._order_key):
            order[self.dev[i]].append(i)
        durs = [self.exec_time(i, self.dev[i]) if self.dev[i] >= 0 else 0.0 for i in range(self.idx.n)]
        start, xfer = replay(
            order, self.dev, durs, self.idx.succ, self.idx.pred, self.cluster.transfer_time, self.idx.copy_tensors
        )
        self.busy = [([], []) for _ in range(nd)]
        for d, ops in enumerate(order):
            bs, be = self.busy[d]
            for i in ops:  # in start order, so appending keeps the lists sorted
                self.start[i] = start[i]
                self.fin[i] = start[i] + durs[i]
                bs.append(self.start[i])
                be.append(self.fin[i])
        self.links = KeyedLinks(nd)
        self.transfers = {}
        self.keys = {}
        for (p, d), (key, s0, a, nbytes) in xfer.items():
            self.links.add(key, self.dev[p], d, s0, a)
            self.transfers[(p, d)] = (s0, a, nbytes)
            self.keys[(p, d)] = key

    def makespan(self) -> float:
        self.sync()
        ops = max((f for f, d in zip(self.fin, self.dev) if d >= 0), default=0.0)
        return max([ops] + [a for _, a, _ in self.transfers.values()])

    def order_key(self, i: int) -> tuple:
        """Per-device order of the replay: (planned start, nonzero duration, placement order), a linear
        extension of the graph (along an edge the start does not decrease; equal starts mean the producer
        takes no time and was placed first). A stale plan is re-timed first (`sync`)."""
        self.sync()
        return self._order_key(i)

    def _order_key(self, i: int) -> tuple:
        return (self.start[i], self.fin[i] > self.start[i], self.rank[i])
