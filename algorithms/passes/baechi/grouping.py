"""Which ops must share a device (Baechi 3.1 and 3.2): colocation groups made explicit, co-placement groups
united with them, and the union-find and regrouping helpers the other Baechi passes use."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import networkx as nx

from ...base import GraphPass
from ...errors import InvalidGraph
from ...graph import OpGraph
from ...placement import CoarseMap

log = logging.getLogger(__name__)


class _UnionFind:
    """Union-find over op indices that refuses to unite sets asking for different device types."""

    def __init__(self, types: Sequence[str | None]):
        self.parent = list(range(len(types)))
        self.type = list(types)
        self.size = [1] * len(types)

    def find(self, a: int) -> int:
        p = self.parent
        while p[a] != a:
            p[a] = p[p[a]]
            a = p[a]
        return a

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return True
        ta, tb = self.type[ra], self.type[rb]
        if ta is not None and tb is not None and ta != tb:
            return False
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        self.type[ra] = ta if ta is not None else tb
        return True


def _check_dag(graph: OpGraph, what: str) -> OpGraph:
    if not nx.is_directed_acyclic_graph(graph.nx):
        cycle = [u for u, _ in nx.find_cycle(graph.nx)]
        raise InvalidGraph(f"{what} produced a cycle through ops {cycle[:6]}")
    return graph


def _group_types(graph: OpGraph) -> list[str | None]:
    """Per op (index order) its device type, or its colocation group's when the op has none."""
    idx = graph.index()
    gt: dict[str, str] = {}
    for g, t in zip(idx.colocation, idx.device_type):
        if g is not None and t is not None:
            gt.setdefault(g, t)
    pairs = zip(idx.colocation, idx.device_type)
    return [t if t is not None else (gt.get(g) if g is not None else None) for g, t in pairs]


def _regroup(graph: OpGraph, uf: _UnionFind, prefix: str) -> OpGraph:
    """A copy of `graph` whose colocation groups are the union-find's sets of two or more ops.

    A set that is exactly one original group keeps that group's name; other sets are named
    ``<prefix>:<first op in topological order>``.  Every op of a set gets the set's device type."""
    idx = graph.index()
    out = graph.copy()
    sets: dict[int, list[int]] = {}
    for i in range(idx.n):
        sets.setdefault(uf.find(i), []).append(i)
    for root, mem in sets.items():
        if len(mem) < 2:
            name = None
        else:
            names = {idx.colocation[i] for i in mem}
            only = next(iter(names)) if len(names) == 1 else None
            name = only if only is not None else f"{prefix}:{idx.names[mem[0]]}"
        dt = uf.type[root]
        for i in mem:
            a = out.op(idx.names[i])
            a["colocation"] = name
            if dt is not None:
                a["device_type"] = dt
    out.invalidate()
    return out


def _groups_union_find(graph: OpGraph, strict: bool) -> _UnionFind:
    """A union-find over the graph's ops with every existing colocation group already united. With `strict`,
    a group whose ops ask for different device types raises InvalidGraph naming two of them."""
    idx = graph.index()
    uf = _UnionFind(_group_types(graph))
    first: dict[str, int] = {}
    for i, g in enumerate(idx.colocation):
        if g is None:
            continue
        if g not in first:
            first[g] = i
        elif not uf.union(first[g], i) and strict:
            raise InvalidGraph(
                f"colocation group {g!r}: op {idx.names[i]!r} asks for another device "
                f"type than op {idx.names[first[g]]!r}"
            )
    return uf


class ColocationGrouping(GraphPass):
    """Colocation grouping (Baechi 3.1): groups from the ops' `colocation` fields, made explicit.

    A group's device type (the first one any member asks for) is given to every member, since they share a
    device; groups of a single op are dissolved (they constrain nothing).  The placers then co-adjust the
    placement: the first member placed takes its whole group.  Identity `CoarseMap`.  O(V + E)."""

    name = "colocation_grouping"

    def apply(self, graph: OpGraph) -> tuple[OpGraph, CoarseMap]:
        uf = _groups_union_find(graph, strict=True)
        out = _check_dag(_regroup(graph, uf, "coloc"), self.name)
        log.info(
            "colocation grouping: %d groups",
            len({a["colocation"] for _, a in out.nx.nodes(data=True) if a.get("colocation") is not None}),
        )
        return out, CoarseMap.identity(out)


def _users_apart_from_followers(
    graph: OpGraph, u: int, data: list[int], group: list[int], backward_follows: bool
) -> list[int]:
    """The consumers of op `u` (indices `data`) that would not end on another's device anyway: those outside
    u's own group (`group`: root per op) and, where rule (ii) applies (`backward_follows`), not a backward op
    of another consumer."""
    idx = graph.index()
    names = {idx.names[v] for v in data}
    out = []
    for v in data:
        if group[v] == group[u]:
            continue
        fw = graph.op(idx.names[v]).get("forward_of")
        if backward_follows and fw is not None and fw in names:
            continue
        out.append(v)
    return out


class CoPlacement(GraphPass):
    """Co-placement (Baechi 3.2): put on one device (i) an op and its next op when that op is the only user
    of its output (`next_op`), and (ii) each backward op and its forward op (`forward_backward`).

    Implemented by uniting colocation groups (union-find), so that the placers' co-adjusted colocation
    (3.1) applies: "upon placing the first operator in a colocation group, Baechi uses both the co-placement
    heuristic and the colocation constraints".  Choices: rule (i) applies to an op with exactly one
    consumer through a tensor (not a control) edge; ops asking for different device types are never
    united.

    `sources` (our reading of rule (i) for ops without inputs, on by default): Figure 3's case is ops that
    "process predefined values" (``perm``, ``Shape``), whose tiny compute m-ETF spreads over idle devices. A
    training graph's weights are such ops, but each has several readers: its layer's forward op, that op's
    backward op and its own update (the variable's colocation group, 3.1). All of them end on the forward
    op's device (rule (ii) and 3.1), so the weight's output is in effect used by that one op: an op without
    inputs whose consumers, apart from its own group and the backward ops of its other consumers, are one op
    goes with that op (`_users_apart_from_followers`). Without it the list schedulers placed the hundreds of
    weights, ready at time 0 with microseconds of compute, round robin over the idle devices, and each layer
    followed its weight (issue 21: Baechi Table 3's Inception-V3, where the paper's m-ETF and m-SCT keep the
    model on one device, was split over four at 4.4 times the single device's step). The groups taken for
    the reading are those of 3.1 and rule (ii) only, so it does not chain through other ops' rule (i) unions.

    `followers` (the same reading for every op, on by default): a forward op's output is also read by its next
    op's backward op (a convolution's input by the convolution's weight gradient, a batch norm's input by the
    batch norm's backward), which rule (ii) puts on the next op's device in both of 3.3's modes, so the output
    is in effect used by that op alone. Read so, rule (i) chains each Inception-V3 block (its branches and
    their concatenation) into one group, as on the paper's TensorFlow graph, which fused to 17 ops (Table 5)
    and became "a massive operator group" (5.4). On the lab's Inception-V3 the forward-only coarse graph has 11
    ops with edges, one per block (the stem joins the first: the gradient of its last pooling is the one user
    of the first block's gradient sum, a chain rule (i) reads between backward ops), where rule (i) read
    strictly left 203: every layer apart from its batch norm, whose backward reads the layer's output too.
    Identity `CoarseMap`.  O((V + E) alpha(V))."""

    name = "co_placement"

    def __init__(
        self,
        next_op: bool = True,
        forward_backward: bool = True,
        sources: bool = True,
        followers: bool = True,
    ):
        self.next_op = bool(next_op)
        self.forward_backward = bool(forward_backward)
        self.sources = bool(sources)
        self.followers = bool(followers)

    def apply(self, graph: OpGraph) -> tuple[OpGraph, CoarseMap]:
        idx = graph.index()
        uf = _groups_union_find(graph, strict=False)
        n_next = n_fb = 0
        if self.forward_backward:
            for i in range(idx.n):
                fw = graph.op(idx.names[i]).get("forward_of")
                if fw is not None and fw in idx.pos:
                    n_fb += uf.union(i, idx.pos[fw])
        if self.next_op:
            edges = graph.nx.edges
            kept = [uf.find(i) for i in range(idx.n)]  # the groups of 3.1 and rule (ii)
            for u in range(idx.n):
                data = [v for v, _ in idx.succ[u] if not edges[idx.names[u], idx.names[v]].get("control")]
                source = not idx.pred[u]
                if len(idx.succ[u]) == 1 and len(data) == 1:
                    users = data
                elif data and ((self.sources and source) or self.followers):
                    users = _users_apart_from_followers(graph, u, data, kept, self.forward_backward)
                else:
                    continue
                if len(users) != 1:
                    continue
                n_next += uf.union(u, users[0])
        out = _check_dag(_regroup(graph, uf, "coplace"), self.name)
        log.info("co-placement: %d next-op and %d forward/backward unions", n_next, n_fb)
        return out, CoarseMap.identity(out)
