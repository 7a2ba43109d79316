"""DFS-TOPO and CPD-TOPO (Celeritas 4.2.2 and 5.1.3) on hand-built graphs, and their invariants on random DAGs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from algorithms.graph import OpGraph
from algorithms.placers.celeritas.common import CommModel
from algorithms.placers.celeritas.topo import cpd_topo, dfs_topo, levels
from tests.strategies import random_dags

NO_COMM = CommModel(0.0, 0.0)


def names(g: OpGraph, order: list[int]) -> list[str]:
    idx = g.index()
    return [idx.names[i] for i in order]


def diamond_and_chain() -> OpGraph:
    """s -> {a, b} -> c, and an independent chain t -> d with the longest path."""
    g = OpGraph("hand")
    for name, w in [("s", 1), ("a", 5), ("b", 1), ("c", 1), ("t", 10), ("d", 1)]:
        g.add_op(name, compute_s=w)
    for u, v in [("s", "a"), ("s", "b"), ("a", "c"), ("b", "c"), ("t", "d")]:
        g.add_edge(u, v, bytes=0)
    return g


def test_levels_by_hand():
    g = diamond_and_chain()
    idx = g.index()
    tl, bl = levels(idx, idx.compute_s, NO_COMM)
    t = dict(zip(idx.names, tl))
    b = dict(zip(idx.names, bl))
    assert t == {"s": 0, "a": 1, "b": 1, "c": 6, "t": 0, "d": 10}
    assert b == {"s": 7, "a": 6, "b": 2, "c": 1, "t": 11, "d": 1}


def test_cpd_topo_order_by_hand():
    # cpath: t = d = 11 > s = a = c = 7 > b = 3. Sources by decreasing cpath: [t, s]; t releases d (head);
    # s releases b and a, pushed in increasing cpath (b, then a) to the head, so a comes first; c waits for b.
    g = diamond_and_chain()
    idx = g.index()
    assert names(g, cpd_topo(idx, idx.compute_s, NO_COMM)) == ["t", "d", "s", "a", "b", "c"]


def test_dfs_topo_order_by_hand():
    # index order is s, a, b, c, t, d; DFS-TOPO follows s's children depth first before the other source t
    g = diamond_and_chain()
    assert names(g, dfs_topo(g)) == ["s", "a", "b", "c", "t", "d"]


def test_dfs_topo_keeps_chains_together():
    # Figure 3's point: M-TOPO (BFS) interleaves independent chains, DFS-TOPO emits each chain whole.
    g = OpGraph("fig3")
    for c in range(3):
        for k in range(3):
            g.add_op(f"c{c}_{k}", compute_s=1)
        g.add_edge(f"c{c}_0", f"c{c}_1", bytes=1)
        g.add_edge(f"c{c}_1", f"c{c}_2", bytes=1)
    order = names(g, dfs_topo(g))
    assert order == [f"c{c}_{k}" for c in range(3) for k in range(3)]


def test_cpd_topo_communication_changes_the_critical_child():
    # s -> a carries 1000 bytes, s -> b carries none. Without communication b has the larger cpath (3 > 2.5);
    # at 1 s per 1000 bytes a's path becomes longer (3.5 > 3) and CPD-TOPO follows a first.
    g = OpGraph("comm")
    g.add_op("s", compute_s=1.0)
    g.add_op("a", compute_s=1.5)
    g.add_op("b", compute_s=2.0)
    g.add_edge("s", "a", bytes=1000)
    g.add_edge("s", "b", bytes=0)
    idx = g.index()
    assert names(g, cpd_topo(idx, idx.compute_s, NO_COMM)) == ["s", "b", "a"]
    assert names(g, cpd_topo(idx, idx.compute_s, CommModel(0.0, 1e-3))) == ["s", "a", "b"]


def _is_topological(g: OpGraph, order: list[int]) -> bool:
    idx = g.index()
    pos = {v: k for k, v in enumerate(order)}
    return sorted(order) == list(range(idx.n)) and all(pos[u] < pos[v] for u in range(idx.n) for v, _ in idx.succ[u])


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(random_dags(max_ops=40, training=True))
def test_orders_are_topological_on_random_dags(g):
    idx = g.index()
    assert _is_topological(g, dfs_topo(g))
    assert _is_topological(g, cpd_topo(idx, idx.compute_s, CommModel(1e-3, 1e-4)))


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(random_dags(max_ops=30))
def test_cpd_topo_head_is_a_source_of_maximum_cpath(g):
    idx = g.index()
    comm = CommModel(0.01, 1e-3)
    tl, bl = levels(idx, idx.compute_s, comm)
    cp = [a + b for a, b in zip(tl, bl)]
    first = cpd_topo(idx, idx.compute_s, comm)[0]
    sources = [i for i in range(idx.n) if not idx.pred[i]]
    assert cp[first] == max(cp[i] for i in sources)
