"""HEFT's compiled loop (`heft_kernel`, issue 22) against the Python code it ports.

Three implementations must agree on every graph: `heft._place_python` (the `SlotTimeline` code, the code path
below `heft.COMPILED_MIN_OPS` ops), the compiled ranks and loop (forced here with ``COMPILED_MIN_OPS = 0``) and
`ReferenceHEFT` of `tests/test_heft_slots.py` (the slot-by-slot scan of commit 19d8e23).  Same assignment, same
per-device order, same makespan estimate and info, or the same error with the same message; the upward ranks
bit for bit.  Graphs: hypothesis random DAGs on heterogeneous clusters (device types, speeds, per-pair links,
both communication modes), with colocation groups, memory from tight (infeasible) to ample, costs with ties;
a training graph with tiny timeline blocks (splits, searches across blocks) and the benchmark's random graph.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.cluster import Cluster, Device, Link, uniform_cluster
from algorithms.errors import LabError
from algorithms.graph import OpGraph
from algorithms.placement import Placement
from algorithms.placers.thesis import HEFTPlacer
from algorithms.placers.thesis import heft as heft_mod
from algorithms.placers.thesis.common import upward_rank
from algorithms.workloads.synthetic import level_dag
from benchmarks.bench_scale import make_graph
from tests.strategies import random_clusters, random_dags
from tests.test_heft_slots import ReferenceHEFT

heft_kernel = pytest.importorskip("algorithms.placers.thesis.heft_kernel")


def _outcome(fn, g: OpGraph, cl: Cluster) -> tuple[str, object]:
    try:
        p: Placement = fn(g, cl)
    except (LabError, AssertionError) as e:
        return "error", (type(e), str(e))
    return "placement", (p.assignment, p.order, p.info)


def _compiled(g: OpGraph, cl: Cluster, insertion: bool = True) -> Placement:
    """The placer with the compiled loop whatever the graph's size (an error may come before the loop)."""
    calls = []
    run = heft_kernel.heft_run

    def counted(*args):
        calls.append(1)
        return run(*args)

    old, heft_mod.COMPILED_MIN_OPS = heft_mod.COMPILED_MIN_OPS, 0
    heft_kernel.heft_run = counted
    try:
        p = HEFTPlacer(insertion).place(g, cl)
    finally:
        heft_mod.COMPILED_MIN_OPS = old
        heft_kernel.heft_run = run
    assert calls == [1], "the compiled loop did not run"
    return p


def _python(g: OpGraph, cl: Cluster, insertion: bool = True) -> Placement:
    old, heft_mod.COMPILED_MIN_OPS = heft_mod.COMPILED_MIN_OPS, None
    try:
        return HEFTPlacer(insertion).place(g, cl)
    finally:
        heft_mod.COMPILED_MIN_OPS = old


def _same(g: OpGraph, cl: Cluster, insertion: bool = True, reference: bool = True) -> str:
    a = _outcome(lambda g, cl: _python(g, cl, insertion), g, cl)
    b = _outcome(lambda g, cl: _compiled(g, cl, insertion), g, cl)
    assert a == b
    if reference:
        assert _outcome(ReferenceHEFT(insertion).place, g, cl) == a
    return a[0]


def _ranks_equal(g: OpGraph, cl: Cluster) -> None:
    rank, _, _, _ = upward_rank(g, cl)
    assert heft_kernel.upward_rank_arrays(g.index(), cl).tolist() == rank


@pytest.mark.parametrize("block", [1, 2, 512])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    g=random_dags(1, 40, device_types=True),
    cl=random_clusters(1, 5, hetero=True, memory=1e9),
    insertion=st.booleans(),
)
def test_compiled_heft_equals_python(block, g: OpGraph, cl: Cluster, insertion):
    """Ample memory, device types, heterogeneous speeds and links: the same placement and order."""
    _ranks_equal(g, cl)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(heft_mod, "SLOT_BLOCK", block)
        _same(g, cl, insertion)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(g=random_dags(1, 30, training=True), cl=random_clusters(1, 4, hetero=True))
def test_compiled_heft_equals_python_with_memory_limits(g: OpGraph, cl: Cluster):
    """Tight random memories (1,000-100,000 bytes per device): the same infeasibility error (unit, remaining
    memory) or the same placement."""
    _same(g, cl)


@st.composite
def _tied_graphs(draw):
    """Integer costs and sizes (many equal ranks, finish times and gaps) with colocation groups."""
    n = draw(st.integers(2, 40))
    g = OpGraph("ties")
    for i in range(n):
        grp = f"g{draw(st.integers(0, 3))}" if draw(st.integers(0, 4)) == 0 else None
        g.add_op(f"op{i}", compute_s=float(draw(st.sampled_from([0, 1, 2, 3]))), output_bytes=100, colocation=grp)
    for i in range(n):
        for j in range(i + 1, min(n, i + 6)):
            if draw(st.booleans()):
                g.add_edge(f"op{i}", f"op{j}", bytes=float(draw(st.sampled_from([0, 100, 200]))))
    g.invalidate()
    return g


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    g=_tied_graphs(), nd=st.integers(1, 4), block=st.integers(1, 3), mode=st.sampled_from(["parallel", "sequential"])
)
def test_compiled_heft_equals_python_with_ties(g: OpGraph, nd: int, block: int, mode: str):
    devs = [Device(f"d{i}", "GPU", 1e12, 1.0) for i in range(nd)]
    links = {("d0", "d1"): Link(0.0, 50.0)} if nd > 1 else {}
    cl = Cluster(devs, 1.0, 100.0, mode, links, "ties")
    _ranks_equal(g, cl)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(heft_mod, "SLOT_BLOCK", block)
        _same(g, cl)


def test_compiled_heft_per_type_costs():
    """Ops with per-type costs (`compute_s_by_type`) on a CPU/GPU cluster: the ranks average them over the
    devices, the execution times read the device's type."""
    g = level_dag(levels=60, min_nodes_per_level=2, max_nodes_per_level=6, edge_probability=0.2, training=True, seed=3)
    for k, name in enumerate(g.ops):
        if k % 3 == 0:
            a = g.op(name)
            a["compute_s_by_type"] = {"CPU": 4.0 * a["compute_s"], "GPU": 0.5 * a["compute_s"] + 1e-4}
    g.invalidate()
    devs = [Device("c0", "CPU", 1e15, 1.0), Device("g0", "GPU", 1e15, 3.0), Device("g1", "GPU", 1e15, 2.5)]
    cl = Cluster(devs, 1e-4, 5e9, "parallel", {}, "mixed")
    _ranks_equal(g, cl)
    assert _same(g, cl) == "placement"


@pytest.mark.parametrize("block", [1, 4, 512])
def test_compiled_heft_on_a_training_graph(block, monkeypatch):
    """A 2,000-op level graph (colocation, backward ops) on four devices: many insertions into gaps; tiny
    blocks make the timelines split and the gap searches cross blocks."""
    g = level_dag(
        levels=200,
        min_nodes_per_level=4,
        max_nodes_per_level=12,
        edge_probability=0.1,
        colocated_fraction=0.15,
        training=True,
        seed=5,
    )
    cl = uniform_cluster(4, memory_bytes=1e15, latency_s=134e-6, bytes_per_s=5.7e9)
    monkeypatch.setattr(heft_mod, "SLOT_BLOCK", block)
    _ranks_equal(g, cl)
    assert _same(g, cl, reference=block == 512) == "placement"
    assert _same(g, cl, insertion=False, reference=False) == "placement"


def test_compiled_heft_on_the_benchmark_graph():
    """The benchmark's random graph (bench_scale, 10K ops, ample memory): the same placement and order, and the
    compiled loop is the default at this size."""
    g = make_graph("random", 10000)  # the benchmark's random graph
    cl = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
    assert heft_mod.COMPILED_MIN_OPS is not None and len(g) >= heft_mod.COMPILED_MIN_OPS
    p = HEFTPlacer().place(g, cl)
    q = _python(g, cl)
    assert (p.assignment, p.order, p.info) == (q.assignment, q.order, q.info)
    # memory for about half the graph per device: some units find their best device full
    tight = uniform_cluster(4, 0.55 * g.total_memory(), latency_s=1.34e-4, bytes_per_s=5.7e9)
    assert _outcome(HEFTPlacer().place, g, tight) == _outcome(_python, g, tight)


def test_compiled_heft_honours_a_replaced_rank(monkeypatch):
    """A rank definition put in `heft.upward_rank`'s place (benchmarks/compare_saga.py runs HEFT with saga's
    ranks) drives the compiled loop too."""
    g = level_dag(levels=80, min_nodes_per_level=2, max_nodes_per_level=6, edge_probability=0.2, training=True, seed=4)
    cl = uniform_cluster(3, memory_bytes=1e15, latency_s=1e-4, bytes_per_s=1e9)

    def computation_only(graph, cluster):
        idx = graph.index()
        rank = [0.0] * idx.n
        for i in range(idx.n - 1, -1, -1):
            rank[i] = idx.compute_s[i] + max((rank[j] for j, _ in idx.succ[i]), default=0.0)
        return rank, None, 0.0, float("inf")

    monkeypatch.setattr(heft_mod, "upward_rank", computation_only)
    assert _outcome(_python, g, cl) == _outcome(_compiled, g, cl)
