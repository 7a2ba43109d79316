"""The windowed SCT LP (`sct_lp_windowed`, issue 22) and m-SCT's choice of LP formulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.cluster import uniform_cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph
from algorithms.placement import check_placement
from algorithms.placers.baechi import MSCTPlacer, favorite_children
from algorithms.placers.baechi import sct_lp as sct_lp_mod
from algorithms.placers.baechi.sct_lp import sct_lp, sct_lp_windowed
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag

from .strategies import random_clusters, random_dags


def _mean_costs(graph, cluster):
    idx = graph.index()
    devs = cluster.devices
    p = [idx.compute_s[i] * sum(1.0 / d.speed for d in devs) / len(devs) for i in range(idx.n)]
    pairs = [(a, b) for a in range(len(devs)) for b in range(len(devs)) if a != b]
    mlat = sum(cluster.latency_table[a][b] for a, b in pairs) / len(pairs)
    mibw = sum(1.0 / cluster.bandwidth_table[a][b] for a, b in pairs) / len(pairs)
    edges = [(i, j, mlat + b * mibw) for i in range(idx.n) for j, b in idx.succ[i]]
    return idx, p, edges


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_dags(min_ops=2, max_ops=30, colocation=False, training=True), random_clusters(min_devices=2))
def test_one_window_is_the_whole_lp(graph, cluster):
    """A window holding every op has no ghosts and no tails: its LP is `sct_lp`'s, row for row."""
    x_full, f_full = sct_lp(graph, cluster)
    x_win, f_win = sct_lp_windowed(graph, cluster, window=len(graph))
    assert f_win["lp_windows"] == 1 and f_win["lp_ghost_ops"] == 0
    np.testing.assert_allclose(x_win, x_full, rtol=0, atol=1e-12)
    if "lp_makespan_s" in f_full:
        assert f_win["lp_makespan_s"] <= f_full["lp_makespan_s"] * (1 + 1e-5) + 1e-9


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    random_dags(min_ops=2, max_ops=30, colocation=False, training=True),
    random_clusters(min_devices=2),
    st.integers(1, 7),
)
def test_windows_decide_every_edge_once(graph, cluster, window):
    """Small windows: every x lies in [0, 1], every op's in-degree row (complete in its window) holds, and
    the reported makespan is that of the left-justified schedule under x."""
    x, facts = sct_lp_windowed(graph, cluster, window=window)
    idx, p, edges = _mean_costs(graph, cluster)
    assert x.shape == (len(edges),)
    assert facts["lp_windows"] == math.ceil(idx.n / window)
    assert facts["lp_status"] == 0
    assert np.all((x >= 0) & (x <= 1))
    in_sum = [0.0] * idx.n
    start = [0.0] * idx.n
    for (i, j, c), xe in zip(edges, x):  # edges in topological order of their source
        in_sum[j] += xe
        start[j] = max(start[j], start[i] + p[i] + c * xe)
    for v in range(idx.n):
        assert in_sum[v] >= len(idx.pred[v]) - 1 - 1e-6
    span = max(start[i] + p[i] for i in range(idx.n))
    assert facts["lp_makespan_s"] == pytest.approx(span, rel=1e-9, abs=1e-12)
    fav = favorite_children(graph, x)
    assert len(fav) == idx.n


def test_chain_windows_keep_every_favourite():
    """On a chain every edge is on the critical path: the whole LP and one-op windows both make every op
    its parent's favourite child."""
    g = OpGraph("chain")
    for i in range(6):
        g.add_op(f"o{i}", compute_s=1.0)
    for i in range(5):
        g.add_edge(f"o{i}", f"o{i + 1}", bytes=1e6)
    cl = uniform_cluster(2, latency_s=1e-3, bytes_per_s=1e9)
    want = [-1, 0, 1, 2, 3, 4]
    assert favorite_children(g, sct_lp(g, cl)[0]) == want
    for window in (1, 2, 4):
        x, facts = sct_lp_windowed(g, cl, window=window)
        assert favorite_children(g, x) == want, window
        assert facts["lp_makespan_s"] == pytest.approx(6.0)  # every transfer saved


def test_m_sct_formulation_choice():
    g = level_dag(levels=12, seed=1, training=True)
    cl = uniform_cluster(3, latency_s=1e-4, bytes_per_s=1e9)
    auto = MSCTPlacer().place(g, cl)
    assert auto.info["lp_formulation"] == "full"  # small graphs keep the whole LP (and the reference results)
    win = MSCTPlacer(lp_formulation="auto", lp_window=10, lp_window_above=0).place(g, cl)
    assert win.info["lp_formulation"] == "windowed"
    assert win.info["lp_windows"] == math.ceil(len(g) / 10)
    check_placement(g, cl, win)
    assert simulate(g, cl, win, win.order).ok
    forced = MSCTPlacer(lp_formulation="windowed", lp_window=10).place(g, cl)
    assert forced.assignment == win.assignment
    with pytest.raises(ConfigError, match="lp_formulation"):
        MSCTPlacer(lp_formulation="fused")
    with pytest.raises(ConfigError, match="lp_window"):
        MSCTPlacer(lp_window=0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    random_dags(min_ops=2, max_ops=30, colocation=False, training=True),
    random_clusters(min_devices=2),
    st.integers(1, 5),
    st.integers(2, 4),
)
def test_runs_of_windows_on_threads_equal_one_after_the_other(graph, cluster, window, streams):
    """`streams` runs of windows give the same x and facts on threads as one after the other; every edge's x lies
    in [0, 1]; the runs together write every window once; one run is the chain."""
    xs, fs = sct_lp_windowed(graph, cluster, window=window, streams=streams, parallel=False)
    xp, fp = sct_lp_windowed(graph, cluster, window=window, streams=streams, parallel=True)
    assert xs.tobytes() == xp.tobytes()
    fs.pop("lp_time_s"), fp.pop("lp_time_s")
    assert fs == fp
    n_win = math.ceil(len(graph) / window)
    assert fs["lp_windows"] == n_win and fs["lp_streams"] == min(streams, n_win)
    assert ((xs >= 0) & (xs <= 1)).all()
    x1, f1 = sct_lp_windowed(graph, cluster, window=window, streams=1)
    x0, f0 = sct_lp_windowed(graph, cluster, window=window)
    assert x1.tobytes() == x0.tobytes() and f1["lp_warmup_windows"] == 0
    if fs["lp_streams"] == 1:
        assert xs.tobytes() == x1.tobytes()


def test_two_runs_on_a_training_graph():
    """Two runs of 500-op windows on a 6,000-op training graph: the windows before the cut are the chain's, bit
    for bit (the first run is the chain's start); the lead-in is counted; the LP makespan is that of the
    left-justified starts under the final x; m-SCT places the graph with them."""
    g = level_dag(levels=200, training=True, colocated_fraction=0.15, memory_unit_bytes=1e5, seed=5)
    cl = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
    x1, f1 = sct_lp_windowed(g, cl, window=500)
    x2, f2 = sct_lp_windowed(g, cl, window=500, streams=2)
    n_win = f1["lp_windows"]
    src, dst, p, c = sct_lp_mod._edge_costs(g, cl, None)
    cuts = sct_lp_mod._run_cuts(src, dst, p, c, len(g), 500, n_win, 2)
    assert cuts[0] == 0 and 0 < cuts[1] < n_win
    lead = min(sct_lp_mod.STREAM_LEAD_WINDOWS, cuts[1])
    assert f2["lp_windows"] == n_win and f2["lp_warmup_windows"] == lead and f2["lp_streams"] == 2
    before = dst < cuts[1] * 500
    assert x1[before].tobytes() == x2[before].tobytes()
    assert f2["lp_makespan_s"] == pytest.approx(f1["lp_makespan_s"], rel=1e-3)
    pl = MSCTPlacer(lp_formulation="windowed", lp_streams=2).place(g, cl)
    check_placement(g, cl, pl)
    assert pl.info["lp_streams"] == 2


def test_streams_must_be_positive():
    g = level_dag(levels=5, training=True, memory_unit_bytes=1e5, seed=1)
    cl = uniform_cluster(2, 4 * g.total_memory(), latency_s=1e-4, bytes_per_s=5e9)
    with pytest.raises(ValueError, match="streams"):
        sct_lp_windowed(g, cl, streams=0)
    with pytest.raises(ConfigError, match="lp_streams"):
        MSCTPlacer(lp_streams=0)


def test_runs_are_cut_by_solver_work():
    """`_run_cuts`: k runs start at window 0 and at increasing windows, each run non-empty; on a training graph
    (forward and backward windows heavy, update windows nearly empty LPs) the cut of two runs lies before
    the middle window."""
    g = level_dag(levels=200, training=True, colocated_fraction=0.15, memory_unit_bytes=1e5, seed=5)
    cl = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
    src, dst, p, c = sct_lp_mod._edge_costs(g, cl, None)
    n = len(g)
    for window in (1, 7, 100, 500):
        n_win = math.ceil(n / window)
        for k in (1, 2, 3, 5):
            k = min(k, n_win)
            cuts = sct_lp_mod._run_cuts(src, dst, p, c, n, window, n_win, k)
            assert cuts[0] == 0 and len(cuts) == k
            assert all(a < b for a, b in zip(cuts, cuts[1:])) and cuts[-1] < n_win
    n_win = math.ceil(n / 500)
    assert sct_lp_mod._run_cuts(src, dst, p, c, n, 500, n_win, 2)[1] < n_win // 2


def test_window_by_size(monkeypatch):
    """m-SCT's default window (`sct_lp.window_ops`): `WINDOW_OPS` below `LARGE_WINDOW_FROM_OPS` ops,
    `LARGE_WINDOW_OPS` from there (session 17); an explicit `lp_window` wins."""
    from_ops = sct_lp_mod.LARGE_WINDOW_FROM_OPS
    assert from_ops is not None
    assert sct_lp_mod.window_ops(from_ops - 1) == sct_lp_mod.WINDOW_OPS == 500
    assert sct_lp_mod.window_ops(from_ops) == sct_lp_mod.LARGE_WINDOW_OPS == 250
    g = level_dag(levels=40, training=True, memory_unit_bytes=1e5, seed=3)
    cl = uniform_cluster(3, 4 * g.total_memory(), latency_s=1e-4, bytes_per_s=5e9)
    assert MSCTPlacer(lp_formulation="windowed").place(g, cl).info["lp_window_ops"] == 500
    monkeypatch.setattr(sct_lp_mod, "LARGE_WINDOW_OPS", 7)
    monkeypatch.setattr(sct_lp_mod, "LARGE_WINDOW_FROM_OPS", len(g))
    pl = MSCTPlacer(lp_formulation="windowed").place(g, cl)
    assert pl.info["lp_window_ops"] == 7 and pl.info["lp_windows"] == math.ceil(len(g) / 7)
    assert MSCTPlacer(lp_formulation="windowed", lp_window=9).place(g, cl).info["lp_window_ops"] == 9
    monkeypatch.setattr(sct_lp_mod, "LARGE_WINDOW_FROM_OPS", None)
    assert sct_lp_mod.window_ops(10**9) == 500


def test_lp_beside_the_model_places_the_same(monkeypatch):
    """With more than one CPU the windowed LP runs while a second thread builds the execution model
    (`m_sct._solve_lp_beside`): the placement, order and facts are those of one CPU."""
    from algorithms.placers.baechi import m_sct

    g = level_dag(levels=60, training=True, colocated_fraction=0.15, memory_unit_bytes=1e5, seed=4)
    cl = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
    placed = {}
    for cpus in (1, 2):
        monkeypatch.setattr(m_sct, "_cpus", lambda cpus=cpus: cpus)
        pl = MSCTPlacer(lp_formulation="windowed", lp_window=50, lp_streams=2).place(g, cl)
        info = {k: v for k, v in pl.info.items() if not k.endswith("_time_s")}
        placed[cpus] = (pl.assignment, pl.order, info)
    assert placed[1] == placed[2]


def test_lp_beside_raises_the_models_error_after_the_lp():
    from algorithms.placers.baechi import m_sct

    solved = []

    def build():
        raise ConfigError("no model")

    with pytest.raises(ConfigError, match="no model"):
        m_sct._solve_lp_beside(lambda: solved.append(1), build)
    assert solved == [1]
