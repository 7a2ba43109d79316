"""ICP's incremental rank update (issue 22) against the version it replaced.

The reference is `IteratedCriticalPathPlacer` as of commit 19d8e23 (thesis 4.5), kept here verbatim as the
oracle: it recomputes every successor of a node whose operations source rank dropped, with sets of remaining
predecessors. The new code must extract the same paths and make the same assignments.
"""

from __future__ import annotations

import heapq

import pytest
from hypothesis import HealthCheck, given, settings

from algorithms.base import Placer
from algorithms.cluster import Cluster, uniform_cluster
from algorithms.errors import LabError
from algorithms.graph import OpGraph
from algorithms.placement import Placement
from algorithms.placers.thesis import IteratedCriticalPathPlacer
from algorithms.placers.thesis.common import AssignState, Unit, build_units, operations_source_rank
from algorithms.workloads.synthetic import level_dag
from tests.strategies import random_clusters, random_dags


class ReferenceICP(Placer):
    """IteratedCriticalPathPlacer as of commit 19d8e23: the oracle."""

    name = "icp_reference"

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        idx = graph.index()
        n = idx.n
        units, unit_of = build_units(graph, cluster)
        st = AssignState(graph, cluster, units, unit_of)
        ops = idx.compute_s
        rsucc = [{j for j, _ in idx.succ[i]} for i in range(n)]
        rpred = [{p for p, _ in idx.pred[i]} for i in range(n)]
        src, par = operations_source_rank(idx, with_parent=True)
        cand: list[tuple[float, int]] = []

        def push_sink(v: int) -> None:
            heapq.heappush(cand, (-(src[v] + ops[v]), v))

        for v in range(n):
            if not rsucc[v]:
                push_sink(v)

        def assign_pieces(piece: list[Unit]) -> None:
            piece = [u for u in piece if not st.assigned(u)]
            if not piece:
                return
            want = next((u.device_type for u in piece if u.device_type is not None), None)
            size = sum(u.size for u in piece)
            best = -1
            for d in range(st.nd):
                if (want is None or st.types[d] == want) and st.fits(size, d):
                    if best < 0 or st.load[d] < st.load[best]:
                        best = d
            if best >= 0:
                for u in piece:
                    st.assign(u, best)
            elif len(piece) == 1:
                raise st.infeasible(piece[0], "iterated critical path: ")
            else:
                half = len(piece) // 2
                assign_pieces(piece[:half])
                assign_pieces(piece[half:])

        left = n
        paths = 0
        while left > 0:
            while True:
                if not cand:
                    raise AssertionError("iterated critical path: no sink left while ops remain unassigned")
                negval, v = heapq.heappop(cand)
                if rsucc[v] or -negval != src[v] + ops[v]:
                    continue  # stale entry
                if st.dev_of[v] >= 0 and not rpred[v]:
                    continue  # nothing left to do from this sink
                break
            paths += 1
            path = [v]
            while par[path[-1]] >= 0:
                path.append(par[path[-1]])
            path.reverse()
            # subpaths
            pieces: list[list[Unit]] = []
            cur: list[Unit] = []
            cur_ids: set[int] = set()
            cur_type = None
            for x in path:
                u = units[unit_of[x]]
                if st.assigned(u):
                    if cur:
                        pieces.append(cur)
                    cur, cur_ids, cur_type = [], set(), None
                    continue
                if u.id in cur_ids:
                    continue
                t = u.device_type
                if t is not None and cur_type is not None and t != cur_type:
                    pieces.append(cur)
                    cur, cur_ids, cur_type = [], set(), None
                cur.append(u)
                cur_ids.add(u.id)
                if cur_type is None:
                    cur_type = t
            if cur:
                pieces.append(cur)
            for piece in pieces:
                before = sum(len(u.members) for u in piece if not st.assigned(u))
                assign_pieces(piece)
                left -= before
            # remove the path's edges and update ranks downstream
            work: list[int] = []
            queued: set[int] = set()
            for a, b in zip(path, path[1:]):
                rsucc[a].discard(b)
                rpred[b].discard(a)
                if not rsucc[a]:
                    push_sink(a)
                if b not in queued:
                    queued.add(b)
                    heapq.heappush(work, b)
            while work:
                x = heapq.heappop(work)
                queued.discard(x)
                best, bp = 0.0, -1
                for p in rpred[x]:
                    val = src[p] + ops[p]
                    if bp < 0 or val > best or (val == best and p < bp):
                        best, bp = val, p
                par[x] = bp
                if best != src[x]:
                    src[x] = best
                    for y in rsucc[x]:
                        if y not in queued:
                            queued.add(y)
                            heapq.heappush(work, y)
                    if not rsucc[x]:
                        push_sink(x)
            push_sink(v)  # its popped entry may still be current
        return st.placement(paths=paths)


def _same(g: OpGraph, cl: Cluster) -> None:
    try:
        q = ReferenceICP().place(g, cl)
    except LabError as e:
        with pytest.raises(type(e)) as info:
            IteratedCriticalPathPlacer().place(g, cl)
        assert str(info.value) == str(e)
        return
    p = IteratedCriticalPathPlacer().place(g, cl)
    assert p.assignment == q.assignment
    assert p.info == q.info


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(g=random_dags(1, 30, device_types=True), cl=random_clusters(1, 4, hetero=True))
def test_icp_matches_reference_on_random_graphs(g: OpGraph, cl: Cluster):
    _same(g, cl)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(g=random_dags(1, 20, training=True), cl=random_clusters(1, 4, hetero=True, memory=1e9))
def test_icp_matches_reference_on_training_graphs(g: OpGraph, cl: Cluster):
    _same(g, cl)


def test_icp_matches_reference_on_a_level_graph():
    """A 2,000-op level graph with integer costs (many equal ranks, so the tie rules matter)."""
    g = level_dag(
        levels=200,
        min_nodes_per_level=4,
        max_nodes_per_level=12,
        edge_probability=0.1,
        ops_range=(1, 3),
        colocated_fraction=0.15,
        training=True,
        seed=11,
    )
    _same(g, uniform_cluster(4, memory_bytes=1e15))
