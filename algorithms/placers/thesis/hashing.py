"""Hashing partitioning (thesis, seed 004, section 4.2)."""

from __future__ import annotations

import logging

from ...base import Placer
from ...cluster import Cluster
from ...graph import OpGraph
from ...placement import Placement
from .common import AssignState, build_units, unit_order

log = logging.getLogger(__name__)


class HashingPlacer(Placer):
    """Hashing (thesis 4.2): unit k goes to device k mod |D|, or the next feasible device after it.

    Colocation groups are assigned first, then the lone ops, each in topological order of its first member.
    The hash of a unit is the number of units already assigned modulo the number of devices; device ids are the
    positions in the cluster's device list. When the hashed device is not feasible (type or remaining memory),
    the devices after it are probed cyclically and the first feasible one is taken.

    Choice where the thesis is vague: the counter that feeds the hash runs on across groups and lone ops (the
    thesis says lone ops are assigned "in the same manner"); it is deterministic (the thesis' Java framework
    iterated hash sets, so its order varied from run to run).

    Complexity: O(V + E + U * D) for U units and D devices (O(U) when the hashed device is usually feasible).
    """

    name = "hashing"

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        units, unit_of = build_units(graph, cluster)
        st = AssignState(graph, cluster, units, unit_of)
        nd = st.nd
        count = 0
        probes = 0
        for u in unit_order(units, groups_first=True):
            h = count % nd
            for k in range(nd):
                d = (h + k) % nd
                probes += 1
                if st.is_feasible(u, d):
                    st.assign(u, d)
                    break
            else:
                raise st.infeasible(u, "hashing: ")
            count += 1
        log.debug("hashing placed %d units with %d probes", len(units), probes)
        return st.placement(units=len(units))
