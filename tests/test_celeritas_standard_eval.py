"""Standard Evaluation pieces (Celeritas 4.2.1, 4.2.2, 6.5.1) and the METIS baseline (6.2.2)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from algorithms.cluster import uniform_cluster
from algorithms.errors import ConfigError, InvalidGraph
from algorithms.graph import OpGraph
from algorithms.placement import check_placement, check_schedule
from algorithms.placers.celeritas import MetisPlacer, SequentialDfsTopoPlacer
from algorithms.placers.celeritas.common import effective_types, mean_compute, node_memory
from algorithms.placers.celeritas.standard_eval import fit_linear_profiles, relative_deviation
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag
from backends.base import Backend, Capabilities, RunResult
from orchestrator.stages.standard_eval import StandardEvaluationProfiler
from tests.strategies import random_clusters, random_dags


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def profiled(batch: float, laws: dict) -> OpGraph:
    """A three-op graph whose costs follow known linear laws of the batch size."""
    g = OpGraph(f"b{batch:g}")
    for op, (ca, cb, ma, mb) in laws.items():
        g.add_op(
            op,
            compute_s=ca + cb * batch,
            persistent_bytes=1000,
            temporary_bytes=ma + mb * batch,
            output_bytes=4 * batch,
            compute_s_by_type={"GPU": (ca + cb * batch) / 10},
        )
    g.add_edge("a", "b", bytes=4 * batch)
    g.add_edge("b", "c", bytes=4 * batch)
    return g


LAWS = {"a": (1e-4, 2e-6, 100.0, 64.0), "b": (5e-5, 1e-6, 0.0, 128.0), "c": (0.0, 3e-6, 10.0, 0.5)}


def test_linear_fit_recovers_a_known_law_exactly():
    model = fit_linear_profiles({b: profiled(b, LAWS) for b in (8, 16, 32, 64)})
    for op, (ca, cb, ma, mb) in LAWS.items():
        assert model.law(op, "compute_s") == pytest.approx((ca, cb), rel=1e-9, abs=1e-15)
        assert model.law(op, "temporary_bytes") == pytest.approx((ma, mb), rel=1e-9, abs=1e-9)
        assert model.law(op, "persistent_bytes") == pytest.approx((1000.0, 0.0), abs=1e-9)
    big = model.predict(512)
    want = profiled(512, LAWS)
    for op in LAWS:
        for key in ("compute_s", "persistent_bytes", "temporary_bytes", "output_bytes"):
            assert big.op(op)[key] == pytest.approx(want.op(op)[key], rel=1e-9)
        assert big.op(op)["compute_s_by_type"]["GPU"] == pytest.approx(want.op(op)["compute_s_by_type"]["GPU"])
    assert big.nx.edges["a", "b"]["bytes"] == pytest.approx(4 * 512)
    big.validate()
    rep = relative_deviation(big, want, "memory")
    assert rep.mean == pytest.approx(0.0, abs=1e-12)


def test_linear_fit_needs_two_batch_sizes_and_the_same_ops():
    with pytest.raises(ConfigError, match="two or more"):
        fit_linear_profiles({8: profiled(8, LAWS)})
    other = profiled(16, LAWS)
    other.nx.remove_node("c")
    with pytest.raises(InvalidGraph, match="missing"):
        fit_linear_profiles({8: profiled(8, LAWS), 16: other})


def test_prediction_is_clamped_at_zero():
    laws = {"a": (1e-3, -1e-5, 0.0, 1.0), "b": (0.0, 1e-6, 0.0, 1.0), "c": (0.0, 1e-6, 0.0, 1.0)}
    model = fit_linear_profiles({b: profiled(b, laws) for b in (8, 16)})
    assert model.predict(1000).op("a")["compute_s"] == 0.0


def test_relative_deviation_mean_and_cdf_by_hand():
    est, meas = OpGraph("e"), OpGraph("m")
    for name, e, a in [("x", 110, 100), ("y", 100, 100), ("z", 50, 100), ("w", 5, 0)]:
        est.add_op(name, compute_s=e / 100, persistent_bytes=e)
        meas.add_op(name, compute_s=a / 100, persistent_bytes=a)
    rep = relative_deviation(est, meas, "memory")
    assert rep.per_op == pytest.approx({"x": 0.1, "y": 0.0, "z": 0.5})
    assert rep.skipped == ["w"]
    assert rep.mean == pytest.approx(0.2)
    cdf = rep.cdf([0.0, 0.1, 0.3, 0.5])
    assert [t for t, _ in cdf] == [0.0, 0.1, 0.3, 0.5]
    assert [f for _, f in cdf] == pytest.approx([1 / 3, 2 / 3, 2 / 3, 1.0])
    assert relative_deviation(est, meas, "time").mean == pytest.approx(0.2)
    xs, fs = rep.curve()
    assert xs == pytest.approx([0.0, 0.1, 0.5]) and fs == pytest.approx([1 / 3, 2 / 3, 1.0])


def test_sequential_dfs_topo_fills_devices_one_after_another():
    g = OpGraph("two chains")
    for c in "ab":
        for k in range(4):
            g.add_op(f"{c}{k}", compute_s=1.0, persistent_bytes=10)
            if k:
                g.add_edge(f"{c}{k - 1}", f"{c}{k}", bytes=1)
    g.add_edge("a3", "b0", bytes=1)
    p = SequentialDfsTopoPlacer().place(g, uniform_cluster(3, memory_bytes=40))
    assert [p[f"a{k}"] for k in range(4)] == ["cpu0"] * 4
    assert [p[f"b{k}"] for k in range(4)] == ["cpu1"] * 4
    assert p.info["best_effort"] == 0 and p.info["devices_used"] == 2
    # every device full: best effort on the least used device, reported
    q = SequentialDfsTopoPlacer().place(g, uniform_cluster(2, memory_bytes=35))
    assert q.info["best_effort"] == 1 and q.info["best_effort_ops_count"] == 2


def test_sequential_dfs_topo_reserves_whole_colocation_groups():
    g = OpGraph("group")
    g.add_op("v", persistent_bytes=10, colocation="var")
    g.add_op("x", persistent_bytes=10)
    g.add_op("upd", persistent_bytes=10, colocation="var")
    g.add_edge("v", "x", bytes=1)
    g.add_edge("x", "upd", bytes=1)
    # the group {v, upd} (20 bytes) is charged when v is placed: x no longer fits on cpu0
    p = SequentialDfsTopoPlacer().place(g, uniform_cluster(2, memory_bytes=25))
    assert p["v"] == p["upd"] == "cpu0" and p["x"] == "cpu1"


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_dags(max_ops=40, training=True), random_clusters(max_devices=4))
def test_sequential_dfs_topo_is_valid(g, cl):
    p = SequentialDfsTopoPlacer().place(g, cl)
    check_placement(g, cl, p)
    check_schedule(g, p, p.order)
    simulate(g, cl, p, schedule=p.order)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    random_dags(min_ops=2, max_ops=40, training=True, device_types=True),
    random_clusters(min_devices=2, max_devices=4, hetero=True),
)
def test_metis_placement_is_valid(g, cl):
    types = {d.type for d in cl.devices}
    if any(g.op(o).get("device_type") not in (None, *types) for o in g.ops):
        return
    p = MetisPlacer().place(g, cl)
    check_placement(g, cl, p)
    simulate(g, cl, p)


def test_metis_balances_and_repairs_memory():
    g = level_dag(levels=40, training=True, colocated_fraction=0.15, seed=7)
    total = g.total_memory()
    cl = uniform_cluster(4, memory_bytes=total / 3.2, latency_s=1e-5, bytes_per_s=1e9)
    p = MetisPlacer(seed=1, balance="compute_memory", repair=True).place(g, cl)
    check_placement(g, cl, p)
    idx = g.index()
    mem = node_memory(idx)
    used = {d: 0.0 for d in cl.names}
    for i, op in enumerate(idx.names):
        used[p[op]] += mem[i]
    assert len(p.devices_used()) == 4
    assert p.info["memory_overflow_bytes"] == 0.0
    assert all(u <= total / 3.2 for u in used.values())
    # the cut is far below a random assignment's (METIS minimises it)
    rng = np.random.default_rng(0)
    rand = {op: cl.names[k] for op, k in zip(idx.names, rng.integers(0, 4, idx.n))}

    def cut(a):
        return sum(d["bytes"] for u, v, d in g.edges() if a[u] != a[v])

    assert cut(p.assignment) < 0.5 * cut(rand)


def test_metis_paper_reading_balances_compute_and_leaves_memory_alone():
    """The default (the paper's baseline): one constraint, the compute; no repair, so a device ends over its
    memory (reported, best effort) where the memory-aware variant with repair fits."""
    g0 = level_dag(levels=40, training=True, colocated_fraction=0.15, seed=7)
    top = max(node_memory(g0.index()))
    first = g0.index().names[: g0.index().n // 8]
    g = level_dag(levels=40, training=True, colocated_fraction=0.15, seed=7)
    for name in first:  # memory concentrated on the first eighth of the ops: compute balance does not spread it
        g.op(name)["persistent_bytes"] = 50.0 * top
    total = g.total_memory()
    cl = uniform_cluster(4, memory_bytes=total / 2, latency_s=1e-5, bytes_per_s=1e9)
    idx = g.index()
    p = MetisPlacer(seed=1).place(g, cl)
    check_placement(g, cl, p)
    assert p.info["repaired_units"] == 0 and p.info["memory_overflow_bytes"] > 0.01 * total
    w = mean_compute(idx, cl, effective_types(idx))
    share = dict.fromkeys(cl.names, 0.0)
    for i, n in enumerate(idx.names):
        share[p[n]] += w[i]
    assert max(share.values()) < 1.3 * sum(w) / 4  # balanced on compute (METIS' tolerance is a few percent)
    aware = MetisPlacer(seed=1, balance="compute_memory", repair=True).place(g, cl)
    assert aware.info["memory_overflow_bytes"] == 0.0
    with pytest.raises(ConfigError, match="balance"):
        MetisPlacer(balance="memory")


class _TimedBackend(Backend):
    """A backend whose runtime times ops on the known linear LAWS and whose op-by-op profiler reads them 20 %
    high plus a quadratic term: the Standard Evaluation must take both steps' times from the same timer.
    `slow`: the indices of runs whose op times come out twice as long (a slow spell of the host)."""

    def __init__(self, times_ops: bool, slow: frozenset[int] = frozenset()):
        self.capabilities = Capabilities(times_ops=times_ops)
        self.runs: list[tuple[float, set[str], int, int]] = []
        self.profiles: list[tuple[float, int]] = []
        self.slow = slow

    def build(self, model_cfg):
        return float(model_cfg["batch_size"])

    def capture(self, model):
        return profiled(model, LAWS)

    def profile(self, model, graph, *, warmup=5, steps=10, batch_size=None):
        self.profiles.append((model, steps))
        g = profiled(model, LAWS)
        for op in g.ops:
            g.op(op)["compute_s"] = 1.2 * g.op(op)["compute_s"] + 1e-6 * model**2
        g.invalidate()
        return g

    def comm_benchmark(self, cluster, sizes=None, repeats=5):
        raise NotImplementedError

    def run(self, model, graph, placement, schedule, cluster, *, warmup=5, steps=20, time_ops=False, **kw):
        factor = 2.0 if len(self.runs) in self.slow else 1.0
        self.runs.append((model, set(placement.values()), warmup, steps))
        times = {op: factor * profiled(model, LAWS).op(op)["compute_s"] for op in graph.ops}
        return RunResult(0.01, [0.01] * steps, {}, 0.0, extra={"op_times_s": times} if time_ops else {})


@pytest.mark.parametrize("times_ops", [True, False])
def test_both_steps_time_ops_with_the_same_timer(times_ops):
    """Step 1 runs each small batch on the cluster's first device through the runtime that times step 2
    (seed 002, 4.2.1: the model is run for a few iterations at small batches); a profiler whose timer reads the
    same ops differently must not leak into the time deviation. Without op timing both come from the profiler."""
    be = _TimedBackend(times_ops)
    cl = uniform_cluster(2, memory_bytes=1e9)
    se = StandardEvaluationProfiler(batch_sizes=(2, 4, 8), warmup=5, steps=50, run_warmup=5, run_steps=50, rounds=5)
    graph, report = se.profile(be, 16.0, profiled(16, LAWS), cl, model_cfg={"batch_size": 16})
    if times_ops:
        assert report["time"]["mean"] == pytest.approx(0.0, abs=1e-9)
        assert report["estimate_from"] == "single-device runs" and report["compute_from"] == "placed run"
        # five rounds, each the three small batches on one device and then the target, a fifth of the steps each
        assert [b for b, *_ in be.runs] == [2.0, 4.0, 8.0, 16.0] * 5
        assert all((w, s) == (5, 10) for _, _, w, s in be.runs)
        assert all(devs == {cl.names[0]} for b, devs, _, _ in be.runs if b < 16)
        assert graph.op("c")["compute_s"] == pytest.approx(3e-6 * 16)
        # the profiler is asked for memory only, one step per batch size
        assert [s for _, s in be.profiles] == [1, 1, 1, 1]
    else:
        assert report["time"]["mean"] > 0.01  # the profiler's quadratic term is not linear
        assert report["estimate_from"] == "profiler" and report["compute_from"] == "profiler"
        assert [(b, w, s) for b, _, w, s in be.runs] == [(16.0, 5, 50)]  # step 2's placed run only
        assert [s for _, s in be.profiles] == [50, 50, 50, 50]


def test_a_slow_spell_in_fewer_than_half_the_rounds_moves_neither_step():
    """Runs 0 (batch 2, round 1) and 7 (the target, round 2) time every op twice as long: the medians over the
    five rounds ignore both, and the estimate still matches the measurement exactly. With one round they would
    not."""
    cl = uniform_cluster(2, memory_bytes=1e9)
    for rounds, slow, clean in ((5, frozenset({0, 7}), True), (1, frozenset({0}), False)):
        be = _TimedBackend(True, slow=slow)
        se = StandardEvaluationProfiler(batch_sizes=(2, 4, 8), steps=50, run_steps=50, rounds=rounds)
        _, report = se.profile(be, 16.0, profiled(16, LAWS), cl, model_cfg={"batch_size": 16})
        assert (report["time"]["mean"] == pytest.approx(0.0, abs=1e-9)) is clean


def test_rounds_must_fit_the_steps():
    with pytest.raises(ConfigError, match="profiler.rounds"):
        StandardEvaluationProfiler(steps=4, rounds=5)
    with pytest.raises(ConfigError, match="profiler.rounds"):
        StandardEvaluationProfiler(rounds=0)
