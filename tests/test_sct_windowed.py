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
