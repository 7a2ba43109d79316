"""MITE's and DFS's compiled loops (`mite_kernel`, issue 22) against the Python code they port.

`MITEPlacer._place_python` / `DFSPlacer._place_python` (the Python loops, the code path below
`mite.COMPILED_MIN_OPS` ops) and the compiled loops (forced here with ``COMPILED_MIN_OPS = 0``) must give the
same placement on every graph: the same device for every op, the same info, or the same error with the same
message (which reports the devices' remaining memory at that moment).
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.cluster import Cluster, uniform_cluster
from algorithms.errors import LabError
from algorithms.graph import OpGraph
from algorithms.memory import single_device_need
from algorithms.placers.thesis import DFSPlacer, MITEPlacer, mite
from algorithms.placers.thesis.common import operations_rank
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag
from tests.strategies import random_clusters, random_dags

mite_kernel = pytest.importorskip("algorithms.placers.thesis.mite_kernel")

PLACERS = {"mite": MITEPlacer, "dfs": DFSPlacer}


def _outcome(placer, g: OpGraph, cl: Cluster, compiled: bool) -> tuple[str, object]:
    calls = []
    run = mite_kernel.place

    def counted(*args):
        calls.append(1)
        return run(*args)

    old, mite.COMPILED_MIN_OPS = mite.COMPILED_MIN_OPS, (0 if compiled else None)
    mite_kernel.place = counted
    try:
        p = placer.place(g, cl)
    except (LabError, AssertionError) as e:
        return "error", (type(e), str(e))
    finally:
        mite.COMPILED_MIN_OPS = old
        mite_kernel.place = run
    assert calls == ([1] if compiled else [])
    return "placement", (p.assignment, list(p.assignment), p.order, p.info)


def _same(g: OpGraph, cl: Cluster, zero_traffic: float = mite.ZERO_TRAFFIC) -> str:
    kinds = set()
    for cls in PLACERS.values():
        placer = cls(zero_traffic)
        want = _outcome(placer, g, cl, compiled=False)
        assert _outcome(placer, g, cl, compiled=True) == want
        kinds.add(want[0])
    return "error" if "error" in kinds else "placement"


def _per_type_costs(g: OpGraph, seed: int) -> OpGraph:
    """Some ops given their own time on CPUs or GPUs (`compute_s_by_type`)."""
    rng = random.Random(seed)
    for name in g.ops:
        if rng.random() < 0.4:
            g.op(name)["compute_s_by_type"] = {rng.choice(["CPU", "GPU"]): rng.uniform(0, 2)}
    g.invalidate()
    return g


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    g=random_dags(1, 30, device_types=True),
    cl=random_clusters(1, 4, hetero=True),
    seed=st.integers(0, 3),
    zero=st.sampled_from([mite.ZERO_TRAFFIC, 0.01, 1.0]),
)
def test_compiled_mite_dfs_match_python_on_random_graphs(g: OpGraph, cl: Cluster, seed: int, zero: float):
    """Device types, colocation groups, heterogeneous speeds and links, per-type costs, memory from tight
    (infeasible units) to ample."""
    if seed:
        _per_type_costs(g, seed)
    _same(g, cl, zero)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(g=random_dags(1, 20, training=True), cl=random_clusters(1, 4, hetero=True, memory=1e9))
def test_compiled_mite_dfs_match_python_on_training_graphs(g: OpGraph, cl: Cluster):
    _same(g, cl)


def test_compiled_mite_dfs_match_python_on_fuzz_cases():
    """`benchmarks/fuzz_placers.py`'s cases (seed 0) at 35-100% of the single-device need."""
    from benchmarks.fuzz_placers import case

    rng = random.Random(0)
    kinds = [_same(*case(rng, k)[:2]) for k in range(80)]
    assert "placement" in kinds and "error" in kinds


@pytest.mark.parametrize("frac", [0.5, 1.2, 4.0, math.inf])
def test_compiled_mite_dfs_match_python_on_level_graphs(frac: float):
    """A 2,500-op training level graph with integer costs (many equal ranks: the tie rules matter) through the
    placers' own threshold, memory from tight to unlimited, two device types at two speeds."""
    from algorithms.cluster import Device

    g = level_dag(
        levels=80,
        min_nodes_per_level=4,
        max_nodes_per_level=12,
        edge_probability=0.15,
        random_edges=40,
        ops_range=(1, 3),
        colocated_fraction=0.15,
        max_group_size=6,
        training=True,
        seed=5,
    )
    assert g.index().n >= mite.COMPILED_MIN_OPS
    mem = single_device_need(g) * frac
    devs = [Device("g0", "GPU", mem, 2.0), Device("g1", "GPU", mem, 1.0), Device("c0", "CPU", mem, 0.5)]
    cl = Cluster(devs, 1e-4, 1e9, "parallel", {}, "mixed")
    _same(g, cl)
    _same(_per_type_costs(g, 1), cl)


def test_compiled_mite_dfs_match_python_on_the_benchmark_graph():
    """`bench_scale`'s random training graph (about 10,000 ops) on its cluster, through the placers' own
    threshold, and the simulated makespans."""
    from benchmarks.bench_scale import make_graph

    g = make_graph("random", 10_000)
    cl = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
    for cls in PLACERS.values():
        p = cls().place(g, cl)
        q = cls()._place_python(g, cl)
        assert p.assignment == q.assignment and p.info == q.info and p.order == q.order
        assert simulate(g, cl, p.assignment).makespan == simulate(g, cl, q.assignment).makespan


@pytest.mark.torch
@pytest.mark.parametrize("model", ["inception_v3_tiny", "gnmt_tiny"])
@pytest.mark.parametrize("frac", [0.5, 2.0])
def test_compiled_mite_dfs_match_python_on_captured_training_graphs(model: str, frac: float):
    """Operator-level training graphs captured from PyTorch on four devices, memory tight and ample."""
    pytest.importorskip("torch")
    from backends.torch import TorchBackend
    from backends.torch.config import load_model_cfg

    backend = TorchBackend(device="cpu")
    g = backend.capture(backend.build(load_model_cfg(model, {})))
    cl = uniform_cluster(4, single_device_need(g) * frac, type="GPU", latency_s=1e-4, bytes_per_s=1e9)
    _same(g, cl)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(g=random_dags(1, 40, training=True))
def test_operations_rank_matches_python(g: OpGraph):
    import numpy as np

    from algorithms.sim_kernel import index_arrays

    idx = g.index()
    a = index_arrays(idx)
    got = mite_kernel.operations_rank(
        a["pred_ptr"], a["pred_j"], a["succ_ptr"], a["succ_k"], np.asarray(idx.compute_s, np.float64)
    )
    assert got.tolist() == operations_rank(idx)


def test_small_graphs_run_in_python(monkeypatch):
    """Below `COMPILED_MIN_OPS` (or with it None) the compiled loops are not used."""

    def boom(*args):
        raise AssertionError("compiled loop used")

    monkeypatch.setattr(mite_kernel, "place", boom)
    g = level_dag(levels=10, min_nodes_per_level=2, max_nodes_per_level=4, training=True, seed=1)
    cl = uniform_cluster(2, memory_bytes=1e15)
    for cls in PLACERS.values():
        cls().place(g, cl)
    monkeypatch.setattr(mite, "COMPILED_MIN_OPS", None)
    g = level_dag(levels=200, min_nodes_per_level=4, max_nodes_per_level=12, training=True, seed=1)
    for cls in PLACERS.values():
        cls().place(g, cl)
