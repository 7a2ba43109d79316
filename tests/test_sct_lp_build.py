"""The SCT LP's construction from whole arrays (issue 22) against the row-by-row code it replaced.

`sct_lp._lp_rows` builds the sink, makespan-chain and precedence rows of every LP (the whole graph's and each
window's) with numpy; `sct_lp._lp_rows_loop` is the loop of `_solve_sct` before that change, kept as the
reference.  Every LP solved below is built both ways and must give the same sparse matrix (the same CSR arrays:
the solver receives the same model) and the same right-hand sides, bit for bit.  The compiled pieces of the
preparation (`sct_kernel.eliminate`, `comm_free_tails`, `left_starts`) are compared with the Python code they
port.  Together with `tests/test_sct_kernel.py` (compiled preparation against Python on the windowed LP) and
the digests of `test_m_sct_benchmark_graph_unchanged`, this pins m-SCT's favourite children, placement and
order to those of the code before issue 22's session 15.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.cluster import Cluster, uniform_cluster
from algorithms.graph import OpGraph
from algorithms.placers.baechi import MSCTPlacer
from algorithms.placers.baechi import sct_lp as sct_lp_mod
from algorithms.workloads.synthetic import level_dag
from benchmarks.bench_scale import make_graph
from tests.strategies import random_clusters, random_dags

sct_kernel = pytest.importorskip("algorithms.placers.baechi.sct_kernel")


def _csr(rows, cols, vals, nrows, nv):
    return sp.csr_matrix((vals, (rows, cols)), shape=(nrows, nv))


class _Spy:
    """Wraps `_lp_rows`: builds every LP's rows both ways and checks them; counts the LPs and rows seen."""

    def __init__(self, real):
        self.real = real
        self.lps = 0
        self.rows = 0

    def __call__(self, sinks, last, anchor, offset, terms, nterms, gone, ks, kd, ck, p, U, X):
        got = self.real(sinks, last, anchor, offset, terms, nterms, gone, ks, kd, ck, p, U, X)
        tuples = [tuple(terms[v, : nterms[v]].tolist()) for v in range(len(anchor))]
        want = sct_lp_mod._lp_rows_loop(sinks, last, anchor, offset, tuples, gone, ks, kd, ck, p, U, X)
        assert got[4] == want[4]
        nv = X + len(ks)
        a, b = _csr(*got[:3], got[4], nv), _csr(*want[:3], want[4], nv)
        for f in ("indptr", "indices", "data"):
            assert getattr(a, f).dtype == getattr(b, f).dtype
            assert getattr(a, f).tobytes() == getattr(b, f).tobytes()
        assert got[3].dtype == want[3].dtype and got[3].tobytes() == want[3].tobytes()
        self.lps += 1
        self.rows += got[4]
        return got


def _check(g: OpGraph, cl: Cluster, window: int | None, reduce: bool, threshold) -> _Spy:
    with pytest.MonkeyPatch.context() as mp:
        spy = _Spy(sct_lp_mod._lp_rows)
        mp.setattr(sct_lp_mod, "_lp_rows", spy)
        mp.setattr(sct_lp_mod, "COMPILED_MIN_OPS", threshold)
        if window is None:
            sct_lp_mod.sct_lp(g, cl, reduce=reduce)
        else:
            sct_lp_mod.sct_lp_windowed(g, cl, reduce=reduce, window=window)
    return spy


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    g=random_dags(2, 40, training=True),
    cl=random_clusters(1, 4, hetero=True),
    window=st.one_of(st.none(), st.integers(1, 12)),
    reduce=st.booleans(),
    compiled=st.booleans(),
)
def test_lp_rows_equal_the_loop(g: OpGraph, cl: Cluster, window, reduce, compiled):
    _check(g, cl, window, reduce, 0 if compiled else None)


@pytest.mark.parametrize("window", [None, 37, 500])
def test_lp_rows_equal_the_loop_on_a_training_graph(window):
    """A 3,000-op level graph (long single-parent chains eliminated, sinks, ghosts and tails)."""
    g = level_dag(
        levels=250, min_nodes_per_level=2, max_nodes_per_level=6, edge_probability=0.15, training=True, seed=7
    )
    cl = uniform_cluster(4, 1e15, latency_s=1.34e-4, bytes_per_s=5.7e9)
    spy = _check(g, cl, window, True, 0)
    assert spy.lps >= 1 and spy.rows > 1000


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=random_dags(2, 40, training=True), seed=st.integers(0, 2**16), max_terms=st.integers(1, 8))
def test_compiled_elimination_equals_python(g: OpGraph, seed, max_terms):
    idx = g.index()
    rng = np.random.default_rng(seed)
    src = np.array([i for i in range(idx.n) for _ in idx.succ[i]], dtype=np.int64)
    dst = np.array([j for i in range(idx.n) for j, _ in idx.succ[i]], dtype=np.int64)
    keep = rng.random(len(src)) < 0.7
    ks, kd = src[keep], dst[keep]
    p = rng.choice([0.0, 0.25, 1.0, 1 / 3], size=idx.n)
    anchor, offset, terms, gone = sct_lp_mod._eliminate_single_parents(ks, kd, p, np.zeros(len(ks)), idx.n, max_terms)
    a2, o2, t2, n2, g2 = sct_kernel.eliminate(ks, kd, p, idx.n, max_terms)
    assert a2.tolist() == anchor.tolist()
    assert o2.tobytes() == offset.tobytes()
    assert [tuple(t2[v, : n2[v]].tolist()) for v in range(idx.n)] == list(terms)
    assert g2.tolist() == gone.tolist()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=random_dags(1, 40, training=True), seed=st.integers(0, 2**16))
def test_compiled_tails_and_starts_equal_python(g: OpGraph, seed):
    idx = g.index()
    rng = np.random.default_rng(seed)
    n = idx.n
    p = rng.choice([0.0, 0.1, 1.0, 1 / 7], size=n)
    # the Python loops of `sct_lp_windowed`
    t0 = sct_lp_mod.comm_free_tails_python(idx.succ, p)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(o) for o in idx.succ], out=ptr[1:])
    dst = np.array([j for i in range(n) for j, _ in idx.succ[i]], dtype=np.int64)
    src = np.array([i for i in range(n) for _ in idx.succ[i]], dtype=np.int64)
    assert sct_kernel.comm_free_tails(ptr, dst, p).tobytes() == np.array(t0, dtype=float).tobytes()
    c = rng.choice([0.0, 0.3, 2.0], size=len(src))
    x = rng.random(len(src))
    ev = np.sort(rng.permutation(len(src))[: len(src) // 2 + 1]) if len(src) else np.zeros(0, dtype=np.int64)
    start = rng.random(n)
    want = start.copy()
    for e in ev.tolist():
        i, j = int(src[e]), int(dst[e])
        a = want[i] + float(p[i]) + float(c[e]) * x[e]
        if a > want[j]:
            want[j] = a
    sct_kernel.left_starts(ev, src, dst, p, c, x, start)
    assert start.tobytes() == want.tobytes()


def _digest(pl) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(pl.assignment, sort_keys=True).encode())
    h.update(json.dumps(pl.order, sort_keys=True).encode())
    return h.hexdigest()[:16]


#: m-SCT's placement and order on bench_scale's random graph of 25,000 requested ops (windowed LP), digested
#: (`_digest`) from the code before session 15 (22d7f8a).
BENCH_25K_DIGEST = "63d9fda85b3b5951"


def test_m_sct_benchmark_graph_unchanged():
    g = make_graph("random", 25000)  # the benchmark's random graph
    cl = uniform_cluster(4, 4 * g.total_memory(), type="GPU", latency_s=1.34e-4, bytes_per_s=5.7e9)
    pl = MSCTPlacer().place(g, cl)
    assert pl.info["lp_formulation"] == "windowed"
    assert _digest(pl) == BENCH_25K_DIGEST


@pytest.mark.parametrize("window", [None, 1, 2, 3])
def test_subnormal_times_are_no_time_to_the_lp(window):
    """Ops of a subnormal second (5e-324 s) around one of a second: scaling a window's tail (the second that
    follows it) by the largest time of a window of tiny ops overflowed to inf, and SciPy refused the LP (found
    by hypothesis); such a window is now an LP of no time (every x = 1) and m-SCT places the graph."""
    g = OpGraph("tiny")
    times = [5e-324] * 3 + [1.0] + [5e-324] * 3
    for k, t in enumerate(times):
        g.add_op(f"o{k}", compute_s=t, output_bytes=0.0)
    for k in range(len(times) - 1):
        g.add_edge(f"o{k}", f"o{k + 1}", bytes=0.0)
    for k in range(len(times) - 2):
        g.add_edge(f"o{k}", f"o{k + 2}", bytes=0.0)
    cl = uniform_cluster(1, 1e9, latency_s=0.0, bytes_per_s=100.0)
    if window is None:
        x, facts = sct_lp_mod.sct_lp(g, cl)
    else:
        x, facts = sct_lp_mod.sct_lp_windowed(g, cl, window=window)
    assert np.isfinite(np.asarray(list(x.values()) if isinstance(x, dict) else x, dtype=float)).all()
    pl = MSCTPlacer().place(g, cl)
    assert set(pl.assignment) == set(g.ops)
