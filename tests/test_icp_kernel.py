"""ICP's compiled loop (`icp_kernel`, issue 22) against the Python code it ports.

Three implementations must agree on every graph: `icp._place_python` (the Python loop, the code path below
`icp.COMPILED_MIN_OPS` ops), the compiled loop (forced here with ``COMPILED_MIN_OPS = 0``), and
`ReferenceICP` of `tests/test_icp_identical.py` (the version of commit 19d8e23, which recomputed every
successor).  Same assignment, same info (paths, devices used), same simulated makespan, or the same error with
the same message.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings

from algorithms.cluster import Cluster, uniform_cluster
from algorithms.errors import LabError
from algorithms.graph import OpGraph
from algorithms.placement import Placement
from algorithms.placers.thesis import IteratedCriticalPathPlacer, icp
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag
from tests.strategies import random_clusters, random_dags
from tests.test_icp_identical import ReferenceICP

icp_kernel = pytest.importorskip("algorithms.placers.thesis.icp_kernel")


def _outcome(fn, g: OpGraph, cl: Cluster) -> tuple[str, object]:
    try:
        p: Placement = fn(g, cl)
    except (LabError, AssertionError) as e:
        return "error", (type(e), str(e))
    sim = simulate(g, cl, p.assignment)
    return "placement", (p.assignment, p.order, p.info, sim.makespan)


def _compiled(g: OpGraph, cl: Cluster) -> Placement:
    """The placer with the compiled loop whatever the graph's size (an error may come before the loop)."""
    calls = []
    run = icp_kernel.run

    def counted(*args):
        calls.append(1)
        return run(*args)

    old, icp.COMPILED_MIN_OPS = icp.COMPILED_MIN_OPS, 0
    icp_kernel.run = counted
    try:
        p = IteratedCriticalPathPlacer().place(g, cl)
    finally:
        icp.COMPILED_MIN_OPS = old
        icp_kernel.run = run
    assert calls == [1], "the compiled loop did not run"
    return p


def _same(g: OpGraph, cl: Cluster, reference: bool = True) -> str:
    want = _outcome(icp._place_python, g, cl)
    assert _outcome(_compiled, g, cl) == want
    if reference:
        assert _outcome(ReferenceICP().place, g, cl) == want
    return want[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(g=random_dags(1, 30, device_types=True), cl=random_clusters(1, 4, hetero=True))
def test_compiled_icp_matches_python_on_random_graphs(g: OpGraph, cl: Cluster):
    """Device types, colocation groups, heterogeneous speeds, memory from tight (splits, infeasible) to ample."""
    _same(g, cl)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(g=random_dags(1, 20, training=True), cl=random_clusters(1, 4, hetero=True, memory=1e9))
def test_compiled_icp_matches_python_on_training_graphs(g: OpGraph, cl: Cluster):
    _same(g, cl)


def test_compiled_icp_matches_python_on_fuzz_cases():
    """`benchmarks/fuzz_placers.py`'s cases (seed 0): level graphs and random graphs at 35-100% of the
    single-device need, so subpaths get split and some units fit nowhere."""
    from benchmarks.fuzz_placers import case

    rng = random.Random(0)
    kinds = [_same(*case(rng, k)[:2]) for k in range(80)]
    assert "placement" in kinds and "error" in kinds  # both outcomes were compared


def test_compiled_icp_matches_python_on_a_level_graph():
    """A 2,000-op level graph with integer costs (many equal ranks, so the tie rules matter), through the
    placer's own threshold: it runs compiled."""
    g = level_dag(
        levels=200,
        min_nodes_per_level=4,
        max_nodes_per_level=12,
        edge_probability=0.1,
        ops_range=(1, 3),
        colocated_fraction=0.15,
        training=True,
        seed=11,
    )
    assert g.index().n >= icp.COMPILED_MIN_OPS
    cl = uniform_cluster(4, memory_bytes=1e15)
    _same(g, cl)
    assert _outcome(IteratedCriticalPathPlacer().place, g, cl) == _outcome(icp._place_python, g, cl)


def test_compiled_icp_matches_python_on_the_benchmark_graph():
    """`bench_scale`'s random training graph (about 10,000 ops) on its cluster."""
    from benchmarks.bench_scale import make_graph

    g = make_graph("random", 10_000)
    cl = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
    p = IteratedCriticalPathPlacer().place(g, cl)
    q = icp._place_python(g, cl)
    assert p.assignment == q.assignment and p.info == q.info and p.order == q.order
    assert math.isclose(p.info["paths"], q.info["paths"])
    assert simulate(g, cl, p.assignment).makespan == simulate(g, cl, q.assignment).makespan


def test_sinks_heap_grows(monkeypatch):
    """A sinks' heap that starts with room for one entry grows and gives the same placement."""
    monkeypatch.setattr(icp_kernel, "FIRST_ROOM", 1)
    g = level_dag(levels=60, min_nodes_per_level=2, max_nodes_per_level=8, colocated_fraction=0.2, training=True)
    _same(g, uniform_cluster(3, memory_bytes=1e15), reference=False)
    _same(g, uniform_cluster(3, memory_bytes=0.4 * g.total_memory()), reference=False)


def test_small_graphs_run_in_python(monkeypatch):
    """Below `COMPILED_MIN_OPS` (or with it None) the compiled loop is not used."""

    def boom(*args):
        raise AssertionError("compiled loop used")

    monkeypatch.setattr(icp_kernel, "run", boom)
    g = level_dag(levels=10, min_nodes_per_level=2, max_nodes_per_level=4, training=True, seed=1)
    cl = uniform_cluster(2, memory_bytes=1e15)
    IteratedCriticalPathPlacer().place(g, cl)
    monkeypatch.setattr(icp, "COMPILED_MIN_OPS", None)
    g = level_dag(levels=200, min_nodes_per_level=4, max_nodes_per_level=12, training=True, seed=1)
    IteratedCriticalPathPlacer().place(g, cl)


def test_recompute_set_pops_in_increasing_order():
    """The three-level bitset of the ops to recompute, over 2,000,000 positions (all three levels and the
    top-level cursor in use): pushes only after the last pop, as the kernel makes them, pop in sorted order."""
    import numpy as np

    n = 2_000_000
    w0 = (n + 63) >> 6
    w1 = (w0 + 63) >> 6
    b0, b1, b2 = np.zeros(w0, np.uint64), np.zeros(w1, np.uint64), np.zeros((w1 + 63) >> 6, np.uint64)
    rng = random.Random(5)
    for _ in range(3):
        want = set(rng.sample(range(n), 300)) | {0, 63, 64, 4095, 4096, 262143, 262144, n - 1}
        for i in want:
            icp_kernel._set_add(b0, b1, b2, i)
            assert icp_kernel._set_has(b0, i)
        got, k2 = [], 0
        while len(got) < len(want):
            x = icp_kernel._set_pop_min(b0, b1, b2, k2)
            assert not icp_kernel._set_has(b0, x)
            k2 = x >> 18
            got.append(x)
            if rng.random() < 0.3 and x + 1 < n:  # a successor pushed during the recomputations
                y = rng.randrange(x + 1, n)
                if y not in want:
                    want.add(y)
                    icp_kernel._set_add(b0, b1, b2, y)
        assert got == sorted(want)
        assert not b0.any() and not b1.any() and not b2.any()
