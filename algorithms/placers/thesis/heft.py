"""HEFT with the thesis' adaptations (seed 004, section 4.3; Topcuoglu, Hariri and Wu, TPDS 2002)."""

from __future__ import annotations

import bisect
import heapq
import logging
import math

from tqdm import tqdm

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

    Implementation: every device keeps its idle gaps in a max-heap. Per op and candidate device, the finish time
    is exact when the device's largest gap is shorter than the op (it can only append), and bounded below by
    ``ready + duration`` otherwise; the insertion scans run in increasing bound order and stop as soon as no
    remaining device can beat the best finish time found (ties to the lowest device index, as a full scan would
    give).

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

        # idle gaps before each device's last slot: a max-heap of lengths with lazy deletion, so that a device
        # whose largest gap is shorter than the op can only append (no scan)
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

        def find_slot(d: int, ready: float, dur: float) -> tuple[float, int]:
            st_, en = starts[d], ends[d]
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

        for i in tqdm(order, desc="HEFT: scheduling ops", unit="op", disable=None, leave=False):
            u = units[unit_of[i]]
            if st.assigned(u):
                cands = [st.unit_dev[u.id]]
            else:
                cands = st.feasible(u)
                if not cands:
                    raise st.infeasible(u, "HEFT: ")
            # Per device a lower bound of the finish time: exact (append after the last slot) when no idle gap
            # is long enough, else ready + duration. Slot scans run in bound order and stop once no device can
            # beat the best finish time found: the same choice as scanning every device.
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
                en = ends[d]
                if en and (not insertion or max_gap(d) < dur):
                    s0 = en[-1] if en[-1] > ready else ready
                    bounds.append((s0 + dur, d, s0, dur, True))
                else:
                    bounds.append((ready + dur, d, ready, dur, False))
            bounds.sort()
            best_f, best_d, best_s, best_k = math.inf, -1, 0.0, 0
            for lb, d, ready, dur, exact in bounds:
                if lb > best_f or (lb == best_f and d > best_d):
                    break
                if exact:
                    s, k = ready, len(starts[d])
                else:
                    s, k = find_slot(d, ready, dur)
                f = s + dur
                if f < best_f or (f == best_f and d < best_d):
                    best_f, best_d, best_s, best_k = f, d, s, k
            if not st.assigned(u):
                st.assign(u, best_d)
            st_, en = starts[best_d], ends[best_d]
            prev_end = en[best_k - 1] if best_k > 0 else 0.0
            if best_k < len(st_):
                gap_remove(best_d, st_[best_k] - prev_end)
                gap_add(best_d, st_[best_k] - best_f)
            gap_add(best_d, best_s - prev_end)
            st_.insert(best_k, best_s)
            en.insert(best_k, best_f)
            slot_ops[best_d].insert(best_k, i)
            finish[i] = best_f
        names = idx.names
        sched = {cluster.devices[d].name: [names[i] for i in slot_ops[d]] for d in range(nd)}
        est = max(finish, default=0.0)
        log.debug("HEFT estimated makespan %.6g s", est)
        return st.placement(order=sched, heft_makespan_s=est)
