"""Baechi's placers m-TOPO, m-ETF and m-SCT (seed 001, sections 2-4): hand-worked cases and properties."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.cluster import Cluster, Device, uniform_cluster
from algorithms.errors import ConfigError, InfeasiblePlacement
from algorithms.graph import OpGraph
from algorithms.passes.baechi import ColocationGrouping, OperatorFusion
from algorithms.placement import check_placement, check_schedule
from algorithms.placers.baechi import METFPlacer, MSCTPlacer, MTOPOPlacer, favorite_children
from algorithms.placers.baechi.m_sct import sct_lp
from algorithms.simulator import simulate

from .strategies import random_clusters, random_dags

PLACERS = [MTOPOPlacer, METFPlacer, MSCTPlacer]


def chain(n: int, *, compute: float = 1.0, persistent: float = 0.0) -> OpGraph:
    g = OpGraph("chain")
    for i in range(n):
        g.add_op(f"o{i}", compute_s=compute, persistent_bytes=persistent)
    for i in range(n - 1):
        g.add_edge(f"o{i}", f"o{i + 1}", bytes=0)
    return g


def figure6_graph() -> OpGraph:
    """Baechi Figure 6: Grad, and the colocated pair Step -> UpdateStep that also needs Grad's output."""
    g = OpGraph("fig6")
    g.add_op("Grad", compute_s=1.0)
    g.add_op("Step", compute_s=1.0, colocation="step")
    g.add_op("UpdateStep", compute_s=1.0, colocation="step")
    g.add_edge("Grad", "UpdateStep", bytes=0)
    g.add_edge("Step", "UpdateStep", bytes=0)
    return g


# ------------------------------------------------------------------------------------------ hand-worked
def test_figure6_unfused_takes_7_time_units():
    # Grad -> device 0 at [0, 1]; Step -> idle device 1 at [0, 1]; UpdateStep follows Step (colocation) and
    # waits for Grad's output: 1 + 5 = 6, runs [6, 7].
    g = figure6_graph()
    cl = uniform_cluster(2, latency_s=5.0)
    pl = METFPlacer().place(g, cl)
    assert pl["Grad"] == "cpu0" and pl["Step"] == "cpu1" and pl["UpdateStep"] == "cpu1"
    assert pl.info["predicted_makespan_s"] == pytest.approx(7.0)
    assert simulate(g, cl, pl, pl.order).makespan == pytest.approx(7.0)


def test_figure6_fused_takes_3_time_units():
    # Step and UpdateStep fuse (Step has out-degree 1); the fused op starts at 1 on Grad's device rather than
    # at 6 on the other one, and ends at 1 + 2 = 3.
    g = figure6_graph()
    cl = uniform_cluster(2, latency_s=5.0)
    grouped, m1 = ColocationGrouping().apply(g)
    fused, m2 = OperatorFusion().apply(grouped)
    cmap = m1.then(m2)
    assert len(fused) == 2
    for placer in (METFPlacer(), MSCTPlacer()):
        pl = placer.place(fused, cl)
        assert pl.info["predicted_makespan_s"] == pytest.approx(3.0)
        assign = cmap.expand_assignment(pl.assignment)
        assert len(set(assign.values())) == 1
        sched = cmap.expand_schedule(pl.order)
        assert simulate(g, cl, assign, sched).makespan == pytest.approx(3.0)


def test_sct_overflows_where_m_sct_fits():
    # Figure 1's situation: a chain of four ops holding 2 memory units each, two devices of 4 units, unit
    # compute and communication.  The LP makes every edge a favorite edge, so classical SCT keeps the chain
    # on one device (makespan 4) and needs 8 units there.  m-SCT places o0, o1 on cpu0 (4 units), finds cpu0
    # full for o2, excludes it, and runs o2 on cpu1 at 2 + 1 = 3 and o3 at 4: makespan 5 within memory.
    g = chain(4, persistent=2.0)
    cl = uniform_cluster(2, 4.0, latency_s=1.0)
    x, facts = sct_lp(g, cl)
    assert facts["lp_status"] == 0
    assert favorite_children(g, x) == [-1, 0, 1, 2]

    sct = MSCTPlacer(memory_aware=False).place(g, cl)
    assert set(sct.assignment.values()) == {"cpu0"}
    assert sct.info["predicted_makespan_s"] == pytest.approx(4.0)
    assert sct.info["predicted_peak_bytes.cpu0"] == pytest.approx(8.0)
    res = simulate(g, cl, sct, sct.order)
    assert res.oom is not None and res.oom.device == "cpu0"

    msct = MSCTPlacer().place(g, cl)
    assert msct.assignment == {"o0": "cpu0", "o1": "cpu0", "o2": "cpu1", "o3": "cpu1"}
    assert msct.info["n_excluded_devices"] == 1
    assert msct.info["predicted_makespan_s"] == pytest.approx(5.0)
    res = simulate(g, cl, msct, msct.order)
    assert res.ok and res.makespan == pytest.approx(5.0)
    assert max(res.peak_memory.values()) <= 4.0


def test_m_etf_equation_1_with_communication():
    # a -> b and a -> c, a on cpu0 [0, 2]; b and c take 3 each; a transfer costs 1.  ETF puts b on cpu0 at 2
    # and c on cpu1 at 2 + 1 = 3 (instead of waiting for cpu0 until 5): makespan 6.
    g = OpGraph("fork")
    g.add_op("a", compute_s=2.0)
    g.add_op("b", compute_s=3.0)
    g.add_op("c", compute_s=3.0)
    g.add_edge("a", "b", bytes=10)
    g.add_edge("a", "c", bytes=10)
    cl = uniform_cluster(2, latency_s=0.5, bytes_per_s=20.0)
    pl = METFPlacer().place(g, cl)
    assert pl.assignment == {"a": "cpu0", "b": "cpu0", "c": "cpu1"}
    assert pl.info["predicted_makespan_s"] == pytest.approx(6.0)
    assert simulate(g, cl, pl, pl.order).makespan == pytest.approx(6.0)


def test_sequential_queues_add_their_wait_to_equation_1():
    # a on d0 ends at 1 and feeds b and c; a 2-byte transfer takes 2.  Put b on d1: its transfer occupies
    # d0's send queue over [1, 3].  c on d2 then starts at 3 in parallel mode, but in sequential mode its
    # transfer waits for d0's send queue: [3, 5], so c can start at 5 (Baechi 3.4).
    from algorithms.placers.baechi.exec_model import ExecModel

    g = OpGraph("seq")
    for o in "abc":
        g.add_op(o, compute_s=1.0)
    g.add_edge("a", "b", bytes=2)
    g.add_edge("a", "c", bytes=2)
    devs = [Device(f"d{i}", "CPU") for i in range(3)]
    starts = {}
    for mode in ("parallel", "sequential"):
        m = ExecModel(g, Cluster(devs, 0.0, 1.0, mode))
        m.commit(0, 0, m.estimate(0, 0))
        est_b = m.estimate(1, 1)
        assert est_b.start == pytest.approx(3.0)
        m.commit(1, 1, est_b)
        starts[mode] = m.estimate(2, 2).start
        assert m.estimate(2, 1).start == pytest.approx(4.0)  # the copy cached on d1 is reused
    assert starts == pytest.approx({"parallel": 3.0, "sequential": 5.0})


def test_m_topo_fills_devices_up_to_the_cap():
    # sizes 1..6 (21 bytes), 3 devices: cap = 21 / 3 + 6 = 13 -> cpu0 takes 1+2+3+4 (10, +5 would be 15),
    # cpu1 takes 5+6 (11); cpu2 stays empty.
    g = OpGraph("sizes")
    for i in range(6):
        g.add_op(f"o{i}", compute_s=1.0, persistent_bytes=i + 1)
    for i in range(5):
        g.add_edge(f"o{i}", f"o{i + 1}", bytes=0)
    cl = uniform_cluster(3, 100.0)
    pl = MTOPOPlacer().place(g, cl)
    assert pl.info["cap_bytes"] == pytest.approx(13.0)
    assert [pl[f"o{i}"] for i in range(6)] == ["cpu0"] * 4 + ["cpu1"] * 2
    assert pl.order == {"cpu0": ["o0", "o1", "o2", "o3"], "cpu1": ["o4", "o5"], "cpu2": []}


def test_m_topo_respects_device_memory():
    g = chain(4, persistent=3.0)
    cl = uniform_cluster(2, 6.0)
    pl = MTOPOPlacer().place(g, cl)
    assert [pl[f"o{i}"] for i in range(4)] == ["cpu0", "cpu0", "cpu1", "cpu1"]
    with pytest.raises(InfeasiblePlacement, match="o2"):
        MTOPOPlacer().place(g, uniform_cluster(2, 4.0))


@pytest.mark.parametrize("placer", PLACERS)
def test_an_op_that_fits_nowhere_is_named(placer):
    g = chain(3, persistent=1.0)
    g.op("o1")["persistent_bytes"] = 50.0
    g.invalidate()
    with pytest.raises(InfeasiblePlacement, match="o1"):
        placer().place(g, uniform_cluster(3, 10.0))


@pytest.mark.parametrize("placer", PLACERS)
def test_a_colocation_group_that_fits_nowhere_is_named(placer):
    g = chain(4, persistent=4.0)
    for i in range(4):
        g.op(f"o{i}")["colocation"] = "big"
    g.invalidate()
    with pytest.raises(InfeasiblePlacement, match="big"):
        placer().place(g, uniform_cluster(2, 10.0))


@pytest.mark.parametrize("placer", [METFPlacer, MSCTPlacer])
def test_colocation_group_takes_the_next_device_when_it_does_not_fit(placer):
    # o0 alone on the first choice; the group {g1, g2} (6 units) does not fit next to o0's 5 units on cpu0,
    # so it goes to cpu1 even though cpu0 could start it earlier.
    g = OpGraph("grp")
    g.add_op("o0", compute_s=1.0, persistent_bytes=5.0)
    g.add_op("g1", compute_s=1.0, persistent_bytes=3.0, colocation="G")
    g.add_op("g2", compute_s=1.0, persistent_bytes=3.0, colocation="G")
    g.add_edge("o0", "g1", bytes=0)
    g.add_edge("g1", "g2", bytes=0)
    cl = uniform_cluster(2, 8.0, latency_s=0.5)
    pl = placer().place(g, cl)
    assert pl["g1"] == pl["g2"] != pl["o0"]
    assert simulate(g, cl, pl, pl.order).ok


def test_device_type_constraints_are_respected():
    g = chain(4)
    g.op("o1")["device_type"] = "GPU"
    g.op("o2")["device_type"] = "CPU"
    g.invalidate()
    cl = Cluster([Device("c", "CPU"), Device("g", "GPU")], 0.1, 10.0)
    for placer in PLACERS:
        pl = placer().place(g, cl)
        check_placement(g, cl, pl)
        assert pl["o1"] == "g" and pl["o2"] == "c"


def test_m_sct_info_and_threshold():
    g = chain(5)
    cl = uniform_cluster(2, latency_s=0.5)
    pl = MSCTPlacer(threshold=0.1).place(g, cl)
    assert pl.info["n_favorite_children"] == 4
    assert pl.info["lp_time_s"] >= 0
    assert set(pl.assignment.values()) == {"cpu0"}  # favorites stay on their parent's device
    with pytest.raises(Exception, match="threshold"):
        MSCTPlacer(threshold=0.0)


def test_favorite_children_repair_keeps_one_child_and_one_parent():
    # a -> b, a -> c, d -> b: with every x below the threshold, the smallest x wins at each end.
    g = OpGraph("rep")
    for o in "abcd":
        g.add_op(o, compute_s=1.0)
    g.add_edge("a", "b", bytes=1)
    g.add_edge("a", "c", bytes=1)
    g.add_edge("d", "b", bytes=1)
    import numpy as np

    idx = g.index()
    edges = [(idx.names[i], idx.names[j]) for i in range(idx.n) for j, _ in idx.succ[i]]
    x = np.array([{("a", "b"): 0.0, ("a", "c"): 0.05, ("d", "b"): 0.01}[e] for e in edges])
    fav = favorite_children(g, x, threshold=0.1)
    named = {idx.names[j]: idx.names[i] for j, i in enumerate(fav) if i >= 0}
    assert named == {"b": "a"}  # a keeps b (x = 0); c loses a (a has a child); b keeps one parent
    fav2 = favorite_children(g, np.where(x == 0.0, 0.5, x), threshold=0.1)
    named2 = {idx.names[j]: idx.names[i] for j, i in enumerate(fav2) if i >= 0}
    assert named2 == {"c": "a", "b": "d"}


def test_group_reserve_is_checked():
    with pytest.raises(Exception, match="group_reserve"):
        METFPlacer(group_reserve="everything").place(chain(2), uniform_cluster(2))


def test_empty_graph():
    for placer in PLACERS:
        pl = placer().place(OpGraph("empty"), uniform_cluster(2))
        assert pl.assignment == {}


# ------------------------------------------------------------------------------------------ properties
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(random_dags(max_ops=25, device_types=True), random_clusters(hetero=True))
def test_every_placement_is_valid(graph, cluster):
    for placer in PLACERS:
        try:
            pl = placer().place(graph, cluster)
        except InfeasiblePlacement:
            continue
        check_placement(graph, cluster, pl)
        check_schedule(graph, pl, pl.order)
        simulate(graph, cluster, pl, pl.order)  # the placer's own order never deadlocks


@SETTINGS
@given(random_dags(max_ops=25, colocation=False), random_clusters(mode="parallel", hetero=True))
def test_prediction_matches_the_simulator(graph, cluster):
    """Without colocation, in parallel mode: the simulator replaying the placer's order reproduces its
    makespan; the placer never used a full device, so the simulator reports no OOM; and the placer's memory
    accounting gives the simulator's peaks (exactly when every op takes time: with several zero-length ops
    at one instant the order of their allocations and frees may differ)."""
    positive = all(a["compute_s"] > 1e-6 for _, a in graph.nx.nodes(data=True))
    for placer in (METFPlacer(), MSCTPlacer()):
        try:
            pl = placer.place(graph, cluster)
        except InfeasiblePlacement:
            continue
        res = simulate(graph, cluster, pl, pl.order)
        assert res.makespan == pytest.approx(pl.info["predicted_makespan_s"], rel=1e-9, abs=1e-12)
        assert res.ok, res.oom.message()
        for d in cluster.names:
            pred = pl.info[f"predicted_peak_bytes.{d}"]
            assert pred <= cluster.device(d).memory_bytes + 1e-6
            if positive:
                assert res.peak_memory[d] == pytest.approx(pred, abs=1e-6)


@SETTINGS
@given(
    random_dags(max_ops=25, colocation=True),
    random_clusters(mode="parallel"),
    st.sampled_from(["persistent", "transient", "full"]),
)
def test_never_on_a_full_device_with_colocation(graph, cluster, reserve):
    """Co-adjusted colocation reserves memory for the group; whatever it reserves, every op is checked when
    it is placed, so the parallel-mode replay fits (or the placer raises)."""
    for placer in (METFPlacer(group_reserve=reserve), MSCTPlacer(group_reserve=reserve)):
        try:
            pl = placer.place(graph, cluster)
        except InfeasiblePlacement:
            continue
        check_placement(graph, cluster, pl)
        res = simulate(graph, cluster, pl, pl.order)
        assert res.ok, res.oom.message()
        assert res.makespan == pytest.approx(pl.info["predicted_makespan_s"], rel=1e-9, abs=1e-12)


@SETTINGS
@given(random_dags(max_ops=25), random_clusters(mode="sequential"))
def test_sequential_mode_stays_within_the_placers_memory(graph, cluster):
    """In sequential mode the placer's times are the simulator's, but a re-timing (`ExecModel._retime`) can
    move ops after their memory was checked; its own accounting never exceeds a device, and the simulator's
    replay of a returned placement does not run out of memory (`safeguards.place_checked` replays and
    re-places)."""
    for placer in (METFPlacer(), MSCTPlacer()):
        try:
            pl = placer.place(graph, cluster)
        except InfeasiblePlacement:
            continue
        check_placement(graph, cluster, pl)
        for d in cluster.names:
            assert pl.info[f"predicted_peak_bytes.{d}"] <= cluster.device(d).memory_bytes + 1e-6
        res = simulate(graph, cluster, pl, pl.order)
        assert res.ok, res.oom.message() if res.oom else ""
        assert res.order == pl.order  # the replay ran the placer's per-device order


@SETTINGS
@given(random_dags(min_ops=2, max_ops=20, colocation=False), st.integers(1, 4))
def test_unlimited_memory_m_etf_beats_a_single_device_or_ties(graph, n):
    """With free communication, ETF's makespan is at most the serial time (it never waits needlessly)."""
    cl = uniform_cluster(n)
    pl = METFPlacer().place(graph, cl)
    serial = sum(a["compute_s"] for _, a in graph.nx.nodes(data=True))
    assert pl.info["predicted_makespan_s"] <= serial + 1e-9


@pytest.mark.slow
def test_synthetic_training_graph_memory_limited():
    """A level-based training graph on 4 devices with memory cut to 30% of the static need: the placers
    succeed, and m-ETF / m-SCT (parallel mode) replay without OOM."""
    from algorithms.workloads.synthetic import level_dag

    g = level_dag(levels=30, training=True, colocated_fraction=0.1, memory_unit_bytes=1e5, seed=3)
    need = g.total_memory()
    cl = uniform_cluster(4, 0.3 * need, latency_s=1e-4, bytes_per_s=5e9)
    for placer in (METFPlacer(), MSCTPlacer(), MTOPOPlacer()):
        pl = placer.place(g, cl)
        check_placement(g, cl, pl)
        res = simulate(g, cl, pl, pl.order)
        assert res.ok, (type(placer).__name__, res.oom.message() if res.oom else "")
        assert len(pl.devices_used()) >= 2


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_dags(min_ops=2, max_ops=30, colocation=False, training=True), random_clusters(min_devices=2))
def test_sct_lp_reductions_keep_the_optimum(graph, cluster):
    """The implied-edge, slack-edge and bound reductions of `sct_lp` are exact: the LP optimum (makespan)
    equals the one of the LP as written, and the returned x satisfies the full LP with that makespan."""
    x_red, f_red = sct_lp(graph, cluster)
    x_full, f_full = sct_lp(graph, cluster, reduce=False)
    assert f_red["lp_status"] == 0 and f_full["lp_status"] == 0
    if "lp_makespan_s" not in f_full:
        return  # no edges or all costs zero: nothing was solved
    assert f_red["lp_makespan_s"] == pytest.approx(f_full["lp_makespan_s"], rel=1e-6, abs=1e-9)
    # x_red is feasible for the full LP: at most one favorite child / parent in the relaxed sense, and the
    # left-justified starts it implies finish within the optimum
    idx = graph.index()
    edges = [(i, j, b) for i in range(idx.n) for j, b in idx.succ[i]]
    out_sum = [0.0] * idx.n
    in_sum = [0.0] * idx.n
    for (i, j, _), xe in zip(edges, x_red):
        out_sum[i] += xe
        in_sum[j] += xe
    for v in range(idx.n):
        assert out_sum[v] >= len(idx.succ[v]) - 1 - 1e-6
        assert in_sum[v] >= len(idx.pred[v]) - 1 - 1e-6
    devs = cluster.devices
    p = [idx.compute_s[i] * sum(1.0 / d.speed for d in devs) / len(devs) for i in range(idx.n)]
    lat = [[cluster.latency_table[a][b] for b in range(len(devs))] for a in range(len(devs))]
    pairs = [(a, b) for a in range(len(devs)) for b in range(len(devs)) if a != b]
    mlat = sum(lat[a][b] for a, b in pairs) / len(pairs)
    mibw = sum(1.0 / cluster.bandwidth_table[a][b] for a, b in pairs) / len(pairs)
    start = [0.0] * idx.n
    for (i, j, b), xe in zip(edges, x_red):  # edges in topological order of their source
        start[j] = max(start[j], start[i] + p[i] + (mlat + b * mibw) * xe)
    span = max(start[i] + p[i] for i in range(idx.n))
    assert span <= f_full["lp_makespan_s"] * (1 + 1e-5) + 1e-9


def test_m_sct_excludes_only_an_exhausted_device():
    # x (8 bytes of output) feeds y and z (4 temporary bytes each).  cpu0 (10 bytes) cannot run y or z while
    # x's output is live there (8 + 4 > 10): a transient refusal, since that output is freed once both have
    # run; cpu1 (13 bytes) takes them with a copy of x.  Excluding at the first refusal drops cpu0 for good,
    # the default only when a device could not hold the op even with no transient tensors live.
    g = OpGraph("transient")
    g.add_op("x", compute_s=1.0, output_bytes=8)
    for name in ("y", "z"):
        g.add_op(name, compute_s=1.0, temporary_bytes=4)
        g.add_edge("x", name, bytes=8)
    cl = Cluster([Device("cpu0", "CPU", 10.0), Device("cpu1", "CPU", 13.0)], latency_s=0.1)
    strict = MSCTPlacer(exclusion="refusal").place(g, cl)
    default = MSCTPlacer().place(g, cl)
    assert strict.info["n_excluded_devices"] == 1
    assert default.info["n_excluded_devices"] == 0
    for pl in (strict, default):
        assert pl["x"] == "cpu0" and pl["y"] == pl["z"] == "cpu1"
        assert simulate(g, cl, pl, pl.order).ok
    with pytest.raises(ConfigError, match="exclusion"):
        MSCTPlacer(exclusion="never").place(g, cl)


# ------------------------------------------------------------------------- group retries and m-TOPO rounds
def pinned_group_graph() -> OpGraph:
    """c holds 5 persistent bytes (weights) and feeds a; a and b form a colocation group (a forward op and
    its backward op) and b needs 6 temporary bytes.  On 10-byte devices a goes with c (no transfer), so b
    finds its group's device full: 5 + a's output 1 + 6 + b's output 1 = 13 > 10.  On the other device b
    needs 1 (copy of c's output) + 1 + 6 + 1 = 9 <= 10."""
    g = OpGraph("pinned")
    g.add_op("c", compute_s=1.0, persistent_bytes=5, output_bytes=1)
    g.add_op("a", compute_s=1.0, output_bytes=1, colocation="g")
    g.add_op("b", compute_s=1.0, temporary_bytes=6, output_bytes=1, colocation="g", phase="backward")
    g.add_edge("c", "a", bytes=1)
    g.add_edge("a", "b", bytes=1)
    return g


@pytest.mark.parametrize("cls", [METFPlacer, MSCTPlacer])
def test_group_overflow_retries_with_the_group_kept_off_the_full_device(cls):
    g = pinned_group_graph()
    cl = uniform_cluster(2, 10, latency_s=0.5)
    with pytest.raises(InfeasiblePlacement, match="'b' of colocation group 'g' must go to device 'cpu0'"):
        cls(group_retries=0).place(g, cl)
    pl = cls().place(g, cl)
    assert pl.info["n_group_retries"] == 1
    assert pl["c"] == "cpu0" and pl["a"] == "cpu1" and pl["b"] == "cpu1"
    res = simulate(g, cl, pl, pl.order)
    assert res.ok and max(res.peak_memory.values()) <= 10


def test_group_retries_must_be_non_negative():
    with pytest.raises(ConfigError, match="group_retries"):
        METFPlacer(group_retries=-1)
    with pytest.raises(ConfigError, match="group_retries"):
        MSCTPlacer(group_retries=-1)


def m_topo_rounds_graph() -> OpGraph:
    """A forward chain f0 -> f1 -> f2 -> f3 and its backward chain b3 -> ... -> b0, each b_i colocated with
    f_i; the backward ops need 8 temporary bytes.  m-TOPO fills device 0 with f0, f1 under its cap; their
    backward partners then need 8 more bytes there than a first pass accounts for: on 16-byte devices the
    first pass puts everything on device 0 (peak 17); the second lowers device 0's cap below the 8 bytes
    its checks let through and splits the chains after f2 (peaks 16 and 13)."""
    g = OpGraph("rounds")
    for i in range(4):
        g.add_op(f"f{i}", compute_s=1.0, output_bytes=2, colocation=f"g{i}")
    for i in range(4):
        g.add_op(
            f"b{i}",
            compute_s=1.0,
            temporary_bytes=8,
            output_bytes=1,
            colocation=f"g{i}",
            phase="backward",
            forward_of=f"f{i}",
        )
    for i in range(3):
        g.add_edge(f"f{i}", f"f{i + 1}", bytes=2)
        g.add_edge(f"b{i + 1}", f"b{i}", bytes=1)
    g.add_edge("f3", "b3", bytes=2)
    for i in range(3):
        g.add_edge(f"f{i}", f"b{i}", bytes=2)
    return g


def test_m_topo_lowers_the_cap_of_a_device_its_groups_overfill():
    g = m_topo_rounds_graph()
    cl = uniform_cluster(2, 16)
    # one round overflows cpu0 in the backward pass: m-TOPO says so (op and device) instead of returning it
    with pytest.raises(InfeasiblePlacement, match=r"'cpu0'.*'b3'|'b3'.*'cpu0'"):
        MTOPOPlacer(max_rounds=1).place(g, cl)
    pl = MTOPOPlacer().place(g, cl)
    assert pl.info["rounds"] == 2 and pl.info["n_group_overflows"] == 0
    assert pl.info["cap_bytes.cpu0"] < pl.info["cap_bytes"]
    assert pl.assignment["f3"] == "cpu1" and pl.assignment["f0"] == "cpu0"
    res = simulate(g, cl, pl, pl.order)
    assert res.ok, res.oom.message() if res.oom else ""
    assert res.peak_memory == {"cpu0": 16.0, "cpu1": 11.0}
    check_placement(g, cl, pl)


def _positive_times(graph):
    """The graph with every op taking some time: the simulator serves ops that start and end at one instant
    after the events already queued then (`algorithms.comm_queue`), a tie the placers' order does not model."""
    for name in graph.ops:
        graph.op(name)["compute_s"] = 1e-3 + float(graph.op(name)["compute_s"])
    graph.invalidate()
    return graph


@SETTINGS
@given(
    random_dags(max_ops=22, training=True),
    random_clusters(min_devices=2, mode="sequential"),
    st.booleans(),
    st.sampled_from(["m_etf", "m_sct"]),
)
def test_sequential_model_times_equal_the_simulators(graph, cluster, memory_aware, which):
    """Issue 17, item 2: in sequential mode the placer's execution model and the simulator share one model of
    transfer order (`algorithms.comm_queue`), so every op's planned start and every planned transfer's start
    and arrival are the simulator's replay of the placement in its order."""
    from algorithms.placers.baechi.exec_model import ExecModel
    from algorithms.placers.baechi.pair_queue import PairQueue
    from algorithms.placers.baechi.sct_queue import SCTQueue

    graph = _positive_times(graph)
    model = ExecModel(graph, cluster, memory_aware=memory_aware)
    try:
        if which == "m_etf":
            PairQueue(model).run()
        else:
            x, _ = sct_lp(graph, cluster, model.mean_durations())
            SCTQueue(model, favorite_children(graph, x), exclude_full=memory_aware).run()
    except InfeasiblePlacement:
        return
    pl = model.placement({})
    res = simulate(graph, cluster, pl.assignment, pl.order, record_memory=False)
    names = graph.index().names
    for i, name in enumerate(names):
        assert model.start[i] == pytest.approx(res.start[i], rel=1e-12, abs=1e-12), name
    planned = {(names[j], cluster.devices[p].name): t for (j, p), t in model.planned_transfers().items()}
    simulated = {(src, dst): (s0, a) for src, _, dst, s0, a, _ in res.transfers}
    assert planned.keys() == simulated.keys()
    for key, (s0, a) in simulated.items():
        assert planned[key] == pytest.approx((s0, a), rel=1e-12, abs=1e-12), key
    assert pl.info["predicted_makespan_s"] == pytest.approx(res.makespan, rel=1e-12, abs=1e-12)
