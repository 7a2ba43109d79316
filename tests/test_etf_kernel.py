"""Issue 22: m-ETF's compiled list scheduling (`algorithms.placers.baechi.etf_kernel`) gives exactly the
placement of the Python classes (`PairQueue` with `ExecModel`): the same devices, orders, predicted makespan,
peaks and queue counts, or the same error, on random graphs with colocation groups, device types, tight memory,
banned (group, device) pairs and every group reservation."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.cluster import Cluster, Device, uniform_cluster
from algorithms.errors import LabError
from algorithms.memory import single_device_need
from algorithms.placers.baechi import METFPlacer, m_etf
from algorithms.placers.baechi.exec_model import ExecModel
from algorithms.placers.baechi.pair_queue import PairQueue
from algorithms.workloads.synthetic import level_dag
from tests.scale_fixture import CASES
from tests.strategies import random_dags

etf_kernel = pytest.importorskip("algorithms.placers.baechi.etf_kernel")  # needs numba


def _python(graph, cluster, banned, **kw):
    try:
        model = ExecModel(graph, cluster, **kw)
        q = PairQueue(model, banned=set(banned))
        q.run()
    except LabError as exc:
        return f"{type(exc).__name__}: {exc}"
    return _state(model, (q.n_dropped, q.n_parked, q.n_reestimated))


def _compiled(graph, cluster, banned, **kw):
    try:
        model = ExecModel(graph, cluster, **kw)
        counts = etf_kernel.run(model, set(banned))
    except LabError as exc:
        return f"{type(exc).__name__}: {exc}"
    return _state(model, counts)


def _state(model, counts):
    pl = model.placement({})
    return (
        list(model.dev),
        list(model.start),
        list(model.end),
        [list(o) for o in model.order],
        pl.info,
        tuple(counts),
        sorted(model.planned_transfers().items()),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    g=random_dags(max_ops=40, device_types=True, training=True),
    n_dev=st.integers(1, 4),
    frac=st.sampled_from([0.25, 0.4, 0.6, 1.0, math.inf]),
    reserve=st.sampled_from(["persistent", "transient", "full"]),
    aware=st.booleans(),
    latency=st.sampled_from([0.0, 1e-3]),
    ban=st.lists(st.integers(0, 40), max_size=4),
    thirds=st.booleans(),
)
def test_compiled_equals_python(g, n_dev, frac, reserve, aware, latency, ban, thirds):
    if thirds:  # fractional byte counts: the kernel's slice adds instead of its exact mode
        for o in g.ops:
            a = g.op(o)
            for k in ("persistent_bytes", "temporary_bytes", "output_bytes"):
                a[k] = a[k] / 3
        for _, _, d in g.nx.edges(data=True):
            d["bytes"] = d.get("bytes", 0) / 3
        g.invalidate()
    need = single_device_need(g)
    types = ["GPU", "CPU", "GPU", "GPU"]
    devs = [Device(f"d{k}", memory_bytes=need * frac if need else frac, type=types[k]) for k in range(n_dev)]
    cl = Cluster(devs, latency_s=latency, bytes_per_s=1e3)
    kw = dict(memory_aware=aware, group_reserve=reserve)
    banned = {b % (n_dev * 10) for b in ban}  # (group, device) pairs of the first 10 groups
    got = _compiled(g, cl, banned, **kw)
    assert got == _python(g, cl, banned, **kw)


@pytest.mark.parametrize("case", [c for c in CASES if c[2] == "parallel"], ids=lambda c: c[0])
def test_placer_compiled_equals_python_on_fixture(case, monkeypatch):
    """The placer (with its colocation retries and one-device fallback) on the graphs of
    `test_scale_identical`, compiled and not."""
    _, gen, mode, frac = case
    g = level_dag(**gen)
    cl = uniform_cluster(4, single_device_need(g) * frac, type="GPU", latency_s=1e-4, bytes_per_s=1e9, mode=mode)
    out = []
    for threshold in (None, 0):
        monkeypatch.setattr(m_etf, "COMPILED_MIN_OPS", threshold)
        pl = METFPlacer().place(g, cl)
        assert pl.info["compiled"] is (threshold == 0)
        info = {k: v for k, v in pl.info.items() if k not in ("algorithm_time_s", "compiled")}
        out.append((pl.assignment, pl.order, info))
    assert out[0] == out[1]


def test_compiled_tables_grow():
    """A run whose heaps or pending frees outgrow their first size is run again with more room, same result."""
    g = level_dag(levels=30, min_nodes_per_level=2, max_nodes_per_level=8, training=True, seed=2)
    cl = uniform_cluster(3, single_device_need(g) * 0.5, latency_s=1e-4, bytes_per_s=1e9)
    want = _python(g, cl, set())
    try:
        etf_kernel.FIRST_ROOM = 1
        assert _compiled(g, cl, set()) == want
    finally:
        etf_kernel.FIRST_ROOM = None


def test_compiled_refuses_sequential():
    g = level_dag(levels=3, seed=1)
    model = ExecModel(g, uniform_cluster(2, 1e12, mode="sequential"))
    with pytest.raises(ValueError):
        etf_kernel.run(model, set())
