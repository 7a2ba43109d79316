"""Issue 22: m-SCT's compiled list scheduling (`etf_kernel.run_sct`) gives exactly the placement of the Python
classes (`SCTQueue` with `ExecModel`): the same devices, orders, start and end times, predicted peaks, queue
counts (held-back pairs, excluded devices) or the same error, on random graphs with favourite children,
colocation groups, device types, tight memory, both exclusion rules and banned (group, device) pairs."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.cluster import Cluster, Device, uniform_cluster
from algorithms.errors import ConfigError, LabError
from algorithms.memory import single_device_need
from algorithms.placers.baechi import MSCTPlacer, m_sct
from algorithms.placers.baechi import sct_lp as sct_lp_mod
from algorithms.placers.baechi.exec_model import ExecModel
from algorithms.placers.baechi.sct_lp import implied_edges_kept
from algorithms.placers.baechi.sct_queue import SCTQueue
from algorithms.workloads.synthetic import level_dag
from tests.scale_fixture import CASES
from tests.strategies import random_dags

etf_kernel = pytest.importorskip("algorithms.placers.baechi.etf_kernel")  # needs numba


def _python(graph, cluster, fav, excl, exclusion, banned, **kw):
    try:
        model = ExecModel(graph, cluster, **kw)
        q = SCTQueue(model, fav, exclude_full=excl, exclusion=exclusion, banned=set(banned))
        q.run()
    except LabError as exc:
        return f"{type(exc).__name__}: {exc}"
    return _state(model, (q.n_dropped, q.n_parked, q.n_reestimated, q.n_held_back, list(q.excluded)))


def _compiled(graph, cluster, fav, excl, exclusion, banned, **kw):
    try:
        model = ExecModel(graph, cluster, **kw)
        counts = etf_kernel.run_sct(model, fav, excl, exclusion, set(banned))
    except LabError as exc:
        return f"{type(exc).__name__}: {exc}"
    return _state(model, tuple(counts))


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


def _favourites(graph, rng, share):
    """Random favourite parents (an edge's producer, at most one favourite child per parent), as
    `favorite_children` returns them: -1 for an op without one."""
    idx = graph.index()
    fav = [-1] * idx.n
    taken = set()
    for o in range(idx.n):
        ps = [j for j, _ in idx.pred[o] if j not in taken]
        if ps and rng.random() < share:
            fav[o] = rng.choice(ps)
            taken.add(fav[o])
    return fav


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    g=random_dags(max_ops=40, device_types=True, training=True),
    n_dev=st.integers(1, 4),
    frac=st.sampled_from([0.25, 0.4, 0.6, 1.0, math.inf]),
    reserve=st.sampled_from(["persistent", "transient", "full"]),
    aware=st.booleans(),
    latency=st.sampled_from([0.0, 1e-3]),
    bps=st.sampled_from([1e3, 1e5]),
    ban=st.lists(st.integers(0, 40), max_size=4),
    excl=st.booleans(),
    exclusion=st.sampled_from(["exhausted", "refusal"]),
    share=st.sampled_from([0.0, 0.5, 1.0]),
    seed=st.integers(0, 2**16),
)
def test_compiled_sct_equals_python(g, n_dev, frac, reserve, aware, latency, bps, ban, excl, exclusion, share, seed):
    need = single_device_need(g)
    types = ["GPU", "CPU", "GPU", "GPU"]
    devs = [Device(f"d{k}", memory_bytes=need * frac if need else frac, type=types[k]) for k in range(n_dev)]
    cl = Cluster(devs, latency_s=latency, bytes_per_s=bps)
    kw = dict(memory_aware=aware, group_reserve=reserve)
    banned = {b % (n_dev * 10) for b in ban}  # (group, device) pairs of the first 10 groups
    fav = _favourites(g, random.Random(seed), share)
    args = (fav, excl and aware, exclusion, banned)
    assert _compiled(g, cl, *args, **kw) == _python(g, cl, *args, **kw)


def _rules_cases():
    """Seeded graphs and clusters on which SCT's rules act: a tiny third device that ops exhaust (exclusion
    "exhausted"), a small one refused at once (exclusion "refusal"), and tight uniform devices (parked pairs)."""
    out = []
    for seed in range(6):
        g = level_dag(levels=12, min_nodes_per_level=2, max_nodes_per_level=6, training=True, seed=seed)
        need = single_device_need(g)
        for small, exclusion in ((0.005, "exhausted"), (0.2, "refusal"), (0.6, "exhausted")):
            sizes = (0.6, 0.6, small)
            devs = [Device(f"d{k}", memory_bytes=need * f) for k, f in enumerate(sizes)]
            out.append((seed, g, Cluster(devs, latency_s=2e-3, bytes_per_s=1e5), exclusion))
    return out


def test_compiled_sct_rules_are_exercised():
    """The seeded cases hold pairs back, exclude devices under both rules, park and drop pairs, and the compiled
    run matches the Python one on each: a rule missing from the kernel shows here."""
    seen = {"held": 0, "exhausted": 0, "refusal": 0, "parked": 0, "dropped": 0}
    for seed, g, cl, exclusion in _rules_cases():
        args = (_favourites(g, random.Random(seed), 0.7), True, exclusion, set())
        want = _python(g, cl, *args)
        assert _compiled(g, cl, *args) == want
        if not isinstance(want, str):
            n_dropped, n_parked, _, n_held, excluded = want[5]
            seen["held"] += n_held
            seen[exclusion] += sum(excluded)
            seen["parked"] += n_parked
            seen["dropped"] += n_dropped
    assert all(seen.values()), seen


def test_compiled_sct_bad_exclusion():
    g = level_dag(levels=3, seed=1)
    model = ExecModel(g, uniform_cluster(2, 1e12))
    with pytest.raises(ConfigError, match="exclusion"):
        etf_kernel.run_sct(model, [-1] * model.n, True, "sometimes", set())


def test_compiled_sct_tables_grow():
    """A run whose heaps (four per device) or pending frees outgrow their first size is run again with more
    room, same result."""
    g = level_dag(levels=30, min_nodes_per_level=2, max_nodes_per_level=8, training=True, seed=2)
    cl = uniform_cluster(3, single_device_need(g) * 0.5, latency_s=1e-4, bytes_per_s=1e9)
    fav = _favourites(g, random.Random(3), 0.7)
    want = _python(g, cl, fav, True, "exhausted", set())
    try:
        etf_kernel.FIRST_ROOM = 1
        assert _compiled(g, cl, fav, True, "exhausted", set()) == want
    finally:
        etf_kernel.FIRST_ROOM = None


@pytest.mark.parametrize("case", [c for c in CASES if c[2] == "parallel"], ids=lambda c: c[0])
def test_placer_compiled_sct_equals_python_on_fixture(case, monkeypatch):
    """The placer (LP, rounding, colocation retries, one-device fallback) on the graphs of
    `test_scale_identical`, compiled and not."""
    _, gen, mode, frac = case
    g = level_dag(**gen)
    cl = uniform_cluster(4, single_device_need(g) * frac, type="GPU", latency_s=1e-4, bytes_per_s=1e9, mode=mode)
    out = []
    for threshold in (None, 0):
        monkeypatch.setattr(m_sct, "COMPILED_MIN_OPS", threshold)
        pl = MSCTPlacer().place(g, cl)
        assert pl.info["compiled"] is (threshold == 0)
        drop = ("algorithm_time_s", "compiled", "lp_time_s")
        info = {k: v for k, v in pl.info.items() if k not in drop}
        out.append((pl.assignment, pl.order, info))
    assert out[0] == out[1]


# ----------------------------------------------------------------- the SCT LP's compiled preparation
sct_kernel = pytest.importorskip("algorithms.placers.baechi.sct_kernel")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=random_dags(max_ops=40, training=True), seed=st.integers(0, 2**16), budget=st.sampled_from([1, 3, 16]))
def test_compiled_implied_edges_equal_python(g, seed, budget):
    """`sct_kernel.implied_kept` gives `implied_edges_kept`'s mask (random times, some long ones so that paths
    imply edges; small budgets so that passes stop early)."""
    idx = g.index()
    rng = np.random.default_rng(seed)
    src = np.array([i for i in range(idx.n) for _ in idx.succ[i]], dtype=np.int64)
    dst = np.array([j for i in range(idx.n) for j, _ in idx.succ[i]], dtype=np.int64)
    p = rng.choice([0.0, 0.5, 1.0, 3.0], size=idx.n)
    c = rng.choice([0.0, 1.0, 2.5, 6.0], size=len(src))
    want = implied_edges_kept(idx.succ, idx.pred, p, c, budget)
    sptr = np.zeros(idx.n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=idx.n), out=sptr[1:])
    pptr = np.zeros(idx.n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=idx.n), out=pptr[1:])
    got = sct_kernel.implied_kept(sptr, dst, pptr, src[np.argsort(dst, kind="stable")], p, c, budget)
    assert got.tolist() == want.tolist()
    if len(src):
        h = [np.zeros(idx.n), np.zeros(idx.n), p.copy()]
        sct_kernel.heads_tails(src, dst, p, c, *h)
        ref = sct_lp_mod._heads_tails(src, dst, p, c, idx.n)  # size 0: the Python passes
        assert [a.tolist() for a in h] == [a.tolist() for a in ref]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("window", [40, 150])
def test_windowed_lp_compiled_equals_python(seed, window, monkeypatch):
    """`sct_lp_windowed` (and the whole LP) give the same x, facts and favourite children with the compiled
    preparation and the Python one; the windows have ghosts and tails."""
    g = level_dag(levels=80, min_nodes_per_level=2, max_nodes_per_level=8, training=True, seed=seed)
    cl = uniform_cluster(3, 1e12, latency_s=1e-4, bytes_per_s=1e8)
    out = []
    for threshold in (None, 0):
        monkeypatch.setattr(sct_lp_mod, "COMPILED_MIN_OPS", threshold)
        x, facts = sct_lp_mod.sct_lp_windowed(g, cl, window=window)
        xf, ff = sct_lp_mod.sct_lp(g, cl)
        drop = ("lp_time_s",)
        facts = {k: v for k, v in facts.items() if k not in drop}
        fav = sct_lp_mod.favorite_children(g, x, 0.1)
        out.append((x.tolist(), facts, xf.tolist(), ff["lp_edges_implied"], fav))
    assert out[0] == out[1]
    assert out[0][1]["lp_edges_implied"] > 0 and out[0][1]["lp_ghost_ops"] > 0 and max(out[0][4]) >= 0
