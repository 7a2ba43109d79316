"""HEFT with the thesis' adaptations (seed 004, section 4.3; Topcuoglu, Hariri and Wu, TPDS 2002)."""
from __future__ import annotations

import bisect
import logging
import math

from ...base import Placer
from ...cluster import Cluster
from ...graph import OpGraph
from ...placement import Placement
from .common import AssignState, build_units, upward_rank

log = logging.getLogger(__name__)


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

    Implementation: per op, the lower bound ``ready + duration`` is computed for every candidate device and the
    insertion scans run in increasing bound order, stopping as soon as no remaining device can beat the best
    finish time found (ties to the lowest device index, as a full scan would give).

    Complexity: O(V log V + (V + E) * D + V * D log D + V * D' * g) where D' devices need a slot search and g is
    the number of timeline slots a scan passes (O(V) in the worst case).
    """

    name = "heft"

    def __init__(self, insertion: bool = True):
        self.insertion = bool(insertion)

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        idx = graph.index()
        units, unit_of = build_units(graph, cluster)
        st = AssignState(graph, cluster, units, unit_of)
        rank, _, _, _ = upward_rank(graph, cluster)
        order = sorted(range(idx.n), key=lambda i: (-rank[i], i))
        nd = st.nd
        lat, bw = cluster.latency_table, cluster.bandwidth_table
        types, speed = st.types, st.speed
        starts: list[list[float]] = [[] for _ in range(nd)]
        ends: list[list[float]] = [[] for _ in range(nd)]
        slot_ops: list[list[int]] = [[] for _ in range(nd)]
        finish = [0.0] * idx.n
        dev_of = st.dev_of
        pred = idx.pred
        insertion = self.insertion

        def find_slot(d: int, ready: float, dur: float) -> tuple[float, int]:
            st_, en = starts[d], ends[d]
            if not insertion:
                k = len(en)
                return (max(ready, en[-1]) if en else ready), k
            k = bisect.bisect_right(en, ready)
            t = ready
            m = len(st_)
            while k < m:
                if st_[k] - t >= dur:
                    return t, k
                if en[k] > t:
                    t = en[k]
                k += 1
            return t, k

        for i in order:
            u = units[unit_of[i]]
            if st.assigned(u):
                cands = [st.unit_dev[u.id]]
            else:
                cands = st.feasible(u)
                if not cands:
                    raise st.infeasible(u, "HEFT: ")
            # lower bound ready + dur per device; the slot search (the costly part) runs in bound order and
            # stops once no device can beat the best finish time (same result as searching every device)
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
                bounds.append((ready + dur, d, ready, dur))
            bounds.sort()
            best_f, best_d, best_s, best_k = math.inf, -1, 0.0, 0
            for lb, d, ready, dur in bounds:
                if lb > best_f or (lb == best_f and d > best_d):
                    break
                s, k = find_slot(d, ready, dur)
                f = s + dur
                if f < best_f or (f == best_f and d < best_d):
                    best_f, best_d, best_s, best_k = f, d, s, k
            if not st.assigned(u):
                st.assign(u, best_d)
            starts[best_d].insert(best_k, best_s)
            ends[best_d].insert(best_k, best_f)
            slot_ops[best_d].insert(best_k, i)
            finish[i] = best_f
        names = idx.names
        sched = {cluster.devices[d].name: [names[i] for i in slot_ops[d]] for d in range(nd)}
        est = max(finish, default=0.0)
        log.debug("HEFT estimated makespan %.6g s", est)
        return st.placement(order=sched, heft_makespan_s=est)
