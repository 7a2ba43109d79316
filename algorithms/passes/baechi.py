"""Baechi's graph optimizer (seed 001, sections 3.1-3.3 and 4.1) as a chain of graph passes, and the profile
perturbation of Figure 8.

    ColocationGrouping      colocation groups from the ops' `colocation` fields (3.1)
    CoPlacement             (i) an op whose output only its next op uses goes with it, (ii) a backward op
                            goes with its forward op (3.2)
    ForwardOnlyPlacement    place forward ops only and let backward ops follow them, when one device could
                            hold the model; otherwise force forward/backward co-placement (3.3)
    OperatorFusion          fuse directly connected ops of one group with the cycle-safe rule (3.3, Fig. 5)
    ProfilePerturbation     multiply compute and communication costs by seeded random factors (5.3, Fig. 8)

Groups are carried by the ops' `colocation` attribute, which every placer honours (co-adjusted placement,
3.1): a co-placement group is a colocation group.  Merging groups only makes them larger, so a placement of
the coarse graph, expanded through the `CoarseMap`, still satisfies the original graph's colocation
constraints.  Ops that ask for different device types are never put in one group.

Every pass returns a new graph (the input is left alone), checks that it is a DAG (raising `InvalidGraph`
otherwise) and returns a `CoarseMap` whose members are listed in a topological order of the input graph.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import networkx as nx

from ..base import GraphPass
from ..cluster import Cluster, Device
from ..errors import ConfigError, InvalidGraph
from ..graph import OpGraph
from ..placement import CoarseMap

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------- helpers
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
    for i, g in enumerate(idx.colocation):
        if g is not None and idx.device_type[i] is not None:
            gt.setdefault(g, idx.device_type[i])
    return [idx.device_type[i] if idx.device_type[i] is not None else gt.get(idx.colocation[i]) for i in range(idx.n)]


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


def _contract(
    graph: OpGraph,
    root: Sequence[int],
    *,
    name_prefix: str,
    attrs: Callable[[list[int], set[int]], dict[str, Any]],
    keep_edge: Callable[[int, int], bool] | None = None,
) -> tuple[OpGraph, CoarseMap]:
    """Contract every set of ops with the same `root` (op indices of ``graph.index()``) into one op.

    `attrs(members, internal_only)` gives the coarse op's attributes (members in topological order;
    internal_only: members whose every consumer is inside the set).  Edges between different sets are
    merged: a producer's tensor sent to several members counts once (largest edge), different producers'
    tensors add up; the merged edge is a control edge only if all of its parts are.  `keep_edge(ra, rb)`
    may drop edges (forward-only placement).  O(V + E)."""
    idx = graph.index()
    n = idx.n
    sets: dict[int, list[int]] = {}
    for i in range(n):
        sets.setdefault(root[i], []).append(i)
    taken = set(graph.ops)
    cname: dict[int, str] = {}
    for r, mem in sets.items():
        if len(mem) == 1:
            cname[r] = idx.names[mem[0]]
        else:
            nm = f"{name_prefix}:{idx.names[mem[0]]}"
            while nm in taken:
                nm += "'"
            taken.add(nm)
            cname[r] = nm
    # merged edges
    edge: dict[tuple[int, int], list] = {}  # (ra, rb) -> [bytes, control, {producer: bytes}]
    internal_only = set()
    for u in range(n):
        ru = root[u]
        inside = True
        for v, _ in idx.succ[u]:
            if root[v] != ru:
                inside = False
        if inside and idx.succ[u]:
            internal_only.add(u)
    for u, v, d in graph.nx.edges(data=True):
        ru, rv = root[idx.pos[u]], root[idx.pos[v]]
        if ru == rv or (keep_edge is not None and not keep_edge(ru, rv)):
            continue
        ctrl = bool(d.get("control"))
        b = 0.0 if ctrl else float(d.get("bytes", 0))
        ent = edge.get((ru, rv))
        if ent is None:
            ent = edge[(ru, rv)] = [ctrl, {}]
        ent[0] = ent[0] and ctrl
        per = ent[1]
        if b > per.get(u, -1.0):
            per[u] = b
    out = OpGraph(graph.name)
    cmap = CoarseMap()
    for r in sorted(sets, key=lambda r: sets[r][0]):
        mem = sets[r]
        if len(mem) == 1:
            a = dict(graph.op(idx.names[mem[0]]))
        else:
            a = attrs(mem, internal_only)
        out.nx.add_node(cname[r], **a)
        cmap[cname[r]] = [idx.names[i] for i in mem]
    for (ru, rv), (ctrl, per) in edge.items():
        out.nx.add_edge(cname[ru], cname[rv], bytes=0 if ctrl else sum(per.values()), control=ctrl)
    # forward_of must name an op of the coarse graph
    where = {idx.names[i]: cname[root[i]] for i in range(n)}
    for c, a in out.nx.nodes(data=True):
        fw = a.get("forward_of")
        if fw is not None:
            tgt = where.get(fw)
            a["forward_of"] = tgt if tgt is not None and tgt != c else None
    out.invalidate()
    return out, cmap


def _fused_attrs(graph: OpGraph, kind: str) -> Callable[[list[int], set[int]], dict[str, Any]]:
    """Costs of ops run one after another inside one fused op: compute times and persistent bytes add up;
    the outputs that leave the fused op (or are final) form its output; its temporary memory is the largest
    member temporary plus the outputs consumed only inside (held at most while the fused op runs)."""
    idx = graph.index()

    def attrs(mem: list[int], internal_only: set[int]) -> dict[str, Any]:
        first = graph.op(idx.names[mem[0]])
        by_types = set()
        for i in mem:
            if idx.compute_by_type[i]:
                by_types.update(idx.compute_by_type[i])
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


# --------------------------------------------------------------------------------------------- passes
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


class CoPlacement(GraphPass):
    """Co-placement (Baechi 3.2): put on one device (i) an op and its next op when that op is the only user
    of its output (`next_op`), and (ii) each backward op and its forward op (`forward_backward`).

    Implemented by uniting colocation groups (union-find), so that the placers' co-adjusted colocation
    (3.1) applies: "upon placing the first operator in a colocation group, Baechi uses both the co-placement
    heuristic and the colocation constraints".  Choices: rule (i) applies to an op with exactly one
    consumer through a tensor (not a control) edge; ops asking for different device types are never
    united.  Identity `CoarseMap`.  O((V + E) alpha(V))."""

    name = "co_placement"

    def __init__(self, next_op: bool = True, forward_backward: bool = True):
        self.next_op = bool(next_op)
        self.forward_backward = bool(forward_backward)

    def apply(self, graph: OpGraph) -> tuple[OpGraph, CoarseMap]:
        idx = graph.index()
        uf = _groups_union_find(graph, strict=False)
        n_next = n_fb = 0
        if self.next_op:
            for u, succ in enumerate(idx.succ):
                if len(succ) == 1 and not graph.nx.edges[idx.names[u], idx.names[succ[0][0]]].get("control"):
                    n_next += uf.union(u, succ[0][0])
        if self.forward_backward:
            for i in range(idx.n):
                fw = graph.op(idx.names[i]).get("forward_of")
                if fw is not None and fw in idx.pos:
                    n_fb += uf.union(i, idx.pos[fw])
        out = _check_dag(_regroup(graph, uf, "coplace"), self.name)
        log.info("co-placement: %d next-op and %d forward/backward unions", n_next, n_fb)
        return out, CoarseMap.identity(out)


class OperatorFusion(GraphPass):
    """Operator fusion (Baechi 3.3): fuse directly connected ops of the same (colocation / co-placement)
    group, only when the source has out-degree <= 1 or the destination in-degree <= 1.

    Fusing the ends of an edge u -> v creates a cycle iff another path leads from u to v; such a path needs
    out-degree(u) >= 2 and in-degree(v) >= 2, so the rule (Figure 5 d, e) is cycle-safe without searching
    for paths.  Degrees are those of the graph fused so far (distinct neighbouring fused ops), and fusion
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
                    if len(succ[a]) > 1 and len(pred[b]) > 1:
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
        out, cmap = _contract(graph, root, name_prefix="fused", attrs=_fused_attrs(graph, "Fused"))
        _check_dag(out, self.name)
        log.info("operator fusion: %d -> %d ops (%d fusions)", n, len(out), fused)
        return out, cmap


def _max_memory(memory_bytes: Any, memory_fraction: float) -> float | None:
    if memory_bytes is None:
        return None
    if isinstance(memory_bytes, (int, float)):
        vals = [float(memory_bytes)]
    else:
        vals = []
        for d in memory_bytes:
            if isinstance(d, Mapping):
                m = d.get("memory_bytes")
                vals.append(math.inf if m is None else float(m))
            else:
                vals.append(float(d))
    if not vals:
        return None
    return max(vals) * float(memory_fraction)


def single_device_peak(graph: OpGraph) -> float:
    """Peak memory of the whole graph run on one device (dynamic memory, topological first-in first-out
    order), i.e. the memory "one device" would need to hold the model (Baechi 3.3). O((V + E) log V)."""
    from ..simulator import simulate

    one = Cluster([Device("one", "CPU", math.inf, 1.0)], name="one")
    g = graph
    if any(a.get("device_type") not in (None, "CPU") for _, a in graph.nx.nodes(data=True)):
        g = graph.copy()
        for _, a in g.nx.nodes(data=True):
            a["device_type"] = None
        g.invalidate()
    res = simulate(g, one, {op: "one" for op in g.ops}, record_memory=False)
    return res.peak_memory["one"]


class ForwardOnlyPlacement(GraphPass):
    """Forward-operator-based placement (Baechi 3.3): when one device could hold the model, place forward
    ops only and put each backward op with its forward op; otherwise place both, forcing each pair together.

    `mode`: ``forward`` folds every backward op (an op with `forward_of`, followed through chains) into the
    coarse op of its forward op; ``full`` keeps every op and unites each pair's colocation groups (the
    co-placement heuristic of 3.2); ``auto`` chooses ``forward`` when the single-device peak memory of the
    graph (dynamic memory, `single_device_peak`) fits in the largest device (`memory_bytes`, a number or the
    cluster's device list, times `memory_fraction`; when not given, the cluster passed to `bind`), else
    ``full``; with no memory known, ``auto`` assumes memory is sufficient.

    Choices in ``forward`` mode: the coarse op's compute time is the sum of its members' (they share the
    device's time), persistent bytes add up, temporary and output bytes are the forward op's (a device
    holding the whole model is not memory bound); a backward op whose device type differs from its forward
    op's stays a separate op; colocation groups of a forward op and its backward ops are united.  Edges
    between coarse ops are kept only when they go forward in the input's topological order (a backward
    edge would close a cycle: the placer sees the forward pass only), which keeps the result a DAG.
    O(V + E) (+ one simulation in ``auto``).
    """

    name = "forward_only_placement"
    MODES = ("auto", "forward", "full")

    def __init__(self, mode: str = "auto", memory_bytes: Any = None, memory_fraction: float = 1.0):
        if mode not in self.MODES:
            raise ConfigError(f"forward-only placement: mode {mode!r} is not one of {self.MODES}")
        self.mode = mode
        self.memory = _max_memory(memory_bytes, memory_fraction)

    def bind(self, cluster: Cluster) -> None:
        """Take the memory from the cluster the job runs on (the orchestrator calls this before `apply`)
        unless `memory_bytes` was given."""
        if self.memory is None:
            self.memory = max(d.memory_bytes for d in cluster.devices)

    def choose(self, graph: OpGraph) -> str:
        if self.mode != "auto":
            return self.mode
        if self.memory is None or math.isinf(self.memory):
            return "forward"
        need = single_device_peak(graph)
        mode = "forward" if need <= self.memory else "full"
        log.info("forward-only placement (auto): one device needs %.6g bytes of %.6g -> %s", need, self.memory, mode)
        return mode

    def apply(self, graph: OpGraph) -> tuple[OpGraph, CoarseMap]:
        idx = graph.index()
        n = idx.n
        fwd = [-1] * n
        for i in range(n):
            fw = graph.op(idx.names[i]).get("forward_of")
            if fw is not None and fw in idx.pos and idx.pos[fw] != i:
                fwd[i] = idx.pos[fw]
        if all(f < 0 for f in fwd):
            out = graph.copy()
            return out, CoarseMap.identity(out)
        mode = self.choose(graph)
        if mode == "full":
            out, cmap = CoPlacement(next_op=False, forward_backward=True).apply(graph)
            return out, cmap
        types = _group_types(graph)
        root = list(range(n))

        def resolve(i: int) -> int:
            seen = 0
            while fwd[i] >= 0 and seen <= n:
                i = fwd[i]
                seen += 1
            return i

        for i in range(n):
            if fwd[i] >= 0:
                r = resolve(i)
                if types[i] is None or types[r] is None or types[i] == types[r]:
                    root[i] = r
        # unite the colocation groups of each coarse op's members
        uf = _UnionFind(types)
        first: dict[str, int] = {}
        for i, g in enumerate(idx.colocation):
            if g is not None:
                if g in first:
                    uf.union(first[g], i)
                else:
                    first[g] = i
        for i in range(n):
            if root[i] != i:
                uf.union(i, root[i])
        grouped = _regroup(graph, uf, "fwdgroup")
        gidx = grouped.index()

        def attrs(mem: list[int], internal_only: set[int]) -> dict[str, Any]:
            r = mem[0]
            a = dict(grouped.op(gidx.names[r]))
            a["compute_s"] = sum(gidx.compute_s[i] for i in mem)
            a["persistent_bytes"] = sum(gidx.persistent[i] for i in mem)
            by = {}
            for i in mem:
                for t in gidx.compute_by_type[i] or {}:
                    by[t] = 0.0
            if by:
                for t in by:
                    by[t] = sum((gidx.compute_by_type[i] or {}).get(t, gidx.compute_s[i]) for i in mem)
                a["compute_s_by_type"] = by
            return a

        # the representative of a set is its forward op, which comes first in topological order
        rootg = [gidx.pos[idx.names[root[i]]] for i in range(n)]
        rootg_by_g = [0] * n
        for i in range(n):
            rootg_by_g[gidx.pos[idx.names[i]]] = rootg[i]
        out, cmap = _contract(grouped, rootg_by_g, name_prefix="fwd", attrs=attrs, keep_edge=lambda ra, rb: ra < rb)
        _check_dag(out, self.name)
        log.info("forward-only placement: %d -> %d ops", n, len(out))
        return out, cmap


class ProfilePerturbation(GraphPass):
    """Profile perturbation (Baechi 5.3, Figure 8): multiply every op's compute time and every edge's bytes
    (its communication cost) by an independent factor drawn uniformly from [1 - bound, 1 + bound].

    Seeded (`seed`) and deterministic: ops and edges are visited in the graph's insertion order.  Only the
    placer sees the perturbed costs; the orchestrator simulates the original graph.  Identity `CoarseMap`.
    O(V + E)."""

    name = "profile_perturbation"

    def __init__(self, bound: float = 0.2, seed: int = 0):
        if not 0 <= float(bound) < 1:
            raise ConfigError(f"profile perturbation: bound must lie in [0, 1), got {bound!r}")
        self.bound = float(bound)
        self.seed = int(seed)

    def apply(self, graph: OpGraph) -> tuple[OpGraph, CoarseMap]:
        rng = random.Random(self.seed)
        lo, hi = 1.0 - self.bound, 1.0 + self.bound
        out = graph.copy()
        for _, a in out.nx.nodes(data=True):
            f = rng.uniform(lo, hi)
            a["compute_s"] = a["compute_s"] * f
            if a.get("compute_s_by_type"):
                a["compute_s_by_type"] = {t: v * f for t, v in a["compute_s_by_type"].items()}
        for _, _, d in out.nx.edges(data=True):
            f = rng.uniform(lo, hi)
            if not d.get("control"):
                d["bytes"] = d["bytes"] * f
        out.invalidate()
        return _check_dag(out, self.name), CoarseMap.identity(out)
