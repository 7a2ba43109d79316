"""Batch Split partitioning (thesis, seed 004, section 4.4)."""

from __future__ import annotations

import logging
import math

from ...base import Placer
from ...cluster import Cluster
from ...graph import OpGraph
from ...placement import Placement
from .common import AssignState, build_units, operations_rank

log = logging.getLogger(__name__)


class BatchSplitPlacer(Placer):
    """Batch Split (thesis 4.4): ops sorted by operations rank, cut into |D| ranges, range k on the k-th
    fastest device.

    The operations rank (4.4.1) is operations source rank (eq. 4.3) + operations sink rank (eq. 4.4), i.e. the
    #ops of the longest path through the op, so critical-path ops come first. Ops are sorted by descending
    rank (ties: topological position) and cut into |D| consecutive ranges of ``ceil(V / |D|)`` ops ("equal
    sized parts for each device", 7.3). Devices are sorted by descending speed (ties: cluster order); range k
    goes to the k-th device of that list. When that device is not feasible, the next feasible device is
    searched cyclically along the speed-sorted list, as in hashing. When an op whose colocation group is not
    yet assigned comes up, the whole group is assigned as one unit with it (to the device of the op's range).

    Choice where the thesis is vague: ranges have equal op counts (not equal #ops).

    Complexity: O(V log V + E + V * D) (O(V log V + E) when the range's device is usually feasible).
    """

    name = "batch_split"

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        idx = graph.index()
        units, unit_of = build_units(graph, cluster)
        st = AssignState(graph, cluster, units, unit_of)
        rank = operations_rank(idx)
        order = sorted(range(idx.n), key=lambda i: (-rank[i], i))
        devs = sorted(range(st.nd), key=lambda d: (-st.speed[d], d))
        nd = st.nd
        size = max(1, math.ceil(idx.n / nd))
        for pos, i in enumerate(order):
            u = units[unit_of[i]]
            if st.assigned(u):
                continue
            k = min(pos // size, nd - 1)
            for step in range(nd):
                d = devs[(k + step) % nd]
                if st.is_feasible(u, d):
                    st.assign(u, d)
                    break
            else:
                raise st.infeasible(u, "batch split: ")
        return st.placement(range_size=size)
