"""Baseline schedulers: topological order per device, and the order the placer's own simulation chose."""

from __future__ import annotations

from ..base import Scheduler
from ..cluster import Cluster
from ..graph import OpGraph
from ..placement import Placement, Schedule, check_schedule, topological_schedule


class TopologicalScheduler(Scheduler):
    """Topological: each device runs its ops in the graph's deterministic topological order. O(V + E)."""

    name = "topological"

    def order(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Schedule:
        return topological_schedule(graph, placement, cluster.names)


class PlacerOrderScheduler(Scheduler):
    """Placer order: the per-device order the placer's own simulation chose; topological if it chose none."""

    name = "placer_order"

    def order(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Schedule:
        if placement.order:
            sched = {d: list(placement.order.get(d, [])) for d in cluster.names}
            check_schedule(graph, placement, sched)
            return sched
        return topological_schedule(graph, placement, cluster.names)
