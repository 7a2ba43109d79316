"""The SCT LP solved through `highspy` (issue 22, session 16) against `scipy.optimize.linprog`, its reference.

`sct_lp._solve` hands HiGHS the model and options that `linprog(method="highs-ipm")` hands it, without SciPy's
Python wrapper.  With the same HiGHS release (highspy 1.12 and SciPy 1.17 both carry HiGHS 1.12.0) every LP's
solution is the same, bit for bit, and so are the facts m-SCT reports (status included); the tests below compare
the two backends on random graphs, every window of a benchmark graph, each method, and on a bad status.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.cluster import uniform_cluster
from algorithms.errors import ConfigError
from algorithms.placement import check_placement
from algorithms.placers.baechi import MSCTPlacer
from algorithms.placers.baechi import sct_lp as sct_lp_mod
from algorithms.workloads.synthetic import level_dag

from .strategies import random_clusters, random_dags

highspy = pytest.importorskip("highspy")


def _same_highs() -> bool:
    from scipy.optimize._highspy import _core  # SciPy's bundled HiGHS (a private module: only its version read)

    bundled = (_core.HIGHS_VERSION_MAJOR, _core.HIGHS_VERSION_MINOR, _core.HIGHS_VERSION_PATCH)
    return highspy.Highs().version() == "{}.{}.{}".format(*bundled)


pytestmark = pytest.mark.skipif(not _same_highs(), reason="highspy and SciPy carry different HiGHS releases")


def _both(fn, *args, unknown: bool = False, **kwargs):
    """fn's result through linprog, then through highspy; with `unknown` False, highspy reads an "Unknown" model
    as linprog does (no x, `USE_UNKNOWN_IPM_POINT`), so that the two must agree on every LP."""
    out = []
    old = sct_lp_mod.LP_BACKEND, sct_lp_mod.USE_UNKNOWN_IPM_POINT
    for backend in ("linprog", "auto"):
        sct_lp_mod.LP_BACKEND, sct_lp_mod.USE_UNKNOWN_IPM_POINT = backend, unknown
        try:
            out.append(fn(*args, **kwargs))
        finally:
            sct_lp_mod.LP_BACKEND, sct_lp_mod.USE_UNKNOWN_IPM_POINT = old
    return out


def _assert_same(a, b):
    (xa, fa), (xb, fb) = a, b
    assert xa.tobytes() == xb.tobytes()
    fa, fb = dict(fa), dict(fb)
    fa.pop("lp_time_s"), fb.pop("lp_time_s")
    assert fa == fb


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    random_dags(min_ops=2, max_ops=30, colocation=False, training=True),
    random_clusters(min_devices=2),
    st.sampled_from(sct_lp_mod.LP_METHODS),
    st.sampled_from([None, 1, 3, 7]),
)
def test_highspy_equals_linprog_on_random_graphs(graph, cluster, method, window):
    opts = sct_lp_mod.DEFAULT_LP_OPTIONS
    if window is None:
        _assert_same(*_both(sct_lp_mod.sct_lp, graph, cluster, method=method, options=opts))
    else:
        _assert_same(*_both(sct_lp_mod.sct_lp_windowed, graph, cluster, method=method, options=opts, window=window))


@pytest.mark.parametrize("reduce", [True, False])
def test_highspy_equals_linprog_on_every_window(reduce):
    """Every 500-op window LP of a 6,000-op training graph (the formulation m-SCT uses above 20,000 ops)."""
    g = level_dag(levels=200, training=True, colocated_fraction=0.15, memory_unit_bytes=1e5, seed=5)
    cl = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
    calls = []
    real = sct_lp_mod._solve

    def spy(obj, A, b, lb, ub, method, options):
        got = real(obj, A, b, lb, ub, method, options)
        calls.append(got)
        return got

    sct_lp_mod._solve = spy
    try:
        opts = sct_lp_mod.DEFAULT_LP_OPTIONS
        a, b = _both(sct_lp_mod.sct_lp_windowed, g, cl, reduce=reduce, options=opts, window=500)
    finally:
        sct_lp_mod._solve = real
    _assert_same(a, b)
    half = len(calls) // 2
    assert half == a[1]["lp_windows"] >= len(g) // 500
    for (xa, sa, _, ua), (xb, sb, _, ub) in zip(calls[:half], calls[half:]):
        assert not ua and not ub
        assert sa == sb == 0
        assert xa.tobytes() == xb.tobytes()


def test_options_as_yaml_writes_them():
    """``run_crossover: off`` unquoted in YAML is False, and ``time_limit: 1000`` an int: both are taken as
    HiGHS types them, the same LP as with the default options."""
    g = level_dag(levels=20, training=True, colocated_fraction=0.1, memory_unit_bytes=1e5, seed=1)
    cl = uniform_cluster(3, 4 * g.total_memory(), latency_s=1e-4, bytes_per_s=5e9)
    want = sct_lp_mod.sct_lp(g, cl, options=sct_lp_mod.DEFAULT_LP_OPTIONS)
    got = sct_lp_mod.sct_lp(
        g, cl, options={**sct_lp_mod.DEFAULT_LP_OPTIONS, "run_crossover": False, "time_limit": 1000}
    )
    _assert_same(want, got)
    assert want[1]["lp_status"] == 0


@pytest.mark.parametrize("bad", [{"no_such_option": 1}, {"ipm_optimality_tolerance": "tight"}])
def test_a_bad_option_is_a_config_error(bad):
    g = level_dag(levels=10, training=True, memory_unit_bytes=1e5, seed=1)
    cl = uniform_cluster(2, 4 * g.total_memory(), latency_s=1e-4, bytes_per_s=5e9)
    with pytest.raises(ConfigError, match="lp_options"):
        MSCTPlacer(lp_options=bad).place(g, cl)


def test_an_unsolved_lp_is_reported_and_leaves_no_favourites(caplog):
    """HiGHS stopping without an optimum (here: one interior-point iteration allowed) is the status linprog
    gave (1: iteration limit), logged as a warning and counted; that LP's edges get x = 1 (no favourite child),
    and m-SCT still places every op (those ops list-scheduled without favourites).  Windows that HiGHS' presolve
    solves outright still give theirs."""
    g = level_dag(levels=30, training=True, colocated_fraction=0.1, memory_unit_bytes=1e5, seed=2)
    cl = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
    opts = {**sct_lp_mod.DEFAULT_LP_OPTIONS, "ipm_iteration_limit": 1}
    a, b = _both(sct_lp_mod.sct_lp_windowed, g, cl, options=opts, window=200)
    _assert_same(a, b)
    assert b[1]["lp_status"] == 1 and b[1]["lp_windows_unsolved"] >= 1
    x, facts = sct_lp_mod.sct_lp(g, cl, options=opts)
    assert facts["lp_status"] == 1 and facts["lp_unsolved"]
    assert (x == 1.0).all()
    with caplog.at_level(logging.WARNING):
        pl = MSCTPlacer(lp_options=opts, lp_formulation="windowed", lp_window=200).place(g, cl)
    assert "did not solve" in caplog.text
    assert pl.info["lp_windows_unsolved"] >= 1
    check_placement(g, cl, pl)
    full = MSCTPlacer(lp_formulation="windowed", lp_window=200).place(g, cl)
    assert full.info["lp_windows_unsolved"] == 0
    assert pl.info["n_favorite_children"] < full.info["n_favorite_children"]


def test_highs_model_status_codes_match_scipy():
    """`_SCIPY_STATUS` is SciPy's table for the statuses it names (the others are 4 in both)."""
    from scipy.optimize._highspy import _core
    from scipy.optimize._linprog_highs import _highs_to_scipy_status_message

    names = set(highspy.HighsModelStatus.__members__)
    for name, member in _core.HighsModelStatus.__members__.items():
        want = _highs_to_scipy_status_message(member, "")[0]
        assert sct_lp_mod._SCIPY_STATUS.get(name, 4) == want, name
        names.discard(name)
    assert not names  # highspy names no status SciPy's HiGHS lacks
    assert np.isfinite(sct_lp_mod._CHECK_TOL)


def test_an_unknown_model_within_the_asked_gap_gives_its_interior_point(monkeypatch):
    """IPX asked for a loose gap (here 1) stops there, and HiGHS, checking the point against its tighter
    ``kkt_tolerance``, calls the model "Unknown".  Through highspy the point is used (status 0, counted as
    ``lp_unknown_used``); `USE_UNKNOWN_IPM_POINT` False, and linprog (which returns no x), give no solution."""
    g = level_dag(levels=20, training=True, colocated_fraction=0.1, memory_unit_bytes=1e5, seed=1)
    cl = uniform_cluster(3, 4 * g.total_memory(), latency_s=1e-4, bytes_per_s=5e9)
    opts = {**sct_lp_mod.DEFAULT_LP_OPTIONS, "ipm_optimality_tolerance": 1.0}
    (x_lp, f_lp), (x, f) = _both(sct_lp_mod.sct_lp, g, cl, options=opts, unknown=True)
    assert f["lp_status"] == 0 and f["lp_unknown_used"] and "lp_unsolved" not in f
    assert ((x >= 0) & (x <= 1)).all() and (x < 1).any()
    assert f_lp["lp_status"] == 4 and f_lp["lp_unsolved"] and (x_lp == 1).all()
    monkeypatch.setattr(sct_lp_mod, "USE_UNKNOWN_IPM_POINT", False)
    _assert_same((x_lp, f_lp), sct_lp_mod.sct_lp(g, cl, options=opts))
    # the default gap, 1e-6, is reached: the model is optimal
    x6, f6 = sct_lp_mod.sct_lp(g, cl)
    assert f6["lp_status"] == 0 and "lp_unknown_used" not in f6
