"""Which ops of a group become one op (Baechi 3.3, operator fusion, Figure 5)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ...base import GraphPass
from ...graph import OpGraph
from ...placement import CoarseMap
from .coarsen import contract_roots
from .grouping import _check_dag

log = logging.getLogger(__name__)


def _fused_attrs(graph: OpGraph, kind: str) -> Callable[[list[int], set[int]], dict[str, Any]]:
    """Costs of ops run one after another inside one fused op: compute times and persistent bytes add up;
    the outputs that leave the fused op (or are final) form its output; its temporary memory is the largest
    member temporary plus the outputs consumed only inside (held at most while the fused op runs)."""
    idx = graph.index()

    def attrs(mem: list[int], internal_only: set[int]) -> dict[str, Any]:
        first = graph.op(idx.names[mem[0]])
        by_types: set[str] = set()
        for i in mem:
            by = idx.compute_by_type[i]
            if by:
                by_types.update(by)
        a: dict[str, Any] = {
            "type": kind,
            "phase": first.get("phase", "forward"),
            "compute_s": sum(idx.compute_s[i] for i in mem),
            "persistent_bytes": sum(idx.persistent[i] for i in mem),
            "temporary_bytes": max(idx.temporary[i] for i in mem)
            + sum(idx.output[i] for i in mem if i in internal_only),
            "output_bytes": sum(idx.output[i] for i in mem if i not in internal_only),
            "colocation": idx.colocation[mem[0]],
            "device_type": next((idx.device_type[i] for i in mem if idx.device_type[i] is not None), None),
            "forward_of": next(
                (
                    graph.op(idx.names[i]).get("forward_of")
                    for i in mem
                    if graph.op(idx.names[i]).get("forward_of") is not None
                ),
                None,
            ),
        }
        if by_types:
            a["compute_s_by_type"] = {
                t: sum((idx.compute_by_type[i] or {}).get(t, idx.compute_s[i]) for i in mem) for t in sorted(by_types)
            }
        return a

    return attrs


class OperatorFusion(GraphPass):
    """Operator fusion (Baechi 3.3): fuse directly connected ops of the same (colocation / co-placement)
    group, only when the source has out-degree <= 1 or the destination in-degree <= 1.

    Fusing the ends of an edge u -> v creates a cycle iff another path leads from u to v; such a path needs
    out-degree(u) >= 2 and in-degree(v) >= 2, so the rule (Figure 5 d, e) is cycle-safe without searching
    for paths. Our refinement: out-degree(u) leaves out successors that only wait (reached by control edges
    alone, with no successors: TensorFlow's train op, a NoOp after every variable's update), since no other
    path can pass through one; without it a TensorFlow variable, whose update ends in that op, could never
    be fused into the layer that reads it, and stayed an op without inputs that the list schedulers spread
    over idle devices (see `CoPlacement`'s `sources`). PyTorch captures have no control edges.
    Degrees are those of the graph fused so far (distinct neighbouring fused ops), and fusion
    repeats until nothing changes.  Fused costs: compute times and persistent bytes add up; the outputs that
    leave the fused op form its output; temporary memory is the largest member temporary plus the outputs
    consumed only inside.  The result is checked to be a DAG.  `CoarseMap` members are in the input's
    topological order.  O((V + E) * passes) set operations.
    """

    name = "operator_fusion"

    def __init__(self, max_passes: int = 20):
        self.max_passes = int(max_passes)

    def apply(self, graph: OpGraph) -> tuple[OpGraph, CoarseMap]:
        idx = graph.index()
        n = idx.n
        grp = idx.colocation
        parent = list(range(n))
        succ = [set(j for j, _ in s) for s in idx.succ]
        pred = [set(j for j, _ in p) for p in idx.pred]
        edges = graph.nx.edges
        # ops that only wait (control edges in, nothing out: TensorFlow's train op after every update)
        waits = [
            bool(idx.pred[j]) and all(edges[idx.names[i], idx.names[j]].get("control") for i, _ in idx.pred[j])
            for j in range(n)
        ]

        def out_degree(a: int, b: int) -> int:
            """a's successors that could start another path to b: b itself, and any but a sink that waits."""
            return sum(1 for s in succ[a] if s == b or succ[s] or not waits[s])

        def find(a: int) -> int:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        fused = 0
        for _ in range(max(1, self.max_passes)):
            changed = False
            for u in range(n):
                if grp[u] is None:
                    continue
                for v, _ in idx.succ[u]:
                    a, b = find(u), find(v)
                    if a == b or grp[v] != grp[u] or b not in succ[a]:
                        continue
                    if out_degree(a, b) > 1 and len(pred[b]) > 1:
                        continue
                    # merge b into a
                    parent[b] = a
                    succ[a].discard(b)
                    for s in succ[b]:
                        pred[s].discard(b)
                        pred[s].add(a)
                        succ[a].add(s)
                    for p in pred[b]:
                        if p == a:
                            continue
                        succ[p].discard(b)
                        succ[p].add(a)
                        pred[a].add(p)
                    succ[b] = set()
                    pred[b] = set()
                    fused += 1
                    changed = True
            if not changed:
                break
        root = [find(i) for i in range(n)]
        out, cmap = contract_roots(graph, root, name_prefix="fused", attrs=_fused_attrs(graph, "Fused"))
        _check_dag(out, self.name)
        log.info("operator fusion: %d -> %d ops (%d fusions)", n, len(out), fused)
        return out, cmap
