"""Graph contraction: sets of ops become single coarse ops, with the edges between sets merged.

One function for every pass and placer that coarsens a graph: Baechi's operator fusion and forward-only
placement (`passes.baechi`, seed 001 sections 3.3) and Celeritas' Optimal Operation Fusion
(`placers.celeritas.fusion.build_coarse_graph`, seed 002 section 5.1, Lemma 2).  What a coarse op costs is the
caller's choice (`attrs`); how edges merge is the same everywhere: the output of a producer crosses to a
device once however many of its consumers sit there (the simulator's model), so between two sets a
producer's tensor counts once (its largest edge into the destination set) and different producers' tensors
add up; the merged edge is a control edge only if every part of it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..graph import OpGraph
from ..placement import CoarseMap

#: attrs(members, internal_only) -> the coarse op's attributes; members in the order given, internal_only the
#: ops (of the whole graph) whose every consumer lies in their own set.
AttrsFn = Callable[[list[int], set[int]], dict[str, Any]]


def contract(
    graph: OpGraph,
    sets: Sequence[tuple[str, Sequence[int]]],
    attrs: AttrsFn,
    *,
    keep_edge: Callable[[int, int], bool] | None = None,
    canonical: bool = False,
    name: str | None = None,
) -> tuple[OpGraph, CoarseMap]:
    """Contract each set of ops (``(coarse name, member op indices of graph.index())``, every op in exactly
    one set) into one op named as given, with attributes ``attrs(members, internal_only)``.

    Coarse ops are added in the order of `sets`; edges in the order the graph lists its edges and their
    parts summed in that order, or, with `canonical`, by (source set, destination set) position with the
    parts summed by producer index (a result independent of the order edges were added in).
    `keep_edge(a, b)` (set positions) may drop edges between sets.  The `CoarseMap` lists each set's
    members in the order given.  A coarse edge carries the tensors of all its member producers, which the
    executed (original) graph sends one by one, each paying the link's latency: a coarse op whose out-edges
    carry more than one tensor gets ``send_tensors``, the most tensors one of its out-edges carries (the
    members' own counts summed), and the transfer model charges that many latencies for its transfers
    (`GraphIndex.copy_tensors`; before, a coarse m-ETF placement of the synthetic graph saw 429 transfers where
    its expansion runs 928, and predicted 61 ms for a step the original graph takes 141 ms).  The caller
    checks that the result is a DAG where that can fail.  O(V + E).
    """
    idx = graph.index()
    n = idx.n
    where = [-1] * n
    for k, (_, members) in enumerate(sets):
        for i in members:
            where[i] = k
    internal_only = {u for u in range(n) if idx.succ[u] and all(where[v] == where[u] for v, _ in idx.succ[u])}
    edge: dict[tuple[int, int], list] = {}  # (set a, set b) -> [all control, {producer: largest bytes}]
    pos = idx.pos
    for u, v, d in graph.nx.edges(data=True):
        iu = pos[u]
        a, b = where[iu], where[pos[v]]
        if a == b or (keep_edge is not None and not keep_edge(a, b)):
            continue
        ctrl = bool(d.get("control"))
        nbytes = 0.0 if ctrl else float(d.get("bytes", 0))
        ent = edge.get((a, b))
        if ent is None:
            ent = edge[(a, b)] = [ctrl, {}]
        ent[0] = ent[0] and ctrl
        per = ent[1]
        if nbytes > per.get(iu, -1.0):
            per[iu] = nbytes
    out = OpGraph(name or graph.name)
    cmap = CoarseMap()
    for cname, members in sets:
        out.nx.add_node(cname, **attrs(list(members), internal_only))
        cmap[cname] = [idx.names[i] for i in members]
    tens = idx.copy_tensors
    sends: dict[int, float] = {}  # set -> the most tensors one of its out-edges carries
    for (a, b), (ctrl, per) in sorted(edge.items()) if canonical else edge.items():
        total = sum(per[k] for k in sorted(per)) if canonical else sum(per.values())
        out.nx.add_edge(sets[a][0], sets[b][0], bytes=0 if ctrl else total, control=ctrl)
        if not ctrl:
            carried = float(sum(tens[u] for u in per))
            if carried > sends.get(a, 1.0):
                sends[a] = carried
    for a, carried in sends.items():
        out.nx.nodes[sets[a][0]]["send_tensors"] = carried
    out.invalidate()
    return out, cmap
