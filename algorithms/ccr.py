"""A graph's communication-to-computation ratio (CCR) on a cluster, as Celeritas defines it.

Definition (Celeritas, seed 002, section 5.1.1 "CCR Reduction", equation 1; after Wang and Sinnen 2018): for the
computational graph G(V, E),

    CCR = sum over edges (v_i, v_j) in E of c_ij  /  sum over nodes v_i in V of w_i                     (eq. 1)

where c_ij is the data transmission time from node i to node j and w_i the computation time of node i. Celeritas'
Table 2 gives the CCR of its original graphs on its 4 x V100 PCIe machine: Inception_V3 33.118, NMT 18.630,
Transformer 111.957, Tensor Holography 49.147 (after its operation fusion: 6.4 to 11.1).

Choices where the paper is vague (its devices are identical, so it needs none):

* c_ij is the time the edge's tensor takes between two *distinct* devices: ``latency + bytes / bandwidth``
  averaged over the ordered pairs of distinct devices of the cluster (their per-pair links included). Every edge
  counts, as in eq. 1 (not only the edges a placement cuts): CCR is a property of graph and machine, not of a
  placement. A control edge carries no bytes and counts the latency only, as in the simulator. With one device
  there is no transfer and CCR is 0.
* w_i is the op's execution time averaged over the devices allowed to run it (its device-type constraint or its
  colocation group's; all devices when none may), so that speeds and per-type times count.

These are the averaged costs the Celeritas placer plans with (`algorithms.placers.celeritas.common`); this module
computes eq. 1 with that implementation, so that a run's reported CCR equals the placer's ``ccr_before``.

`compute_scale_for_ccr` inverts eq. 1 for the papers' regime: multiplying every w_i by s divides CCR by s, so the
factor that gives a target CCR is ``s = CCR(G) / target`` (exact, O(1) once CCR is known).

Complexity: O(V + E) for the sums, plus O(V * D + D^2) for the per-device averages.
"""

from __future__ import annotations

import math

from .cluster import Cluster
from .errors import ConfigError
from .graph import OpGraph
from .placers.celeritas.ccr import ccr as _celeritas_ccr


def graph_ccr(graph: OpGraph, cluster: Cluster) -> float:
    """CCR of `graph` on `cluster` (Celeritas eq. 1 with the averaged costs described in the module docstring).

    0 for a cluster of one device or a graph without edges; inf for a graph that communicates but has no
    computation."""
    return _celeritas_ccr(graph, cluster)


def compute_scale_for_ccr(graph: OpGraph, cluster: Cluster, target: float) -> float:
    """The factor s by which every op's computation time must be multiplied so that the graph's CCR on `cluster`
    equals `target` (s = CCR / target, since eq. 1's denominator is linear in the w_i and its numerator does not
    depend on them).

    Raises ConfigError when the target is not a positive finite number, or when the graph has no finite,
    non-zero CCR on this cluster (no communication, or no computation), which no scaling can change."""
    if not (isinstance(target, (int, float)) and math.isfinite(target) and target > 0):
        raise ConfigError(f"regime.target_ccr must be a positive number, got {target!r}")
    c = graph_ccr(graph, cluster)
    if not (math.isfinite(c) and c > 0):
        raise ConfigError(
            f"graph {graph.name!r} has CCR {c} on cluster {cluster.name!r}: no compute scale gives CCR {target}"
            " (it needs both communication and computation)"
        )
    return c / float(target)


def scale_compute(graph: OpGraph, factor: float) -> OpGraph:
    """A copy of `graph` whose ops' computation times (`compute_s` and every `compute_s_by_type` entry) are
    multiplied by `factor`; memory and tensor bytes are unchanged. O(V)."""
    if not (math.isfinite(factor) and factor > 0):
        raise ConfigError(f"compute scale must be a positive finite number, got {factor!r}")
    g = graph.copy()
    for _, attrs in g.nx.nodes(data=True):
        attrs["compute_s"] = float(attrs.get("compute_s", 0.0)) * factor
        by = attrs.get("compute_s_by_type")
        if by:
            attrs["compute_s_by_type"] = {k: float(v) * factor for k, v in by.items()}
    g.invalidate()
    return g
