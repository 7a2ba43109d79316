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

These are the averaged costs the Celeritas placer plans with (`algorithms.placers.celeritas.common`), and a run's
reported CCR equals the placer's ``ccr_before`` (`algorithms.placers.celeritas.ccr.ccr`) to the last bit: `graph_ccr`
computes the same sums over the graph index's lists with numpy, in the same order (each op's outgoing costs
left to right, then the ops' totals and the ops' times with Python's ``sum``), instead of building the placer's
per-edge (neighbour, cost) lists (issue 22: 1.6 s of the 300K-op chain's whole run, 0.2 s now;
`tests/test_ccr_vectorised.py` pins the equality on random graphs).

`compute_scale_for_ccr` inverts eq. 1 for the papers' regime: multiplying every w_i by s divides CCR by s, so the
factor that gives a target CCR is ``s = CCR(G) / target`` (exact, O(1) once CCR is known).

Complexity: O(V + E) for the sums, plus O(V * D + D^2) for the per-device averages (O(D) per op only for ops
with per-type times; the others take one multiplication by their type's mean inverse speed).
"""

from __future__ import annotations

import math
from itertools import chain
from operator import itemgetter

import numpy as np

from .cluster import Cluster
from .errors import ConfigError
from .graph import GraphIndex, OpGraph
from .placers.celeritas.common import CommModel, effective_types


def graph_ccr(graph: OpGraph, cluster: Cluster) -> float:
    """CCR of `graph` on `cluster` (Celeritas eq. 1 with the averaged costs described in the module docstring).

    0 for a cluster of one device or a graph without edges; inf for a graph that communicates but has no
    computation.  Bit for bit the placers' `algorithms.placers.celeritas.ccr.ccr(graph, cluster)`."""
    idx = graph.index()
    comm = CommModel.of_cluster(cluster)
    num = _comm_total(idx, comm.latency_s, comm.inv_bytes_per_s)
    den = _compute_total(idx, cluster)
    if den <= 0:
        return math.inf if num > 0 else 0.0
    return num / den


def _comm_total(idx: GraphIndex, lat: float, inv: float) -> float:
    """Eq. 1's numerator: the sum over ops of the sum of ``lat + bytes * inv`` over the op's out-edges, each op's
    edges added left to right from 0 (vectorised for ops of one or two out-edges, Python's ``sum`` for the
    others), then the ops' totals with Python's ``sum``: the placers' `EdgeCosts.out_total` summed. O(V + E)."""
    n = idx.n
    arrays = _cached_index_arrays(idx)
    if arrays is not None:  # the placer's or the simulator's arrays of this index: the same numbers
        deg, nbytes = np.diff(arrays["succ_ptr"]), arrays["succ_b"]
    else:
        deg = np.fromiter(map(len, idx.succ), dtype=np.int64, count=n)
        nbytes = np.fromiter(map(itemgetter(1), chain.from_iterable(idx.succ)), dtype=np.float64, count=int(deg.sum()))
    cost = lat + nbytes * inv
    first = np.cumsum(deg) - deg
    row = np.zeros(n)
    some = deg >= 1
    row[some] = cost[first[some]]
    two = deg == 2
    row[two] = row[two] + cost[first[two] + 1]
    many = np.flatnonzero(deg > 2)
    if len(many):
        costs = cost.tolist()
        row[many] = [sum(costs[f : f + d]) for f, d in zip(first[many].tolist(), deg[many].tolist())]
    return sum(row.tolist())


def _cached_index_arrays(idx: GraphIndex) -> dict[str, np.ndarray] | None:
    """The CSR arrays of `idx` that `algorithms.sim_kernel.index_arrays` keeps, when it holds this index's (a
    compiled placer or simulation of the graph came first, as in a whole run: issue 22, one pass over the 3.4 x
    10^6 edges of a 10^6-op graph less); None otherwise.  Never imports the module (numba) itself."""
    import sys

    kernel = sys.modules.get("algorithms.sim_kernel")
    last = getattr(kernel, "_last", None)
    return last[1] if last is not None and last[0]() is idx else None


def _compute_total(idx: GraphIndex, cluster: Cluster) -> float:
    """Eq. 1's denominator: the sum over ops of the op's mean execution time over the devices allowed to run it
    (the placers' `mean_compute`, summed with Python's ``sum``). O(V + D^2), plus O(D) per op with per-type
    times."""
    n = idx.n
    types: list[str | None] = [None] * n if idx.device_type.count(None) == n else effective_types(idx)
    devs = [(d.type, d.speed) for d in cluster.devices]
    inv_speed: dict[str | None, float] = {}
    allowed_of: dict[str | None, list[tuple[str, float]]] = {}
    for t in set(types):
        allowed = [dv for dv in devs if t is None or dv[0] == t] or devs
        allowed_of[t] = allowed
        inv_speed[t] = sum(1.0 / sp for _, sp in allowed) / len(allowed)
    if len(inv_speed) == 1:
        factor: float | np.ndarray = next(iter(inv_speed.values()))
    else:
        factor = np.fromiter(map(inv_speed.__getitem__, types), dtype=np.float64, count=n)
    w = np.fromiter(idx.compute_s, dtype=np.float64, count=n) * factor
    by_type = np.flatnonzero(np.fromiter(map(bool, idx.compute_by_type), dtype=bool, count=n))
    for i in by_type.tolist():
        allowed = allowed_of[types[i]]
        w[i] = sum(idx.exec_time(i, dt, sp) for dt, sp in allowed) / len(allowed)
    return float(sum(w.tolist()))


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
