"""A third-party placer shipped as its own package: round-robin over devices in topological order."""

from __future__ import annotations

from algorithms.base import Placer
from algorithms.placement import Placement


class RoundRobinPlacer(Placer):
    """Round robin (demo plugin): the k-th op in topological order goes to device k mod |D|; colocation kept."""

    name = "round_robin"

    def __init__(self, offset: int = 0):
        self.offset = offset

    def place(self, graph, cluster):
        names = cluster.names
        group_dev: dict[str, str] = {}
        out = {}
        for k, op in enumerate(graph.topological_order()):
            grp = graph.op(op).get("colocation")
            dev = group_dev.get(grp) if grp is not None else None
            dev = dev or names[(k + self.offset) % len(names)]
            if grp is not None:
                group_dev[grp] = dev
            out[op] = dev
        return Placement(out)
