"""Topological orders of Celeritas: DFS-TOPO (section 4.2.2) and CPD-TOPO (section 5.1.3, Algorithm 1).

Both work on the integer view `GraphIndex` (ops numbered in a topological order; `succ`/`pred` lists of
(neighbour, bytes)) and return a list of op indices.

DFS-TOPO (4.2.2)
    A queue Q holds the zero-indegree ops. Repeatedly remove the head v0, output it, delete its out-edges and
    push every child whose indegree drops to zero *to the head* of Q. Children of one op are pushed in reverse
    adjacency order, so that the first child in the graph's own order ends at the head and comes out first
    (the paper leaves the order of several released children to section 5.1, i.e. to CPD-TOPO; this is our
    choice for the plain variant). Initial sources keep the graph's topological index order. O(V + E).

CPD-TOPO (5.1.3, Algorithm 1, CPD_Topo; equations 2 and 3)
    tlevel(v) = 0 for a source, else max over preds p of tlevel(p) + w_p + c_pv                       (eq. 2)
    blevel(v) = w_v for a sink, else max over succs s of blevel(s) + c_vs, plus w_v                      (eq. 3)
    cpath(v)  = tlevel(v) + blevel(v)
    Q starts with the sources sorted by *decreasing* cpath. Repeatedly dequeue the head, give it the next
    order number, sort its children by *increasing* cpath, delete its out-edges, and walk the sorted children:
    each child whose indegree is now zero is appended to the head of Q. Because the children are walked in
    increasing cpath and each is pushed to the head, the released child with the largest cpath ends up at the
    head: the order follows the critical path depth first. Ties in cpath are broken by the op's topological
    index (the lower index comes out first), which makes the order deterministic.

Complexity: tlevel/blevel O(V + E); the queue discipline O(V + E) plus sorting each adjacency list,
O(E log dmax) in all (the paper counts the order computation as O(V + E)).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

from ...errors import InvalidGraph
from ...graph import GraphIndex, OpGraph
from .common import EdgeCosts


def _as_index(graph: OpGraph | GraphIndex) -> GraphIndex:
    return graph.index() if isinstance(graph, OpGraph) else graph


def dfs_topo(graph: OpGraph | GraphIndex) -> list[int]:
    """DFS-TOPO order (Celeritas 4.2.2) as a list of op indices of `graph.index()`. O(V + E)."""
    idx = _as_index(graph)
    n = idx.n
    indeg = [len(p) for p in idx.pred]
    q: deque[int] = deque(i for i in range(n) if indeg[i] == 0)
    out: list[int] = []
    while q:
        v = q.popleft()
        out.append(v)
        for c, _ in reversed(idx.succ[v]):
            indeg[c] -= 1
            if indeg[c] == 0:
                q.appendleft(c)
    if len(out) != n:  # cannot happen on a GraphIndex built from a DAG
        raise InvalidGraph("graph has a cycle")
    return out


def levels(
    graph: OpGraph | GraphIndex, w: Sequence[float], comm: Callable[[float], float] | EdgeCosts
) -> tuple[list[float], list[float]]:
    """tlevel and blevel of every op (Celeritas equations 2 and 3) with computation times `w` and the
    communication time ``comm(bytes)`` of each edge (or precomputed `EdgeCosts`). O(V + E)."""
    idx = _as_index(graph)
    ec = EdgeCosts.of(idx, comm)
    n = idx.n
    tl = [0.0] * n
    for v in range(n):  # index order is topological
        best = 0.0
        for p, c in ec.pred[v]:
            x = tl[p] + w[p] + c
            if x > best:
                best = x
        tl[v] = best
    bl = [0.0] * n
    for v in range(n - 1, -1, -1):
        best = 0.0
        for s, c in ec.succ[v]:
            x = bl[s] + c
            if x > best:
                best = x
        bl[v] = best + w[v]
    return tl, bl


def cpd_topo(
    graph: OpGraph | GraphIndex,
    w: Sequence[float],
    comm: Callable[[float], float] | EdgeCosts,
    cpath: Sequence[float] | None = None,
) -> list[int]:
    """CPD-TOPO order (Celeritas Algorithm 1, CPD_Topo) as a list of op indices.

    `w[i]` is op i's computation time, ``comm(bytes)`` an edge's communication time; `cpath` may be given
    precomputed (tlevel + blevel). O(V + E log dmax).
    """
    idx = _as_index(graph)
    n = idx.n
    if cpath is None:
        tl, bl = levels(idx, w, comm)
        cpath = [a + b for a, b in zip(tl, bl)]
    indeg = [len(p) for p in idx.pred]
    sources = [i for i in range(n) if indeg[i] == 0]
    sources.sort(key=lambda i: -cpath[i])  # decreasing cpath; stable: ties by index
    q: deque[int] = deque(sources)
    out: list[int] = []
    while q:
        v = q.popleft()
        out.append(v)
        # increasing cpath; among equal cpath the lower index is pushed last, so it comes out first
        children = sorted((c for c, _ in idx.succ[v]), key=lambda c: (cpath[c], -c))
        for c in children:
            indeg[c] -= 1
        for c in children:
            if indeg[c] == 0:
                q.appendleft(c)
    if len(out) != n:
        raise InvalidGraph("graph has a cycle")
    return out
