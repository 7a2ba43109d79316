"""m-TOPO's compiled fill (`topo_kernel`, issue 22) against the Python code it ports.

`MTOPOPlacer._fill` (the Python loop, the code path below `m_topo.COMPILED_MIN_OPS` ops) and the compiled fill
(forced here with ``COMPILED_MIN_OPS = 0``) must give the same placement on every graph: the same device for
every op, the same per-device order, the same info (caps, static bytes, predicted peaks, rounds, overflows),
or the same error with the same message.  Single fills are compared too, with random caps (tight caps make
ops fit nowhere and groups overflow).
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
from algorithms.placers.baechi import MTOPOPlacer, m_topo
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag
from tests.strategies import random_clusters, random_dags

topo_kernel = pytest.importorskip("algorithms.placers.baechi.topo_kernel")


def _outcome(g: OpGraph, cl: Cluster, compiled: bool) -> tuple[str, object]:
    old, m_topo.COMPILED_MIN_OPS = m_topo.COMPILED_MIN_OPS, (0 if compiled else None)
    try:
        p = MTOPOPlacer().place(g, cl)
    except (LabError, AssertionError) as e:
        return "error", (type(e), str(e))
    finally:
        m_topo.COMPILED_MIN_OPS = old
    info = dict(p.info)
    info.pop("algorithm_time_s")
    return "placement", (p.assignment, p.order, info)


def _same(g: OpGraph, cl: Cluster) -> str:
    want = _outcome(g, cl, compiled=False)
    got = _outcome(g, cl, compiled=True)
    assert got == want
    if want[0] == "placement":  # same order of the dicts' keys too
        assert [list(x) for x in got[1][:2]] == [list(x) for x in want[1][:2]]  # type: ignore[index]
    return want[0]


def _fill_both(g: OpGraph, cl: Cluster, caps: list[float]) -> None:
    """One fill with the given caps, in Python and compiled: the same result or the same error."""
    idx = g.index()
    cap_all = 12345.0
    try:
        want: object = MTOPOPlacer._fill(idx, cl.devices, list(caps), cap_all)
    except LabError as e:
        want = (type(e), str(e))
    arrays = m_topo._fill_arrays(topo_kernel, idx, cl.devices)
    try:
        got: object = m_topo._fill_compiled(topo_kernel, arrays, idx, cl.devices, list(caps), cap_all)
    except LabError as e:
        got = (type(e), str(e))
    assert got == want


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(g=random_dags(1, 30, device_types=True), cl=random_clusters(1, 4, hetero=True))
def test_compiled_m_topo_matches_python_on_random_graphs(g: OpGraph, cl: Cluster):
    """Device types, colocation groups, heterogeneous devices, both communication modes, memory from tight
    (rounds, infeasible) to ample."""
    _same(g, cl)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    g=random_dags(1, 20, training=True),
    cl=random_clusters(1, 4, hetero=True, memory=1e9),
)
def test_compiled_m_topo_matches_python_on_training_graphs(g: OpGraph, cl: Cluster):
    _same(g, cl)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    g=random_dags(1, 40, device_types=True, training=False),
    cl=random_clusters(1, 5, hetero=True),
    data=st.data(),
)
def test_compiled_fill_matches_python_with_random_caps(g: OpGraph, cl: Cluster, data):
    """Single passes with caps from nothing to the devices' memory (and beyond: the last device's limit)."""
    caps = [data.draw(st.floats(0, 2 * d.memory_bytes)) for d in cl.devices]
    _fill_both(g, cl, caps)


def test_compiled_m_topo_matches_python_on_fuzz_cases():
    """`benchmarks/fuzz_placers.py`'s cases (seed 0): level graphs and random graphs at 35-100% of the
    single-device need, so rounds repeat and some placements fail."""
    from benchmarks.fuzz_placers import case

    rng = random.Random(0)
    kinds = [_same(*case(rng, k)[:2]) for k in range(80)]
    assert "placement" in kinds and "error" in kinds  # both outcomes were compared


@pytest.mark.parametrize("frac", [0.3, 0.45, 0.8, 2.0, math.inf])
@pytest.mark.parametrize("mode", ["parallel", "sequential"])
def test_compiled_m_topo_matches_python_on_level_graphs(frac: float, mode: str):
    """A 2,500-op training level graph (past the block size of the step history many times over, through the
    placer's own threshold) with memory from tight to unlimited."""
    g = level_dag(
        levels=80,
        min_nodes_per_level=4,
        max_nodes_per_level=12,
        edge_probability=0.15,
        random_edges=40,
        colocated_fraction=0.15,
        max_group_size=6,
        training=True,
        seed=3,
    )
    assert g.index().n >= m_topo.COMPILED_MIN_OPS
    cl = uniform_cluster(4, single_device_need(g) * frac, type="GPU", latency_s=1e-4, bytes_per_s=1e9, mode=mode)
    _same(g, cl)


def test_compiled_m_topo_matches_python_on_the_benchmark_graph():
    """`bench_scale`'s random training graph (about 10,000 ops) on its cluster, through the placer's own
    threshold, and the simulated makespan of both."""
    from benchmarks.bench_scale import make_graph

    g = make_graph("random", 10_000)
    cl = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
    p = MTOPOPlacer().place(g, cl)
    assert _outcome(g, cl, compiled=False)[1][:2] == (p.assignment, p.order)  # type: ignore[index]
    old, m_topo.COMPILED_MIN_OPS = m_topo.COMPILED_MIN_OPS, None
    try:
        q = MTOPOPlacer().place(g, cl)
    finally:
        m_topo.COMPILED_MIN_OPS = old
    assert simulate(g, cl, p.assignment, p.order).makespan == simulate(g, cl, q.assignment, q.order).makespan


@pytest.mark.torch
@pytest.mark.parametrize("model", ["inception_v3_tiny", "gnmt_tiny"])
@pytest.mark.parametrize("frac", [0.4, 1.0])
def test_compiled_m_topo_matches_python_on_captured_training_graphs(model: str, frac: float):
    """Operator-level training graphs captured from PyTorch (colocation groups of forward, backward and update
    ops) on four devices, memory tight and ample."""
    pytest.importorskip("torch")
    from backends.torch import TorchBackend
    from backends.torch.config import load_model_cfg

    backend = TorchBackend(device="cpu")
    g = backend.capture(backend.build(load_model_cfg(model, {})))
    cl = uniform_cluster(4, single_device_need(g) * frac, type="GPU", latency_s=1e-4, bytes_per_s=1e9)
    _same(g, cl)


def test_small_graphs_fill_in_python(monkeypatch):
    """Below `COMPILED_MIN_OPS` (or with it None) the compiled fill is not used."""

    def boom(*args):
        raise AssertionError("compiled fill used")

    monkeypatch.setattr(topo_kernel, "fill", boom)
    g = level_dag(levels=10, min_nodes_per_level=2, max_nodes_per_level=4, training=True, seed=1)
    cl = uniform_cluster(2, memory_bytes=1e15)
    MTOPOPlacer().place(g, cl)
    monkeypatch.setattr(m_topo, "COMPILED_MIN_OPS", None)
    g = level_dag(levels=200, min_nodes_per_level=4, max_nodes_per_level=12, training=True, seed=1)
    MTOPOPlacer().place(g, cl)


def test_single_device_peak_matches_single_device_need():
    from algorithms.sim_kernel import index_arrays

    for seed in range(5):
        g = level_dag(levels=30, min_nodes_per_level=1, max_nodes_per_level=6, training=True, seed=seed)
        idx = g.index()
        a = m_topo._fill_arrays(topo_kernel, idx, uniform_cluster(2, memory_bytes=1.0).devices)
        assert sum(idx.persistent) + float(a["peak"]) == single_device_need(g)
        assert index_arrays(idx)["pred_ptr"][-1] >= a["src_ptr"][-1]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["levels_parallel", "levels_tight", "levels_sequential", "chain"])
def test_compiled_loops_match_the_recorded_reference(name, monkeypatch):
    """`tests/test_scale_identical.py`'s fixed graphs (recorded before issue 22's speed work) with m-TOPO, MITE
    and DFS forced through their compiled loops: the recorded placements, makespans and peaks."""
    import json

    from algorithms.placers.thesis import mite
    from tests import scale_fixture
    from tests.test_scale_identical import REFERENCE

    monkeypatch.setattr(m_topo, "COMPILED_MIN_OPS", 0)
    monkeypatch.setattr(mite, "COMPILED_MIN_OPS", 0)
    monkeypatch.setattr(scale_fixture, "PLACERS", {k: scale_fixture.PLACERS[k] for k in ("m_topo", "mite", "dfs")})
    case = next(c for c in scale_fixture.CASES if c[0] == name)
    got = json.loads(json.dumps(scale_fixture.case_results(case)))
    for key in ("m_topo", "mite", "dfs"):
        assert got[key] == REFERENCE[name][key], key
