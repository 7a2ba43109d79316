"""Critical Path partitioning (thesis, seed 004, section 4.6)."""

from __future__ import annotations

import logging

from ...base import Placer
from ...cluster import Cluster
from ...errors import ConfigError
from ...graph import OpGraph
from ...placement import Placement
from .common import AssignState, build_units, operations_sink_rank, upward_rank

log = logging.getLogger(__name__)

RANKS = ("upward", "operations")


def critical_path(graph: OpGraph, cluster: Cluster, rank: str = "upward") -> list[int]:
    """The critical path as op indices, source to sink.

    With ``rank="upward"`` (the thesis' wording for 4.6, "based on upward ranks"): start at the source of the
    highest upward rank (eq. 4.1) and repeatedly move to the successor j maximising ``c_ij + rank_u(j)``, the
    term that defined the rank. With ``rank="operations"``: the same walk on the operations sink rank (eq. 4.4),
    i.e. the longest path by #ops as ICP's first path. Ties: lowest topological index. O(V + E).
    """
    idx = graph.index()
    if idx.n == 0:
        return []
    if rank == "upward":
        r, _, lat, rate = upward_rank(graph, cluster)
        multi = len(cluster.devices) > 1

        def step(i: int, j: int, b: float) -> float:
            return (lat + b / rate if multi else 0.0) + r[j]
    elif rank == "operations":
        r = operations_sink_rank(idx)

        def step(i: int, j: int, b: float) -> float:
            return r[j]
    else:
        raise ConfigError(f"placer.rank must be one of {RANKS}, got {rank!r}")
    sources = [i for i in range(idx.n) if not idx.pred[i]]
    cur = max(sources, key=lambda i: (r[i], -i))
    path = [cur]
    while idx.succ[cur]:
        cur = max(idx.succ[cur], key=lambda jb: (step(cur, jb[0], jb[1]), -jb[0]))[0]
        path.append(cur)
    return path


class CriticalPathPlacer(Placer):
    """Critical Path (thesis 4.6): the critical path on the fastest feasible device, every other op on the
    feasible device with the least ``exec_min`` so far.

    The critical path is computed as in `critical_path` (upward ranks by default). Its ops, each with its whole
    colocation group, are assigned in path order to the fastest feasible device (ties: lowest index), so the path
    stays on one device until that device's memory runs out. The remaining units are then taken in topological
    order of their first member and assigned to the feasible device with the minimum
    ``exec_min(d) = #ops(d) / speed(d)`` so far (eq. 4.5, before adding the unit; ties: lowest index).

    Complexity: O(V + E + U * D).
    """

    name = "critical_path"

    def __init__(self, rank: str = "upward"):
        if rank not in RANKS:
            raise ConfigError(f"placer.rank must be one of {RANKS}, got {rank!r}")
        self.rank = rank

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        units, unit_of = build_units(graph, cluster)
        st = AssignState(graph, cluster, units, unit_of)
        path = critical_path(graph, cluster, self.rank)
        for i in path:
            u = units[unit_of[i]]
            if st.assigned(u):
                continue
            cands = st.feasible(u)
            if not cands:
                raise st.infeasible(u, "critical path: ")
            st.assign(u, max(cands, key=lambda d: (st.speed[d], -d)))
        for u in units:
            if st.assigned(u):
                continue
            cands = st.feasible(u)
            if not cands:
                raise st.infeasible(u, "critical path: ")
            st.assign(u, min(cands, key=lambda d: (st.load[d], d)))
        return st.placement(critical_path_ops=len(path))
