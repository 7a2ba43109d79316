"""The communication-to-computing ratio (Celeritas section 5.1.1, equation 1; Wang and Sinnen 2018).

    CCR = sum over edges (i, j) of c_ij  /  sum over nodes i of w_i                                  (eq. 1)

``c_ij`` is the edge's communication time and ``w_i`` the node's computation time, both from the averaged
cost model of `common` (mean over devices and device pairs of the cluster). Control edges carry no bytes and
count the latency only, as in the simulator. A graph with no computation has CCR = inf when it has any
communication, else 0. O(V + E) (plus O(V * D) for the averages).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ...cluster import Cluster
from ...graph import GraphIndex, OpGraph
from .common import CommModel, EdgeCosts, mean_compute


def ccr_of(idx: GraphIndex, w: Sequence[float], comm: Callable[[float], float] | EdgeCosts) -> float:
    """Equation 1 on an index with computation times `w` and edge cost ``comm(bytes)`` (or `EdgeCosts`)."""
    num = sum(EdgeCosts.of(idx, comm).out_total)
    den = float(sum(w))
    if den <= 0:
        return math.inf if num > 0 else 0.0
    return num / den


def ccr(
    graph: OpGraph, cluster: Cluster | None = None, *, latency_s: float = 0.0, bytes_per_s: float | None = None
) -> float:
    """CCR of `graph` (equation 1). With a cluster, costs are the cluster's averages; without one, edges cost
    ``latency_s + bytes / bytes_per_s`` and nodes their `compute_s`."""
    idx = graph.index()
    comm = CommModel.of_cluster(cluster) if cluster is not None else CommModel.of_link(latency_s, bytes_per_s)
    return ccr_of(idx, mean_compute(idx, cluster), comm)
