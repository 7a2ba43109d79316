"""Optimal Operation Fusion (Celeritas 5.1.3): the breakpoint program by hand and against brute force, the
coarse graph (Lemma 2), CCR (equation 1), and the CelerFusion pass."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.errors import InvalidGraph
from algorithms.graph import OpGraph
from algorithms.passes.celeritas import CelerFusion
from algorithms.placers.celeritas.ccr import ccr
from algorithms.placers.celeritas.common import CommModel, effective_types, node_memory
from algorithms.placers.celeritas.fusion import build_coarse_graph, fuse, optimal_breakpoints, split_by_breakpoints
from algorithms.placers.celeritas.topo import cpd_topo
from tests.strategies import random_dags

BYTES = CommModel(0.0, 1.0)  # an edge costs its bytes


def chain(costs, mem=1):
    """v0 -> v1 -> ... with edge (v_k, v_k+1) carrying costs[k] bytes; every op holds `mem` bytes."""
    g = OpGraph("chain")
    for k in range(len(costs) + 1):
        g.add_op(f"v{k}", compute_s=1.0, persistent_bytes=mem)
    for k, c in enumerate(costs):
        g.add_edge(f"v{k}", f"v{k + 1}", bytes=c)
    return g


def bp(g, R=200, M=math.inf):
    idx = g.index()
    seq = cpd_topo(idx, idx.compute_s, BYTES)
    return optimal_breakpoints(idx, seq, BYTES, node_memory(idx), R=R, M=M, types=effective_types(idx))


def test_breakpoints_small_chain_by_hand():
    # edges v0-v1: 5, v1-v2: 1, v2-v3: 4, v3-v4: 2; clusters of at most 2 ops (M = 2 bytes, 1 byte per op).
    # Runs (2,2,1) cut 1 + 2 = 3; (2,1,2) cut 1 + 4 = 5; (1,2,2) cut 5 + 4 = 9; more runs cut more.
    g = chain([5, 1, 4, 2])
    assert bp(g, M=2) == ([0, 2, 4], 3.0)
    # the same limit through R
    assert bp(g, R=2) == ([0, 2, 4], 3.0)
    # runs of at most 3: cutting the cheapest edge (v1-v2) once is optimal: {v0, v1}, {v2, v3, v4}
    assert bp(g, R=3) == ([0, 2], 1.0)
    # no limit: one cluster, nothing cut
    assert bp(g) == ([0], 0.0)
    # R = 1: every op alone, every edge cut
    assert bp(g, R=1) == ([0, 1, 2, 3, 4], 12.0)


def test_op_heavier_than_M_stands_alone():
    g = chain([1, 1, 1])
    g.op("v1")["persistent_bytes"] = 10
    g.invalidate()
    starts, cost = bp(g, M=3)
    assert starts == [0, 1, 2] and cost == 2.0


def test_device_types_are_never_fused_together():
    g = chain([9, 9, 9])
    g.op("v1")["device_type"] = "CPU"
    g.op("v2")["device_type"] = "GPU"
    g.invalidate()
    starts, cost = bp(g)
    assert starts == [0, 2] and cost == 9.0


def _brute_force(idx, seq, comm, mem, R, M, types):
    n = len(seq)
    pos = {v: k for k, v in enumerate(seq)}
    best = math.inf
    for cuts in itertools.product([0, 1], repeat=n - 1):
        starts = [0] + [k + 1 for k in range(n - 1) if cuts[k]]
        bounds = starts + [n]
        ok = True
        seg_of = [0] * n
        for s in range(len(starts)):
            a, b = bounds[s], bounds[s + 1]
            seg = seq[a:b]
            ts = {types[v] for v in seg} - {None}
            if b - a > 1 and (b - a > R or sum(mem[v] for v in seg) > M or len(ts) > 1):
                ok = False
                break
            for k in range(a, b):
                seg_of[k] = s
        if not ok:
            continue
        cost = sum(comm(bb) for u in range(idx.n) for v, bb in idx.succ[u] if seg_of[pos[u]] != seg_of[pos[v]])
        best = min(best, cost)
    return best


@settings(max_examples=40, deadline=None)
@given(
    random_dags(max_ops=9, colocation=False, device_types=True),
    st.integers(1, 4),
    st.sampled_from([math.inf, 1500.0, 3000.0]),
)
def test_breakpoints_are_optimal_against_brute_force(g, R, M):
    idx = g.index()
    comm = CommModel(0.5, 1e-3)
    seq = cpd_topo(idx, idx.compute_s, comm)
    mem = node_memory(idx)
    types = effective_types(idx)
    starts, cost = optimal_breakpoints(idx, seq, comm, mem, R=R, M=M, types=types)
    assert cost == pytest.approx(_brute_force(idx, seq, comm, mem, R, M, types), abs=1e-9)
    # the reported cost is the cost of the clustering returned
    clusters = split_by_breakpoints(seq, starts)
    cid = {v: c for c, m in enumerate(clusters) for v in m}
    cut = sum(comm(b) for u in range(idx.n) for v, b in idx.succ[u] if cid[u] != cid[v])
    assert cost == pytest.approx(cut, abs=1e-9)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # 60-op graphs, loaded host
@given(random_dags(max_ops=60, training=True, device_types=True), st.integers(1, 12))
def test_coarse_graph_is_a_dag_and_preserves_costs(g, R):
    idx = g.index()
    fu = fuse(g, idx.compute_s, CommModel(1e-3, 1e-4), R=R, M=5000.0)
    c = fu.coarse
    assert nx.is_directed_acyclic_graph(c.nx)  # Lemma 2
    fu.coarse_map.check_covers(g)
    # members in a topological order of the original graph
    for members in fu.coarse_map.values():
        pos = {m: k for k, m in enumerate(members)}
        for u in members:
            for v in g.successors(u):
                if v in pos:
                    assert pos[u] < pos[v]
    assert sum(a["compute_s"] for _, a in c.nx.nodes(data=True)) == pytest.approx(sum(idx.compute_s))
    assert c.total_memory() == pytest.approx(g.total_memory())
    for name, members in fu.coarse_map.items():
        a = c.op(name)
        assert a["compute_s"] == pytest.approx(sum(g.op(m)["compute_s"] for m in members))
        assert len(members) <= R
        if len(members) > 1:
            assert sum(node_memory(g.index())[g.index().pos[m]] for m in members) <= 5000.0
    # every original cross-cluster edge is represented by a coarse edge
    inv = fu.coarse_map.inverse()
    for u, v, _ in g.edges():
        if inv[u] != inv[v]:
            assert c.nx.has_edge(inv[u], inv[v])
    c.validate()


def test_coarse_edges_aggregate_each_tensor_once():
    # a -> {x, y} (a's 100-byte output read twice inside cluster B) and b -> y (50 bytes): 150 bytes A -> B
    g = OpGraph("agg")
    for n in "abxy":
        g.add_op(n, compute_s=1.0, output_bytes={"a": 100, "b": 50}.get(n, 0))
    g.add_edge("a", "x", bytes=100)
    g.add_edge("a", "y", bytes=100)
    g.add_edge("b", "y", bytes=50)
    idx = g.index()
    coarse, cmap = build_coarse_graph(g, [[idx.pos["a"], idx.pos["b"]], [idx.pos["x"], idx.pos["y"]]])
    assert coarse.nx.edges["celer0", "celer1"]["bytes"] == 150


def test_backward_edge_between_clusters_violates_lemma_2():
    g = chain([1, 1])
    idx = g.index()
    with pytest.raises(InvalidGraph, match="Lemma 2"):
        build_coarse_graph(g, [[idx.pos["v1"]], [idx.pos["v0"], idx.pos["v2"]]])


def test_ccr_by_hand():
    # two edges of 1000 and 3000 bytes at 1e-3 s per byte plus 0.5 s latency: 1.5 + 3.5 = 5 s; compute 2 s
    g = OpGraph("ccr")
    for n in "abc":
        g.add_op(n, compute_s={"a": 0.5, "b": 1.0, "c": 0.5}[n])
    g.add_edge("a", "b", bytes=1000)
    g.add_edge("b", "c", bytes=3000)
    assert ccr(g, latency_s=0.5, bytes_per_s=1000.0) == pytest.approx(2.5)


def test_fusion_lowers_ccr_on_a_training_graph():
    from algorithms.cluster import uniform_cluster
    from algorithms.workloads.synthetic import level_dag

    g = level_dag(levels=30, training=True, seed=3)
    cl = uniform_cluster(4, 1e12, latency_s=1e-4, bytes_per_s=1e9)
    idx = g.index()
    comm = CommModel.of_cluster(cl)
    fu = fuse(g, idx.compute_s, comm, R=20)
    assert len(fu.coarse) < len(g)
    assert ccr(fu.coarse, cl) < ccr(g, cl)


@pytest.mark.parametrize("mode", ["split", "supergroup"])
def test_celer_fusion_pass_keeps_colocation_valid(mode):
    from algorithms.workloads.synthetic import level_dag

    g = level_dag(levels=25, training=True, colocated_fraction=0.3, seed=5)
    p = CelerFusion(
        R=15, memory_fraction=0.25, device_memory_bytes=4e9, latency_s=1e-5, bytes_per_s=1e9, colocation=mode
    )
    coarse, cmap = p.apply(g)
    assert len(coarse) < len(g)
    if mode == "split":  # every coarse node with a group is a single op of a group spanning coarse nodes
        assert all(len(cmap[c]) == 1 for c in coarse.ops if coarse.op(c)["colocation"] is not None)
    cmap.check_covers(g)
    assert nx.is_directed_acyclic_graph(coarse.nx)
    # any assignment that respects the coarse colocation respects the original one
    groups = {}
    assign = {}
    for k, c in enumerate(coarse.topological_order()):
        grp = coarse.op(c)["colocation"]
        dev = groups.setdefault(grp, f"d{k % 3}") if grp is not None else f"d{k % 3}"
        assign[c] = dev
    from algorithms.cluster import uniform_cluster
    from algorithms.placement import check_placement

    check_placement(g, uniform_cluster(3, prefix="d"), cmap.expand_assignment(assign))


def test_bound_pass_fuses_like_the_placer():
    from algorithms.cluster import uniform_cluster
    from algorithms.placers.celeritas import CeleritasPlacer
    from algorithms.workloads.synthetic import level_dag

    g = level_dag(levels=30, training=True, seed=8)
    cl = uniform_cluster(4, memory_bytes=g.total_memory() / 2, latency_s=1e-4, bytes_per_s=1e9)
    p = CelerFusion(R=25, colocation="supergroup").bind(cl)  # same clusters as the placer's fusion
    coarse, _ = p.apply(g)
    assert p.memory_limit == pytest.approx(0.25 * g.total_memory() / 2)
    info = CeleritasPlacer(R=25).place(g, cl).info
    assert len(coarse) == info["n_coarse_ops"]
    assert ccr(coarse, cl) == pytest.approx(info["ccr_after"])
