"""HEFT's gap search (`SlotTimeline`, issue 22) against the slot-by-slot scan it replaced.

The reference is HEFT's insertion policy as it was before issue 22 (commit 19d8e23, thesis 4.3): every device's
timeline as flat lists of slot starts and ends, and ``find_slot`` walking them from the op's ready time. It is
kept here verbatim as the oracle; the new placer must make exactly the same choices (device, start, finish,
order) and the new timeline must return exactly the same gap for every query.
"""

from __future__ import annotations

import bisect
import heapq
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.base import Placer
from algorithms.cluster import Cluster, uniform_cluster
from algorithms.errors import LabError
from algorithms.graph import OpGraph
from algorithms.placement import Placement
from algorithms.placers.thesis import HEFTPlacer
from algorithms.placers.thesis import heft as heft_mod
from algorithms.placers.thesis.common import AssignState, build_units, upward_rank
from algorithms.placers.thesis.heft import SlotTimeline
from algorithms.workloads.synthetic import level_dag
from tests.strategies import random_clusters, random_dags


def reference_find_slot(starts: list[float], ends: list[float], ready: float, dur: float) -> tuple[float, int]:
    """The pre-issue-22 slot scan: (start, flat index to insert before)."""
    k = bisect.bisect_right(ends, ready)
    t = ready
    m = len(starts)
    while k < m:
        if starts[k] - t >= dur:
            return t, k
        if ends[k] > t:
            t = ends[k]
        k += 1
    return t, k


class ReferenceHEFT(Placer):
    """HEFTPlacer as of commit 19d8e23 (flat timelines, slot-by-slot scan): the oracle."""

    name = "heft_reference"

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

        for i in order:
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
        return st.placement(order=sched, heft_makespan_s=est)


def _flat_index(tl: SlotTimeline, b: int, j: int) -> int:
    return sum(len(x) for x in tl.starts[:b]) + j


def _check_invariants(tl: SlotTimeline) -> None:
    starts = [x for blk in tl.starts for x in blk]
    ends = [x for blk in tl.ends for x in blk]
    gaps = [x for blk in tl.gaps for x in blk]
    assert len(starts) == tl.n
    assert all(len(blk) > 0 for blk in tl.starts)
    assert all(len(blk) <= 2 * tl.block for blk in tl.starts)
    assert tl.last == [blk[-1] for blk in tl.ends]
    assert tl.gmax == [max(blk) for blk in tl.gaps]
    prev = [0.0] + ends[:-1]
    assert gaps == [s - p for s, p in zip(starts, prev)]


durations = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]),
    st.floats(0.0, 5.0, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=300, deadline=None)
@given(
    block=st.integers(1, 4),
    steps=st.lists(
        st.tuples(st.one_of(st.floats(0.0, 40.0), st.integers(0, 40).map(float), st.integers(0, 60)), durations),
        min_size=1,
        max_size=80,
    ),
)
def test_timeline_returns_the_reference_gap(block, steps):
    """Random insert sequences (tiny blocks, so that splits and cross-block searches happen; integer-valued
    times and zero durations for ties): every query returns the scan's start and position, and the timeline
    then holds the same slots in the same order."""
    tl = SlotTimeline(block)
    starts: list[float] = []
    ends: list[float] = []
    ops: list[int] = []
    for op, (ready, dur) in enumerate(steps):
        if isinstance(ready, int):  # an existing slot boundary as the ready time (ties with ends and starts)
            pool = starts + ends
            ready = pool[ready % len(pool)] if pool else 0.0
        s_ref, k_ref = reference_find_slot(starts, ends, ready, dur)
        s, b, j = tl.find(ready, dur)
        assert (s, _flat_index(tl, b, j)) == (s_ref, k_ref), (ready, dur, starts, ends)
        tl.insert(b, j, s, s + dur, op)
        starts.insert(k_ref, s_ref)
        ends.insert(k_ref, s_ref + dur)
        ops.insert(k_ref, op)
        _check_invariants(tl)
    assert tl.op_order() == ops
    assert [x for blk in tl.starts for x in blk] == starts
    assert [x for blk in tl.ends for x in blk] == ends
    assert tl.end() == ends[-1]


def test_timeline_finds_gap_in_a_later_block():
    """A hand-made case: the only long-enough gap lies two blocks after the ready time."""
    tl = SlotTimeline(1)
    t = 0.0
    for op, (gap, dur) in enumerate([(0.0, 1.0), (0.5, 1.0), (0.5, 1.0), (0.5, 1.0), (3.0, 1.0), (0.5, 1.0)]):
        s, b, j = tl.find(t + gap, dur)
        assert s == t + gap
        tl.insert(b, j, s, s + dur, op)
        t = s + dur
    assert len(tl.starts) >= 3
    s, b, j = tl.find(0.2, 2.0)
    assert s == 5.5  # slots [0,1) [1.5,2.5) [3,4) [4.5,5.5) [8.5,9.5) [10,11): the gap [5.5, 8.5)
    assert _flat_index(tl, b, j) == 4
    s, b, j = tl.find(0.2, 3.5)  # nothing long enough: append
    assert (s, _flat_index(tl, b, j)) == (t, 6)


def _same(new: Placer, ref: Placer, g: OpGraph, cl: Cluster) -> None:
    """Same placement, order and estimate, or the same error (infeasible device types or memory)."""
    try:
        q = ref.place(g, cl)
    except LabError as e:
        with pytest.raises(type(e)) as info:
            new.place(g, cl)
        assert str(info.value) == str(e)
        return
    p = new.place(g, cl)
    assert p.assignment == q.assignment
    assert p.order == q.order
    assert p.info["heft_makespan_s"] == q.info["heft_makespan_s"]


@pytest.mark.parametrize("block", [1, 3, 512])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    g=random_dags(1, 30, device_types=True),
    cl=random_clusters(1, 4, hetero=True, memory=1e9),
    insertion=st.booleans(),
)
def test_heft_matches_reference_on_random_graphs(block, g: OpGraph, cl: Cluster, insertion):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(heft_mod, "SLOT_BLOCK", block)
        _same(HEFTPlacer(insertion), ReferenceHEFT(insertion), g, cl)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(g=random_dags(1, 25, training=True), cl=random_clusters(1, 4, hetero=True))
def test_heft_matches_reference_with_memory_limits(g: OpGraph, cl: Cluster):
    """Tight random memories: the same infeasibility error, or the same placement."""
    _same(HEFTPlacer(), ReferenceHEFT(), g, cl)


@pytest.mark.parametrize("block", [2, 16, 512])
def test_heft_matches_reference_on_a_training_graph(monkeypatch, block):
    """A 2,000-op level graph (colocation, backward ops) on four devices: many insertions into gaps."""
    g = level_dag(
        levels=200,
        min_nodes_per_level=4,
        max_nodes_per_level=12,
        edge_probability=0.1,
        colocated_fraction=0.15,
        training=True,
        seed=5,
    )
    cl = uniform_cluster(4, memory_bytes=1e15, latency_s=134e-6, bytes_per_s=5.7e9)
    monkeypatch.setattr(heft_mod, "SLOT_BLOCK", block)
    _same(HEFTPlacer(), ReferenceHEFT(), g, cl)
