"""Iterated Critical Path partitioning (thesis, seed 004, section 4.5)."""

from __future__ import annotations

import heapq
import logging
from types import ModuleType

from ... import compiled_mode
from ...base import Placer
from ...cluster import Cluster
from ...graph import OpGraph, gc_paused
from ...placement import Placement
from .common import AssignState, Unit, build_units, operations_source_rank

log = logging.getLogger(__name__)

#: Graphs of at least this many ops are placed by the compiled loop (`icp_kernel`, numba installed): the same
#: placement, the whole placer 9-10 times faster at 10^5-10^6 ops (building the units and the placement stay in
#: Python; docs/scale.md, "ICP compiled"); smaller ones by `_place_python`, which needs no compiled code loaded.
#: Set to None to always use the Python code.
COMPILED_MIN_OPS: int | None = 2000


def _kernel(graph: OpGraph) -> ModuleType | None:
    """The `icp_kernel` module when it applies to this graph (`COMPILED_MIN_OPS`), else None."""
    if not compiled_mode.applies(graph.index().n, COMPILED_MIN_OPS):
        return None
    try:
        from . import icp_kernel
    except ImportError as exc:  # numba missing: the Python code gives the same placement, slower
        log.info("ICP: compiled loop unavailable (%s); using the Python one", exc)
        return None
    return icp_kernel


class IteratedCriticalPathPlacer(Placer):
    """Iterated Critical Path (thesis 4.5): extract the critical path, place its pieces, delete its edges, repeat.

    One iteration:

    1. (a) Operations source rank (eq. 4.3) of every node over the *remaining* edges, with a path predecessor
       per node (the predecessor giving the maximum; ties: lowest topological index). (b) Among the sinks of the
       remaining graph take the one ending the longest path, i.e. the maximum of ``source rank + #ops`` (the
       thesis says "maximum operations source rank"; adding the sink's own #ops makes the chosen path the true
       critical path, and is the choice made here). (c) Follow the path predecessors back to a source. The
       path is cut into subpaths: a node that is already assigned (itself or through its colocation group) is
       left out and ends the current subpath, and a node whose device constraint contradicts the subpath's
       starts a new one. (d) The path's edges are removed; nodes left without out-edges become sinks.
    2. Each subpath, together with the colocation groups of its nodes, goes to the feasible device with the
       minimum ``exec_min(d) = #ops(d) / speed(d)`` so far (eq. 4.5; ties: lowest device index, which is why the
       thesis observed the first critical path landing on a slow device, 7.2). A subpath that fits on no device
       is split in halves until the pieces fit; a single unit that fits nowhere raises `InfeasiblePlacement`.
    3. Repeat until every node is assigned. A sink that is assigned and has no remaining in-edge can start no
       useful path and is dropped; every iteration removes at least one edge or assigns at least one node.

    Ranks are maintained incrementally: after removing a path's edges only the nodes whose source rank can
    drop are recomputed, in topological order: the path's nodes (each lost the in-edge from its path
    predecessor), then, when a node's rank dropped, those successors whose path predecessor it is (ranks only
    decrease, so a successor whose maximum comes from another predecessor keeps its rank and its path
    predecessor; issue 22, before which every successor was recomputed). The sinks sit in a lazy max-heap.
    Results are those of the full recomputation (tests/test_icp_identical.py keeps the earlier version as the
    oracle).

    Complexity: O(P * L + R * (k + log V)) for P paths of total length P * L <= E + P (every path removes its
    edges), R rank recomputations over k remaining predecessors each; the thesis' from-scratch recomputation is
    O(P * (V + E)). R is linear in V on the benchmark's random training graphs (about 55 per op at 10K-100K ops:
    every path lowers the ranks of the nodes below it; skipping the successors that do not depend on the
    dropped rank saves only ~4% of them), so ICP is linear. Memory O(V + E).

    Implementation (issue 22): graphs of `COMPILED_MIN_OPS` ops or more run the same loop compiled with numba
    (`icp_kernel`, over arrays: about 0.2 us per rank recomputation, its queueing included, against 2.5 us in
    Python, on the 100K-op benchmark graph), smaller ones `_place_python`; both give the same placement
    (tests/test_icp_kernel.py compares them).
    """

    name = "icp"

    @gc_paused()  # units, sets and lists by the million, no cycles; the collector would walk the graph each time
    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        kernel = _kernel(graph)
        if kernel is None:
            return _place_python(graph, cluster)
        units, unit_of = build_units(graph, cluster)
        st = AssignState(graph, cluster, units, unit_of)
        paths = kernel.run(graph.index(), st, units, unit_of)
        log.debug("ICP extracted %d paths (compiled)", paths)
        return st.placement(paths=paths)


def _place_python(graph: OpGraph, cluster: Cluster) -> Placement:
    """ICP in Python (`IteratedCriticalPathPlacer`'s algorithm): the reference of `icp_kernel` and the code path
    for graphs below `COMPILED_MIN_OPS`."""
    idx = graph.index()
    n = idx.n
    units, unit_of = build_units(graph, cluster)
    st = AssignState(graph, cluster, units, unit_of)
    ops = idx.compute_s
    rsucc = [{j for j, _ in idx.succ[i]} for i in range(n)]
    rpred = [{p for p, _ in idx.pred[i]} for i in range(n)]
    src, par = operations_source_rank(idx, with_parent=True)
    val = [src[i] + ops[i] for i in range(n)]  # src + #ops, what a successor's rank is the maximum of
    cand: list[tuple[float, int]] = []

    def push_sink(v: int) -> None:
        heapq.heappush(cand, (-val[v], v))

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
    queued = bytearray(n)
    while left > 0:
        while True:
            if not cand:
                raise AssertionError("iterated critical path: no sink left while ops remain unassigned")
            negval, v = heapq.heappop(cand)
            if rsucc[v] or -negval != val[v]:
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
        for a, b in zip(path, path[1:]):
            rsucc[a].discard(b)
            rpred[b].discard(a)
            if not rsucc[a]:
                push_sink(a)
            if not queued[b]:
                queued[b] = 1
                heapq.heappush(work, b)
        while work:
            x = heapq.heappop(work)
            queued[x] = 0
            best, bp = 0.0, -1
            for p in rpred[x]:
                vp = val[p]
                if bp < 0 or vp > best or (vp == best and p < bp):
                    best, bp = vp, p
            par[x] = bp
            if best != src[x]:
                src[x] = best
                val[x] = best + ops[x]
                # only a successor whose path predecessor is x can see its rank or path predecessor change
                # (ranks only decrease: x stays below the maximum of any other successor)
                for y in rsucc[x]:
                    if par[y] == x and not queued[y]:
                        queued[y] = 1
                        heapq.heappush(work, y)
                if not rsucc[x]:
                    push_sink(x)
        push_sink(v)  # its popped entry may still be current
    log.debug("ICP extracted %d paths", paths)
    return st.placement(paths=paths)
