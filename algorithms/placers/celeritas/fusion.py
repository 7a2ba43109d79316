"""Optimal Operation Fusion (Celeritas section 5.1.3, Algorithm 1, function Optimal_BP; equations 4 to 6;
Lemma 2) and the coarse graph it produces.

Breakpoint dynamic program
--------------------------
The ops are laid out in CPD-TOPO order v_1 .. v_n. A *breakpoint* starts a new cluster; the cluster opened by
breakpoint v_i and closed by the next breakpoint v_j is set[v_i, v_j] = {v_i, ..., v_{j-1}}. Its cost is the
communication from the cluster to everything after it (eq. 4):

    cost(v_i, v_j) = sum over i <= k < j <= m <= n of c_km
    cost(v_i, v_j) = cost(v_i, v_{j-1}) + sum_{m >= j} c_{j-1,m} - sum_{i <= s < j-1} c_{s,j-1}          (eq. 5)
    S(v_j) = min over i of S(v_i) + cost(v_i, v_j)   s.t.  j - R <= i <= j - 1,  sum_{k in [i,j)} Mem[v_k] <= M
                                                                                                        (eq. 6)

Every edge goes forward in a topological order, so S at the end is the total cost of the edges cut between
clusters: the program finds the clustering of contiguous runs of at most R ops and at most M bytes that
cuts the least communication. Choices where the paper is vague:

* a sentinel breakpoint v_{n+1} closes the last cluster (Algorithm 1 backtracks from v_n, which would leave
  v_n alone); S(v_1) = 0;
* a single op heavier than M forms a cluster on its own (the constraint cannot be met otherwise);
* a cluster may not mix ops that must run on different device types (an extension the paper, with one
  device type, does not need): such ops would make the coarse node unplaceable;
* among equally cheap predecessors the earliest breakpoint wins (larger clusters, fewer nodes);
* `R` counts ops: cluster size j - i <= R.

Implementation: eq. 5 is evaluated in its closed form cost(i, j) = Out[i, j) - Internal(i, j), where Out is a
prefix sum of every op's outgoing communication and Internal(i, j) the communication of edges with both ends in
[i, j). Keeping D[i] = S(i) - PrefOut(i) - Internal(i, j) in a numpy array, stepping j adds the in-edges of
v_{j-1} to D over a window of at most R entries, and S(j) = PrefOut(j) + min D over the window. O(n + E) numpy
steps of at most R elements each (the paper: O(E), Kernighan 1971).

Coarse graph (Lemma 2)
----------------------
Each cluster becomes one node: compute summed (also per device type where a member has a
`compute_s_by_type`), memory summed (persistent, temporary and output bytes; see `build_coarse_graph` for how
the three are split so that the simulator's dynamic-memory model stays meaningful), and edges aggregated. The
clusters are contiguous runs of a topological order, so every coarse edge goes from an earlier cluster to a
later one and the coarse graph is a DAG (Lemma 2); this is checked and a violation raises `InvalidGraph`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConfigError, InvalidGraph
from ...graph import GraphIndex, OpGraph
from ...passes.contract import contract
from ...placement import CoarseMap
from .common import EdgeCosts

log = logging.getLogger(__name__)


def optimal_breakpoints(
    idx: GraphIndex,
    seq: Sequence[int],
    comm: Callable[[float], float] | EdgeCosts,
    memory: Sequence[float],
    R: int = 200,
    M: float = math.inf,
    types: Sequence[str | None] | None = None,
) -> tuple[list[int], float]:
    """Optimal_BP of Algorithm 1: the cluster start positions in `seq` (always beginning with 0) and S, the
    total communication cost of the cut edges.

    `seq` is a topological order of the ops of `idx` (CPD-TOPO), `comm(bytes)` the edge cost, `memory[i]` op
    i's memory, `R` the exploration range, `M` the memory limit per cluster, `types[i]` the device type op i
    must run on (None for any). See the module docstring for the recurrences and choices.
    """
    n = len(seq)
    if n == 0:
        return [], 0.0
    if R < 1:
        raise ConfigError(f"exploration range R must be >= 1, got {R!r}")
    pos = [0] * idx.n
    for k, v in enumerate(seq):
        pos[v] = k
    ec = EdgeCosts.of(idx, comm)
    out_c = np.zeros(n + 1)
    out_c[1:] = [ec.out_total[v] for v in seq]
    pref_out = np.cumsum(out_c)  # pref_out[k] = out-communication of seq[0:k]
    mem = np.zeros(n + 1)
    mem[1:] = [memory[v] for v in seq]
    pref_mem = np.cumsum(mem)  # pref_mem[k] = memory of seq[0:k]
    S = np.zeros(n + 1)
    P = np.zeros(n + 1, dtype=np.int64)
    D = np.zeros(n + 1)  # D[i] = S(i) - pref_out[i] - Internal(i, j)
    lo_mem = lo_type = 0
    last_of_type: dict[str, int] = {}
    for j in range(1, n + 1):
        u = seq[j - 1]
        # --- window of admissible previous breakpoints i (monotone in j) ---
        t = types[u] if types is not None else None
        if t is not None:
            other = max((p for tt, p in last_of_type.items() if tt != t), default=-1)
            lo_type = max(lo_type, other + 1)
            last_of_type[t] = j - 1
        while lo_mem < j - 1 and pref_mem[j] - pref_mem[lo_mem] > M:
            lo_mem += 1
        lo = max(j - R, lo_mem, lo_type, 0)
        if lo > j - 1:
            lo = j - 1
        # --- Internal(i, j) gains the edges into v_{j-1} from s >= i (eq. 5, last term) ---
        for p, c in ec.pred[u]:
            ps = pos[p]
            if ps >= lo:
                D[lo : ps + 1] -= c
        k = lo + int(np.argmin(D[lo:j]))
        S[j] = pref_out[j] + D[k]
        P[j] = k
        D[j] = S[j] - pref_out[j]
    starts = []
    k = n
    while k > 0:
        k = int(P[k])
        starts.append(k)
    starts.reverse()
    return starts, float(S[n])


def split_by_breakpoints(seq: Sequence[int], starts: Sequence[int]) -> list[list[int]]:
    """Divide the sequence at the breakpoints (Algorithm 1, line 6)."""
    bounds = list(starts) + [len(seq)]
    return [list(seq[bounds[k] : bounds[k + 1]]) for k in range(len(starts))]


def split_for_colocation(idx: GraphIndex, clusters: Sequence[Sequence[int]]) -> list[list[int]]:
    """Refine contiguous clusters so that no colocation group spans two clusters unless each of its members
    stands alone: every member of a group found in more than one cluster becomes a singleton cluster, and the
    rest of its cluster is cut around it (the pieces stay contiguous runs of the order, so Lemma 2 still
    holds). Repeated until no new group spans clusters. O((V + E) * rounds), rounds <= the number of groups."""
    out = [list(m) for m in clusters]
    while True:
        where: dict[str, set[int]] = {}
        for c, members in enumerate(out):
            for i in members:
                g = idx.colocation[i]
                if g is not None:
                    where.setdefault(g, set()).add(c)
        spanning = {g for g, cs in where.items() if len(cs) > 1}
        new: list[list[int]] = []
        for members in out:
            cur: list[int] = []
            for i in members:
                if idx.colocation[i] in spanning and len(members) > 1:
                    if cur:
                        new.append(cur)
                        cur = []
                    new.append([i])
                else:
                    cur.append(i)
            if cur:
                new.append(cur)
        if len(new) == len(out):
            return new
        out = new


@dataclass
class Fusion:
    """The result of Optimal Operation Fusion on a graph."""

    coarse: OpGraph
    coarse_map: CoarseMap
    clusters: list[list[int]]  # member op indices (of the original graph's index) per coarse node
    cut_cost: float  # S(v_{n+1}): communication of the edges between clusters


def build_coarse_graph(
    graph: OpGraph,
    clusters: Sequence[Sequence[int]],
    *,
    prefix: str = "celer",
    colocation: str = "none",
    name: str | None = None,
) -> tuple[OpGraph, CoarseMap]:
    """The coarse graph of `clusters` (lists of op indices of `graph.index()`, contiguous runs of one
    topological order) and its `CoarseMap` (members in that topological order).

    Node attributes: compute_s summed (and `compute_s_by_type` summed per type, a member without an entry
    counting its `compute_s`); memory summed and split as persistent = members' persistent bytes, output =
    outputs of members read outside the cluster (or by nobody), temporary = members' temporary bytes plus
    outputs consumed only inside the cluster: the total persistent + temporary + output is the members' sum;
    device_type = the single type the members must run on (see `optimal_breakpoints`); phase = the members'
    common phase, else "other"; `n_members`.

    Edges aggregated: the bytes from cluster A to cluster B are, for every producer in A, the largest of its
    edges into B, summed over the producers: every out-edge of an op carries its output tensor, which crosses
    to a device once however many consumers it has there (the simulator's model), so a tensor is counted once.
    An edge made only of control edges stays a control edge.

    `colocation`: "none" leaves coarse nodes without a group (a placer must then apply the members' groups
    itself, as `CeleritasPlacer` does); "split" expects clusters refined by `split_for_colocation` and gives
    each singleton member of a group spanning several clusters its group (all other groups lie whole inside
    one coarse node); "supergroup" unites every colocation group with every other group that
    shares a coarse node with it (union-find) and labels each coarse node holding a member of a united group
    with it, so that any placer that respects coarse colocation yields a valid placement of the original ops.

    Raises `InvalidGraph` if an edge would go backwards between clusters (Lemma 2 violated: the clusters were
    not contiguous runs of a topological order). O(V + E).
    """
    idx = graph.index()
    names = idx.names
    cid = [-1] * idx.n
    for c, members in enumerate(clusters):
        for i in members:
            if cid[i] != -1:
                raise InvalidGraph(f"op {names[i]!r} is in two clusters")
            cid[i] = c
    if any(c == -1 for c in cid):
        raise InvalidGraph(f"clusters leave ops out, e.g. {[names[i] for i in range(idx.n) if cid[i] == -1][:5]}")
    cname = [f"{prefix}{c}" for c in range(len(clusters))]
    eff = None
    if colocation == "supergroup":
        from .common import effective_types

        eff = effective_types(idx)
        parent: dict[str, str] = {}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for g in idx.colocation:
            if g is not None:
                parent.setdefault(g, g)
        for members in clusters:
            gs = [g for g in (idx.colocation[i] for i in members) if g is not None]
            for g in gs[1:]:
                a, b = find(gs[0]), find(g)
                if a != b:
                    parent[b] = a
    elif colocation not in ("none", "split"):
        raise ConfigError(f"colocation must be 'none', 'split' or 'supergroup', got {colocation!r}")
    if colocation == "split":
        where: dict[str, set[int]] = {}
        for c, members in enumerate(clusters):
            for i in members:
                g = idx.colocation[i]
                if g is not None:
                    where.setdefault(g, set()).add(c)
    types = eff
    if types is None:
        from .common import effective_types

        types = effective_types(idx)
    super_type: dict[str, str] = {}

    def attrs(members: list[int], internal_only: set[int]) -> dict[str, Any]:
        c = cid[members[0]]
        comp = 0.0
        by_type: dict[str, float] = {}
        any_by = [idx.compute_by_type[i] for i in members if idx.compute_by_type[i]]
        keys = sorted({k for d in any_by if d for k in d})
        pers = temp = outb = 0.0
        phases = set()
        dts = {types[i] for i in members} - {None}
        if len(dts) > 1:
            raise InvalidGraph(f"cluster {cname[c]} mixes device types {sorted(t for t in dts if t)}")
        for i in members:
            comp += idx.compute_s[i]
            for k in keys:
                by = idx.compute_by_type[i]
                by_type[k] = by_type.get(k, 0.0) + (by.get(k, idx.compute_s[i]) if by else idx.compute_s[i])
            pers += idx.persistent[i]
            temp += idx.temporary[i]
            if i in internal_only:
                temp += idx.output[i]
            else:
                outb += idx.output[i]
            phases.add(idx.phase[i])
        grp = None
        if colocation == "split":
            gs = {g for g in (idx.colocation[i] for i in members) if g is not None}
            spanning = [g for g in gs if len(where[g]) > 1]
            if spanning:
                if len(members) > 1:
                    raise InvalidGraph(
                        f"colocation group {spanning[0]!r} spans several clusters; refine the "
                        f"clusters with split_for_colocation first"
                    )
                grp = spanning[0]
        elif colocation == "supergroup":
            gl = [g for g in (idx.colocation[i] for i in members) if g is not None]
            if gl:
                grp = "celer_group:" + find(gl[0])
                dt = next(iter(dts)) if dts else None
                if dt is not None:
                    prev = super_type.setdefault(grp, dt)
                    if prev != dt:
                        raise InvalidGraph(
                            f"fusion united colocation groups that need both {prev} and {dt} devices "
                            f"(through coarse node {cname[c]}); place this graph with the Celeritas placer's "
                            f"internal fusion (optimizer=none) instead"
                        )
        a: dict[str, Any] = {
            "type": "CeleritasCluster",
            "phase": phases.pop() if len(phases) == 1 else "other",
            "compute_s": comp,
            "persistent_bytes": pers,
            "temporary_bytes": temp,
            "output_bytes": outb,
            "colocation": grp,
            "device_type": next(iter(dts)) if dts else None,
            "forward_of": None,
        }
        if by_type:
            a["compute_s_by_type"] = by_type
        a["n_members"] = len(members)
        return a

    coarse, cmap = contract(
        graph,
        [(cname[c], members) for c, members in enumerate(clusters)],
        attrs,
        canonical=True,
        name=name or f"{graph.name}-{prefix}",
    )
    # Lemma 2: clusters are contiguous runs of a topological order, so no edge goes back between clusters
    for i in range(idx.n):
        for s_, _ in idx.succ[i]:
            if cid[s_] < cid[i]:
                raise InvalidGraph(
                    f"Lemma 2 violated: edge {names[i]!r} -> {names[s_]!r} goes from cluster "
                    f"{cname[cid[i]]} back to {cname[cid[s_]]}; clusters must be contiguous runs of a "
                    f"topological order"
                )
    return coarse, cmap


def fuse(
    graph: OpGraph,
    w: Sequence[float],
    comm: Callable[[float], float] | EdgeCosts,
    *,
    R: int = 200,
    M: float = math.inf,
    memory: Sequence[float] | None = None,
    seq: Sequence[int] | None = None,
    colocation: str = "none",
    prefix: str = "celer",
) -> Fusion:
    """Optimal Operation Fusion (Algorithm 1): CPD-TOPO, Optimal_BP, division into clusters, coarse graph.

    `w` are computation times, `comm(bytes)` edge costs (see `common`), `R` the exploration range, `M` the
    memory limit per cluster; `seq` may give a precomputed CPD-TOPO order. O(V + E log dmax + E * R).
    """
    from .common import effective_types, node_memory
    from .topo import cpd_topo

    idx = graph.index()
    comm = EdgeCosts.of(idx, comm)
    if seq is None:
        seq = cpd_topo(idx, w, comm)
    mem = memory if memory is not None else node_memory(idx)
    starts, cut = optimal_breakpoints(idx, seq, comm, mem, R=R, M=M, types=effective_types(idx))
    clusters = split_by_breakpoints(seq, starts)
    if colocation == "split":
        n0 = len(clusters)
        clusters = split_for_colocation(idx, clusters)
        log.info(
            "fusion: %d clusters -> %d after cutting out members of colocation groups that span clusters",
            n0,
            len(clusters),
        )
    coarse, cmap = build_coarse_graph(graph, clusters, colocation=colocation, prefix=prefix)
    log.info("fusion: %d ops -> %d clusters (R=%d, M=%.3g), cut communication %.6g", idx.n, len(clusters), R, M, cut)
    return Fusion(coarse, cmap, clusters, cut)
