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
  receive channel, inserted into the earliest slot at or after the producer's end that is free on both, so
  that simultaneous communications of one device queue. The channels are separate from the device's compute
  (as TensorFlow's Send/Recv run beside its kernels, and as the simulator's sequential mode has it).

Replay. Ordering each device's ops by (planned start, nonzero duration, placement order) and replaying them in
the simulator gives back the planned times exactly when the simulator's transfers follow the same model:
parallel communication without `congestion`. Insertion only fills gaps, so every op's planned start is
max(its ready time, the end of the op before it on its device), the recurrence the simulator runs. Residuals
remain where the models differ: in sequential mode the simulator queues transfers first-in first-out in the
order producers end while the plan inserts them as consumers are placed (so a later-placed transfer may go
ahead of an earlier one in the plan, not in the simulator); and when a consumer placed later raises the size of
a transfer already planned (edges of different sizes from one producer to one device), the consumers planned
before it keep the earlier arrival.

Evaluation of a candidate is tentative: `try_place` schedules a node's members and `undo` takes them back,
so that Algorithm 2 can compare devices. O(k log B + scans) per op with k inputs and B busy intervals on a
device; the insertion scans are amortised over the idle slots.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from ...cluster import Cluster
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


class Timeline:
    """The op-level plan: device, start and finish of every placed op, the busy intervals of every device
    (and, with `congestion`, of its send and receive channels), and the planned transfers."""

    def __init__(self, idx: GraphIndex, cluster: Cluster, congestion: bool):
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
        self.send: list[tuple[list[float], list[float]]] = [([], []) for _ in range(nd)]
        self.recv: list[tuple[list[float], list[float]]] = [([], []) for _ in range(nd)]
        #: (producer, device) -> (start, arrival, bytes) of the planned transfer
        self.transfers: dict[tuple[int, int], tuple[float, float, float]] = {}
        self._undo: list[tuple] = []

    def exec_time(self, i: int, d: int) -> float:
        t, sp = self.spec[d]
        return self.idx.exec_time(i, t, sp)

    # ------------------------------------------------------------------ transfers
    def _arrival(self, p: int, d: int, nbytes: float) -> float:
        key = (p, d)
        old = self.transfers.get(key)
        if old is not None and old[2] >= nbytes:
            return old[1]
        dp = self.dev[p]
        dt = self.cluster.transfer_time(dp, d, nbytes)
        ready = self.fin[p]
        if self.congestion:
            ss, se = self.send[dp]
            rs, re_ = self.recv[d]
            if old is not None:
                remove(ss, se, old[0], old[1])
                remove(rs, re_, old[0], old[1])
            t = ready
            while True:
                t1 = earliest_slot(ss, se, t, dt)
                t2 = earliest_slot(rs, re_, t1, dt)
                if t2 == t1:
                    break
                t = t2
            insert(ss, se, t1, t1 + dt)
            insert(rs, re_, t1, t1 + dt)
            new = (t1, t1 + dt, nbytes)
        else:
            new = (ready, ready + dt, nbytes)
        self.transfers[key] = new
        self._undo.append(("xfer", key, old, new))
        return new[1]

    # ------------------------------------------------------------------ ops
    def try_place(self, members: Sequence[tuple[int, int]]) -> tuple[float, float]:
        """Schedule ops (index, device), given in topological order and with every predecessor placed or
        earlier in `members`; returns (earliest start, latest finish) among them. Undo with `undo`."""
        idx = self.idx
        first, last = float("inf"), 0.0
        for i, d in members:
            ready = 0.0
            for p, b in idx.pred[i]:
                dp = self.dev[p]
                x = self.fin[p] if dp == d else self._arrival(p, d, max(b, 0.0))
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
        return (first if members else 0.0), last

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
                _, key, old, new = rec
                if self.congestion:
                    (ss, se), (rs, re_) = self.send[self.dev[key[0]]], self.recv[key[1]]
                    remove(ss, se, new[0], new[1])
                    remove(rs, re_, new[0], new[1])
                    if old is not None:
                        insert(ss, se, old[0], old[1])
                        insert(rs, re_, old[0], old[1])
                if old is None:
                    del self.transfers[key]
                else:
                    self.transfers[key] = old

    def commit(self) -> None:
        self._undo.clear()

    def makespan(self) -> float:
        ops = max((f for f, d in zip(self.fin, self.dev) if d >= 0), default=0.0)
        return max([ops] + [a for _, a, _ in self.transfers.values()])

    def order_key(self, i: int) -> tuple:
        """Per-device order of the replay: (planned start, nonzero duration, placement order), a linear
        extension of the graph (along an edge the start does not decrease; equal starts mean the producer
        takes no time and was placed first)."""
        return (self.start[i], self.fin[i] > self.start[i], self.rank[i])
