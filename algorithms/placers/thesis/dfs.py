"""Depth First Search partitioning (thesis, seed 004, section 4.8)."""

from __future__ import annotations

import logging

import numpy as np

from ...base import Placer
from ...cluster import Cluster
from ...errors import ConfigError
from ...graph import OpGraph, gc_paused
from ...placement import Placement
from .common import AssignState, build_units
from .mite import ZERO_TRAFFIC, MiteScorer, kernel

log = logging.getLogger(__name__)


class DFSPlacer(Placer):
    """DFS partitioning (thesis 4.8): a depth-first walk from the most important source; each unreached unit
    goes to the feasible device minimising MITE's traffic x execution time.

    Source ops are sorted by decreasing operations rank (4.4.1; ties: topological index), so the walk starts
    at a source on the critical path. The walk is pre-order with a visited flag; when it reaches an op whose
    unit is not assigned yet, the whole unit (colocation group or lone op) is assigned to the feasible device
    minimising ``traffic(d, a) * execution time(d, a)`` with MITE's normalisations (eq. 4.7 to 4.13).

    Choices where the thesis is vague: successors are visited in decreasing operations rank (so the walk
    follows the critical path first; ties: topological index), and the thesis' recursive function is written
    with an explicit stack, which visits the ops in the same order without Python's recursion limit.
    Ties between devices go to the lowest device index. `zero_traffic` is eq. 4.11's small number (see
    `MITEPlacer`); with the thesis' 0.000001 the walk keeps a unit on a neighbour's device whenever one fits.

    Complexity: O(V log V + E log E + U * D + (V + E) * D).

    Implementation (issue 22): graphs of `mite.COMPILED_MIN_OPS` ops or more run the same walk compiled with
    numba (`mite_kernel`, over arrays; the sorts by numpy), smaller ones `_place_python`; both give the same
    placement (tests/test_mite_kernel.py compares them).
    """

    name = "dfs"

    def __init__(self, zero_traffic: float = ZERO_TRAFFIC):
        if not zero_traffic > 0:
            raise ConfigError(f"placer.zero_traffic must be > 0, got {zero_traffic!r}")
        self.zero_traffic = float(zero_traffic)

    @gc_paused()  # units, lists and arrays by the million, no cycles
    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        k = kernel(graph)
        if k is None:
            return self._place_python(graph, cluster)
        return k.place(k.DFS, graph, cluster, self.zero_traffic, "DFS: ")

    def _place_python(self, graph: OpGraph, cluster: Cluster) -> Placement:
        """DFS in Python: the reference of `mite_kernel` (`mite.COMPILED_MIN_OPS`) and the code path for graphs
        below that size."""
        idx = graph.index()
        units, unit_of = build_units(graph, cluster)
        st = AssignState(graph, cluster, units, unit_of)
        sc = MiteScorer(st, self.zero_traffic)
        rank = sc.orank
        sources = sorted((i for i in range(idx.n) if not idx.pred[i]), key=lambda i: (-rank[i], i))
        succ_sorted = [sorted((j for j, _ in idx.succ[i]), key=lambda j: (-rank[j], j)) for i in range(idx.n)]
        visited = [False] * idx.n
        for s in sources:
            stack = [s]
            while stack:
                i = stack.pop()
                if visited[i]:
                    continue
                visited[i] = True
                u = units[unit_of[i]]
                if not st.assigned(u):
                    cands = st.feasible(u)
                    if not cands:
                        raise st.infeasible(u, "DFS: ")
                    f = sc.factors(u, cands)
                    sc.assign(u, cands[int(np.argmin(f.traffic_exec))])
                stack.extend(reversed([j for j in succ_sorted[i] if not visited[j]]))
        return st.placement(units=len(units))
