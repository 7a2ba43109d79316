"""Baechi's passes' use of the shared contraction (`algorithms.passes.contract`): ops with the same root
become one op, named after their first member, and `forward_of` links are redirected to the coarse ops."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...graph import OpGraph
from ...placement import CoarseMap
from ..contract import AttrsFn, contract


def contract_roots(
    graph: OpGraph,
    root: Sequence[int],
    *,
    name_prefix: str,
    attrs: AttrsFn,
    keep_edge: Callable[[int, int], bool] | None = None,
) -> tuple[OpGraph, CoarseMap]:
    """Contract every set of ops with the same `root` (op indices of ``graph.index()``) into one op.

    A set of one op keeps the op (name and attributes); a larger set is named ``<name_prefix>:<first
    member>`` (primed until unique) and costs ``attrs(members, internal_only)`` (members in topological
    order; internal_only: ops whose every consumer is inside their set).  Coarse ops come in the order of
    their first members; edges merge as `contract` merges them; `keep_edge(root a, root b)` may drop edges
    (forward-only placement).  A `forward_of` naming an op folded elsewhere names its coarse op (or None
    inside the same one).  O(V + E)."""
    idx = graph.index()
    n = idx.n
    by_root: dict[int, list[int]] = {}
    for i in range(n):
        by_root.setdefault(root[i], []).append(i)
    taken = set(graph.ops)
    sets: list[tuple[str, list[int]]] = []
    roots: list[int] = []
    for r in sorted(by_root, key=lambda r: by_root[r][0]):
        mem = by_root[r]
        if len(mem) == 1:
            nm = idx.names[mem[0]]
        else:
            nm = f"{name_prefix}:{idx.names[mem[0]]}"
            while nm in taken:
                nm += "'"
            taken.add(nm)
        sets.append((nm, mem))
        roots.append(r)

    def coarse_attrs(mem: list[int], internal_only: set[int]) -> dict:
        return dict(graph.op(idx.names[mem[0]])) if len(mem) == 1 else attrs(mem, internal_only)

    keep = None if keep_edge is None else (lambda a, b: keep_edge(roots[a], roots[b]))
    out, cmap = contract(graph, sets, coarse_attrs, keep_edge=keep)
    # forward_of must name an op of the coarse graph
    where = {idx.names[i]: nm for nm, mem in sets for i in mem}
    for c, a in out.nx.nodes(data=True):
        fw = a.get("forward_of")
        if fw is not None:
            tgt = where.get(fw)
            a["forward_of"] = tgt if tgt is not None and tgt != c else None
    out.invalidate()
    return out, cmap
